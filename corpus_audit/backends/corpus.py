"""Corpus readers: parquet, CSV, JSONL and Hugging Face ``save_to_disk`` datasets.

One small protocol (:class:`CorpusReader`) and a registry by format name (:data:`READERS`,
:func:`register_reader`). A reader only knows how to list a file's columns, split it into
units of work (parquet row groups; one unit for the other formats) and stream a unit as arrow
record batches of the columns asked for. Everything else is shared here:

- **Resolving the corpus** (:func:`resolve_corpus`): config paths may be files, globs or
  directories (searched recursively for files of a known format; names starting with ``.`` or
  ``_`` are skipped). The resolved absolute paths are de-duplicated and **sorted**; a file's
  ``file_id`` is its index in that sorted list, so the order paths were given in never matters.
- **Columns**: the caption column is ``corpus.text_column`` when set, else the first of
  ``TEXT``, ``caption``, ``text`` (then the same names in any letter case); the URL column is
  ``corpus.url_column`` or ``URL``/``url`` (optional: missing means NULL urls).
- **Cleaning** (:func:`clean_batch`): every batch comes out as ``row_in_file`` (int64,
  0-based: parquet/CSV data row, JSONL line, HF dataset index), ``text``, ``url``, ``key``
  (strings). Captions that are null or empty are counted (``rows_null_text``); captions whose
  bytes are not valid UTF-8 (possible in CSV/JSONL, or a broken parquet writer) are counted
  (``rows_bad_text``) and come out as NULL. Both are skipped by ``select``, never fatal.
- **Errors**: :class:`~corpus_audit.core.errors.CorpusError` naming the file for a missing
  caption column (listing the columns it has), a caption column whose type is not text
  (a parquet/HF column of numbers, lists...: naming the column and its type; a single
  non-string value in a JSONL caption is read as its JSON text), an unreadable/corrupt file, malformed
  JSON, an unknown format. Column names are quoted through
  :func:`~corpus_audit.core.errors.printable` (a header can hold terminal escape sequences). A file with 0 rows (or 0 bytes) is not an error here: it is read as empty
  and counted; ``select`` fails only when the whole corpus is empty.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.backends import boundary, hub, storage
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.errors import CorpusError, NotTextError, printable
from corpus_audit.core.registry import Registry, has_members
from corpus_audit.core.urls import is_url, local_path, scheme

TEXT_ALIASES = ("TEXT", "caption", "text")
URL_ALIASES = ("URL", "url")
DEFAULT_BATCH_ROWS = 262_144

BATCH_SCHEMA = pa.schema(
    [("row_in_file", pa.int64()), ("text", pa.string()), ("url", pa.string()), ("key", pa.string())]
)


# -- data types -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CorpusFile:
    """One resolved corpus file; ``file_id`` is its index in the sorted list of paths.
    ``path`` is an absolute local path or a URL (``s3://bucket/key``); ``store`` holds the
    ``[storage]`` options a worker opens a URL with (no credentials; None for local files)."""

    file_id: int
    path: str
    format: str
    store: StoreOptions | None = None
    # what the store's listing said of the object (size, ETag...): planning and the
    # fingerprint use it instead of asking the store again (M12); None for local files
    known: tuple[tuple[str, Any], ...] | None = field(default=None, compare=False)


def source(
    path: str | Path,
    store: StoreOptions | None = None,
    known: tuple[tuple[str, Any], ...] | None = None,
) -> Path | str:
    """What a reader is given: a :class:`~pathlib.Path` for a local file; for an object in
    a store, the URL string itself (a ``Path`` would fold ``s3://`` into ``s3:/``) carrying
    the ``store`` options it is opened with and what its listing said of it (``known``;
    :func:`~corpus_audit.backends.storage.bind`)."""
    if isinstance(path, str) and is_url(path):
        return storage.bind(path, store, known)
    return Path(path)


def _remote(path: Path | str) -> bool:
    """Whether a reader was given a store's URL (see :func:`source`)."""
    return isinstance(path, str) and is_url(path)


@dataclass(frozen=True)
class ColumnMap:
    """The source column names used for one file (``url``/``key`` may be absent)."""

    text: str
    url: str | None = None
    key: str | None = None

    def names(self) -> list[str]:
        return [c for c in (self.text, self.url, self.key) if c is not None]


@dataclass
class FileInfo:
    """What a reader learnt from a file's header/footer without reading its rows."""

    columns: list[str]
    rows: int | None  # None when unknown before reading (CSV, JSONL, HF)
    units: list[Any] = field(default_factory=lambda: [None])  # units of work, read in parallel
    empty: bool = False  # a 0-byte file, or one with no columns at all
    types: dict[str, pa.DataType] = field(default_factory=dict)  # where the header says


@dataclass
class CleanBatch:
    """One batch in :data:`BATCH_SCHEMA` with counts of the captions that cannot be used."""

    table: pa.Table
    rows: int  # rows read, usable or not
    null_text: int  # null or empty captions
    bad_text: int  # captions with invalid UTF-8 (set to NULL in ``table``)


class CorpusReader(Protocol):
    """The protocol every format implements (see :class:`ParquetReader` for an example)."""

    name: str
    extensions: tuple[str, ...]  # lower-case name endings this reader claims in format=auto

    def inspect(self, path: Path) -> FileInfo:
        """Columns, row count if cheap, units of work; raise CorpusError if unreadable."""
        ...

    def read(
        self, path: Path, unit: Any, columns: ColumnMap, batch_rows: int
    ) -> Iterator[tuple[pa.RecordBatch | pa.Table, Any]]:
        """Yield ``(batch, row_numbers)`` for one unit: ``batch`` holds ``columns.names()``
        (missing ones may be absent) and ``row_numbers`` is an int64 array/ndarray, or an
        ``int`` giving the row number of the batch's first row (rows consecutive)."""
        ...


# format name (corpus.format) -> reader; config validation takes its allowed values from here
READERS: Registry[CorpusReader] = Registry(
    "corpus reader",
    "corpus_audit.corpus_readers",
    expects=(
        "a corpus reader (name, extensions, inspect, read)",
        has_members(strings=("name",), methods=("inspect", "read")),
    ),
)


def register_reader(reader: CorpusReader) -> CorpusReader:
    """Add the reader under ``reader.name`` (a name registered twice is a ValueError)."""
    return READERS.register(reader.name, reader)


def get_reader(fmt: str) -> CorpusReader:
    """The reader registered for ``fmt``; CorpusError for an unknown format."""
    if fmt not in READERS:
        raise CorpusError(f"unknown corpus format '{fmt}' (known: {', '.join(sorted(READERS))})")
    return READERS.get(fmt)


# -- text cleaning ----------------------------------------------------------------------------
def _as_strings(arr: pa.Array | pa.ChunkedArray, *, count_bad: bool) -> tuple[pa.Array, int]:
    """``arr`` as a string array; invalid UTF-8 values become NULL (and are counted) when
    ``count_bad``, else are decoded with U+FFFD replacements (urls, keys)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string()), 0
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        arr = arr.cast(pa.string())
        t = arr.type
    if pa.types.is_string(t):
        try:
            arr.validate(full=True)
            return arr, 0
        except pa.ArrowInvalid:
            raw = arr.view(pa.binary())
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        try:
            return arr.cast(pa.string()), 0  # the cast validates UTF-8
        except pa.ArrowInvalid:
            raw = arr
    else:  # numbers, booleans...: their text form
        return arr.cast(pa.string()), 0
    # slow path, only for batches holding invalid bytes
    out: list[str | None] = []
    bad = 0
    for value in raw.to_pylist():
        if value is None:
            out.append(None)
        elif count_bad:
            try:
                out.append(value.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
                bad += 1
        else:
            out.append(value.decode("utf-8", errors="replace"))
    return pa.array(out, pa.string()), bad


def is_text_type(dtype: pa.DataType) -> bool:
    """Whether a column of ``dtype`` can hold captions: strings, binary (decoded as UTF-8),
    all-null, or a dictionary of those."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    return (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_binary(dtype)
        or pa.types.is_binary_view(dtype)
        or pa.types.is_null(dtype)
    )


def check_text_column(
    path: str | Path,
    column: str,
    dtype: pa.DataType | str,
    setting: str = "corpus.text_column (--text-column)",
) -> None:
    """CorpusError when the caption column holds something else than text (an integer id
    column picked by an alias, a list of tokens...): captions are never made up from it.
    ``setting`` is the key that named the column, which the message says to change."""
    if isinstance(dtype, str) or not is_text_type(dtype):
        raise CorpusError(
            f"{printable(path)}: the caption column '{printable(column)}' holds {dtype} "
            f"values, not text; set {setting} to the column with the captions"
        )


def clean_batch(
    batch: pa.RecordBatch | pa.Table,
    rows: Any,
    columns: ColumnMap,
    keep: Callable[[pa.Array], pa.Array] | None = None,
) -> CleanBatch:
    """Bring a reader's batch into :data:`BATCH_SCHEMA` and count unusable captions.

    ``keep`` (optional) maps the cleaned caption array to a boolean mask; only those rows
    are returned (url/key are then converted for them alone). Counts cover every row.
    """
    n = batch.num_rows
    names = set(batch.schema.names)
    caption = batch.column(columns.text)
    if not is_text_type(caption.type):
        raise NotTextError(columns.text, caption.type)
    text, bad = _as_strings(caption, count_bad=True)
    null_text = text.null_count - bad + int(pc.sum(pc.equal(text, "")).as_py() or 0)
    if isinstance(rows, int):
        row_numbers = pa.array(np.arange(rows, rows + n, dtype=np.int64))
    else:
        row_numbers = pa.array(rows, pa.int64())
    others = [
        batch.column(c) if c is not None and c in names else None
        for c in (columns.url, columns.key)
    ]
    if keep is not None:
        mask = keep(text)
        text, row_numbers = text.filter(mask), row_numbers.filter(mask)
        others = [o.filter(mask) if o is not None else None for o in others]
    m = len(text)
    url, key = (
        _as_strings(o, count_bad=False)[0] if o is not None else pa.nulls(m, pa.string())
        for o in others
    )
    table = pa.Table.from_arrays([row_numbers, text, url, key], schema=BATCH_SCHEMA)
    return CleanBatch(table, n, null_text, bad)


def resolve_columns(
    path: str | Path,
    columns: list[str],
    text_column: str = "",
    url_column: str = "",
    key_column: str = "",
) -> ColumnMap:
    """Pick the caption/url/key columns of one file (aliases, then case-insensitive aliases).

    Raises CorpusError naming the file and listing its columns when the caption column (or
    an explicitly configured url/key column) is missing.
    """
    have = list(columns)
    lower = {c.lower(): c for c in reversed(have)}
    where = printable(path)
    listed = ", ".join(printable(c) for c in have) or "none"

    def pick(override: str, aliases: tuple[str, ...], what: str, required: bool) -> str | None:
        if override:
            if override in have:
                return override
            raise CorpusError(
                f"{where}: no {what} column '{printable(override)}' (columns: {listed})"
            )
        for alias in aliases:
            if alias in have:
                return alias
        for alias in aliases:
            if alias.lower() in lower:
                return lower[alias.lower()]
        if required:
            raise CorpusError(
                f"{where}: no caption column (looked for {', '.join(aliases)}; set "
                f"corpus.text_column or --text-column). Columns: {listed}"
            )
        return None

    text = pick(text_column, TEXT_ALIASES, "caption", True)
    url = pick(url_column, URL_ALIASES, "url", False)
    key = pick(key_column, (), "key", False) if key_column else None
    assert text is not None
    return ColumnMap(text, url, key)


# -- parquet ----------------------------------------------------------------------------------
class ParquetReader:
    """Parquet files (pyarrow); units are row groups, so one big file is read in parallel."""

    name = "parquet"
    extensions = (".parquet", ".pq", ".parq")

    def inspect(self, path: Path) -> FileInfo:
        import pyarrow.parquet as pq

        if (storage.size(path) if _remote(path) else path.stat().st_size) == 0:
            return FileInfo([], 0, [], empty=True)
        try:
            if _remote(path):
                with storage.open_input(path) as fh:
                    meta = pq.ParquetFile(fh).metadata
            else:
                meta = pq.ParquetFile(path).metadata
        except (pa.ArrowException, OSError, ValueError) as exc:
            if _remote(path) and not isinstance(exc, pa.ArrowException):
                raise storage.store_error(path, exc) from None
            if _remote(path) and storage.is_store_problem(exc):  # raised through pyarrow
                raise storage.store_error(path, exc) from None
            raise CorpusError(f"{path}: not a readable parquet file ({exc})") from None
        units, start = [], 0
        for i in range(meta.num_row_groups):
            rows = meta.row_group(i).num_rows
            if rows:
                units.append((i, start))
            start += rows
        schema = meta.schema.to_arrow_schema()
        return FileInfo(
            list(schema.names), meta.num_rows, units, types={f.name: f.type for f in schema}
        )

    def read(self, path: Path, unit: Any, columns: ColumnMap, batch_rows: int):
        import pyarrow.parquet as pq

        group, start = unit
        try:
            # a URL: this worker opens the object itself and reads the footer and the
            # chunks of the columns asked for in this row group, by range requests
            fh = storage.open_input(path) if _remote(path) else None
            try:
                pf = (
                    pq.ParquetFile(fh, pre_buffer=True)
                    if fh
                    else pq.ParquetFile(path, memory_map=True)
                )
                cols = [c for c in columns.names() if c in pf.schema_arrow.names]
                for batch in pf.iter_batches(
                    batch_size=batch_rows, row_groups=[group], columns=cols, use_threads=False
                ):
                    yield batch, start
                    start += batch.num_rows
            finally:
                if fh is not None:
                    fh.close()
        except (pa.ArrowException, OSError) as exc:
            if _remote(path) and not isinstance(exc, pa.ArrowException):
                raise storage.store_error(path, exc) from None
            raise CorpusError(
                f"{path}: corrupt parquet data in row group {group} ({exc})"
            ) from None


# -- CSV --------------------------------------------------------------------------------------
def _open_bytes(path: Path | str) -> Any:
    """A buffered binary stream of the file, decompressed by name (.gz, .bz2, .zst, ...)."""
    if _remote(path):
        return storage.open_input(path, compression="infer", stream=True)
    return io.BufferedReader(pa.input_stream(str(path), compression="detect"))


class CsvReader:
    """CSV/TSV files with a header row (pyarrow streaming reader; quoted newlines allowed)."""

    name = "csv"
    extensions = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".csv.zst", ".csv.bz2")

    @staticmethod
    def _delimiter(path: Path | str) -> str:
        return "\t" if ".tsv" in str(path).rsplit("/", 1)[-1].lower() else ","

    def inspect(self, path: Path) -> FileInfo:
        try:
            with _open_bytes(path) as fh:
                first = fh.readline()
        except (pa.ArrowException, OSError) as exc:
            raise CorpusError(f"{path}: cannot read the CSV file ({exc})") from None
        line = first.decode("utf-8-sig", errors="replace").strip("\r\n")
        if not line.strip():
            return FileInfo([], 0, [None], empty=True)
        try:
            header = next(csv.reader([line], delimiter=self._delimiter(path)))
        except csv.Error as exc:  # e.g. a bare carriage return inside a column name
            raise CorpusError(f"{printable(path)}: malformed CSV header line ({exc})") from None
        return FileInfo(header, None, [None])

    def read(self, path: Path, unit: Any, columns: ColumnMap, batch_rows: int):
        import pyarrow.csv as pacsv

        cols = columns.names()
        read = pacsv.ReadOptions(block_size=max(1 << 20, batch_rows * 96), use_threads=False)
        parse = pacsv.ParseOptions(delimiter=self._delimiter(path), newlines_in_values=True)
        convert = pacsv.ConvertOptions(
            column_types={c: pa.binary() for c in cols},
            include_columns=cols,
            include_missing_columns=True,
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )
        start = 0
        try:
            stream = (
                _open_bytes(path)
                if _remote(path)
                else pa.input_stream(str(path), compression="detect")
            )
            with stream as fh:
                reader = pacsv.open_csv(fh, read, parse, convert)
                for batch in reader:
                    yield batch, start
                    start += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise CorpusError(f"{path}: malformed CSV after data row {start} ({exc})") from None


# -- JSONL ------------------------------------------------------------------------------------
class JsonlReader:
    """Newline-delimited JSON objects; ``row_in_file`` is the 0-based line number.

    Blocks of lines are parsed with pyarrow's JSON reader; a block that fails (invalid UTF-8,
    a value of another type) is parsed again line by line in Python, where a caption with
    invalid UTF-8 is counted and skipped and a line that is not a JSON object is an error.
    """

    name = "jsonl"
    extensions = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz", ".jsonl.zst")

    def inspect(self, path: Path) -> FileInfo:
        try:
            with _open_bytes(path) as fh:
                for lineno, raw in enumerate(fh):
                    if raw.strip():
                        try:
                            obj = json.loads(raw.decode("utf-8", errors="replace"))
                        except ValueError as exc:
                            raise CorpusError(
                                f"{path}:{lineno + 1}: not valid JSON ({exc})"
                            ) from None
                        if not isinstance(obj, dict):
                            raise CorpusError(
                                f"{path}:{lineno + 1}: a JSONL line must be an object"
                            )
                        return FileInfo(list(obj), None, [None])
        except (pa.ArrowException, OSError) as exc:
            raise CorpusError(f"{path}: cannot read the JSONL file ({exc})") from None
        return FileInfo([], 0, [None], empty=True)

    def read(self, path: Path, unit: Any, columns: ColumnMap, batch_rows: int):
        lineno = 0
        block: list[bytes] = []
        try:
            with _open_bytes(path) as fh:
                for raw in fh:
                    block.append(raw)
                    if len(block) >= batch_rows:
                        yield from self._parse_block(path, block, lineno, columns)
                        lineno += len(block)
                        block = []
        except (pa.ArrowException, OSError) as exc:
            raise CorpusError(f"{path}: cannot read the JSONL file ({exc})") from None
        if block:
            yield from self._parse_block(path, block, lineno, columns)

    def _parse_block(self, path: Path, lines: list[bytes], first: int, columns: ColumnMap):
        import numpy as np
        import pyarrow.json as pajson

        keep = [i for i, raw in enumerate(lines) if raw.strip()]
        if not keep:
            return
        rows = np.asarray(keep, dtype=np.int64) + first
        names = columns.names()
        schema = pa.schema([(c, pa.string()) for c in names])
        data = b"\n".join(lines[i].rstrip(b"\r\n") for i in keep) + b"\n"
        try:
            table = pajson.read_json(
                io.BytesIO(data),
                read_options=pajson.ReadOptions(
                    use_threads=False, block_size=max(len(data), 1 << 20)
                ),
                parse_options=pajson.ParseOptions(
                    explicit_schema=schema, unexpected_field_behavior="ignore"
                ),
            )
            if table.num_rows == len(keep):
                yield table, rows
                return
        except pa.ArrowInvalid:
            pass
        yield self._parse_slow(path, lines, keep, first, names), rows

    @staticmethod
    def _parse_slow(path: Path, lines: list[bytes], keep: list[int], first: int, names: list[str]):
        values: dict[str, list[Any]] = {c: [] for c in names}
        for i in keep:
            raw = lines[i]
            try:
                obj = json.loads(raw.decode("utf-8", errors="surrogateescape"))
            except ValueError as exc:
                raise CorpusError(f"{path}:{first + i + 1}: not valid JSON ({exc})") from None
            if not isinstance(obj, dict):
                raise CorpusError(f"{path}:{first + i + 1}: a JSONL line must be an object")
            for c in names:
                v = obj.get(c)
                if v is None:
                    values[c].append(None)
                    continue
                s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                # undecodable bytes came back as lone surrogates: keep them as raw bytes so
                # clean_batch counts the caption as invalid UTF-8
                values[c].append(s.encode("utf-8", errors="surrogateescape"))
        return pa.table({c: pa.array(values[c], pa.binary()) for c in names})


# -- Hugging Face datasets (save_to_disk) -------------------------------------------------------
class HfDiskReader:
    """A ``datasets`` Dataset saved with ``save_to_disk``: a directory holding ``state.json``
    and arrow stream files, read in the order ``state.json`` lists them (``row_in_file`` is
    the dataset index). A ``DatasetDict`` directory expands into one corpus file per split.
    The ``datasets`` package itself is not needed."""

    name = "hf"
    extensions: tuple[str, ...] = ()

    @staticmethod
    def data_files(path: Path | str) -> list[Path]:
        if _remote(path):
            raise CorpusError(
                f"{printable(path)}: a save_to_disk directory is read from a local path only; "
                "point corpus.paths at the dataset's parquet files on the store instead"
            )
        path = Path(path)
        state_path = path / "state.json"
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
            files = [path / d["filename"] for d in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorpusError(f"{path}: not a datasets save_to_disk directory ({exc})") from None
        return files

    def inspect(self, path: Path) -> FileInfo:
        files = self.data_files(path)
        if not files:
            return FileInfo([], 0, [None], empty=True)
        try:
            with pa.memory_map(str(files[0])) as source:
                schema = pa.ipc.open_stream(source).schema
        except (pa.ArrowException, OSError) as exc:
            raise CorpusError(f"{files[0]}: not a readable arrow stream file ({exc})") from None
        return FileInfo(list(schema.names), None, [None], types={f.name: f.type for f in schema})

    def read(self, path: Path, unit: Any, columns: ColumnMap, batch_rows: int):
        start = 0
        for f in self.data_files(path):
            try:
                with pa.memory_map(str(f)) as source:
                    reader = pa.ipc.open_stream(source)
                    cols = [c for c in columns.names() if c in reader.schema.names]
                    pending: list[pa.RecordBatch] = []
                    count = 0
                    for batch in reader:
                        pending.append(batch.select(cols))
                        count += batch.num_rows
                        if count >= batch_rows:  # HF writes 1000-row batches: regroup them
                            yield pa.Table.from_batches(pending).combine_chunks(), start
                            start += count
                            pending, count = [], 0
                    if pending:
                        yield pa.Table.from_batches(pending).combine_chunks(), start
                        start += count
            except (pa.ArrowException, OSError) as exc:
                raise CorpusError(f"{f}: not a readable arrow stream file ({exc})") from None


for _reader in (ParquetReader(), CsvReader(), JsonlReader(), HfDiskReader()):
    register_reader(_reader)


# -- resolving paths ----------------------------------------------------------------------------
def _is_hf_dir(path: Path) -> bool:
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def _hf_splits(path: Path) -> list[Path]:
    """The split directories of a saved DatasetDict (or the dataset directory itself)."""
    if (path / "dataset_dict.json").is_file():
        try:
            splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorpusError(f"{path}: unreadable dataset_dict.json ({exc})") from None
        return [path / s for s in splits]
    return [path]


def reader_extensions() -> list[tuple[str, tuple[str, ...]]]:
    """``(format, the name endings its reader claims)`` of every registered reader, plugins
    loaded now (a registry holds a plugin as its lazy ``module:attribute`` until then); a
    reader whose ``extensions`` is not a list of texts is one line naming it."""
    out = []
    for fmt in READERS.names():
        reader = READERS.get(fmt)
        extensions = getattr(reader, "extensions", None)
        if isinstance(extensions, str) or not isinstance(extensions, (tuple, list)):
            raise CorpusError(
                f"{boundary.backend_name(READERS, fmt)}: its extensions are "
                f"{boundary.shown(extensions)}, not a tuple of name endings ('.arrow',)"
            )
        if not all(isinstance(e, str) and e for e in extensions):
            raise CorpusError(
                f"{boundary.backend_name(READERS, fmt)}: its extensions hold something that is "
                "not a name ending ('.arrow')"
            )
        out.append((fmt, tuple(e.lower() for e in extensions)))
    return out


def detect_format(path: Path | str) -> str:
    """The registered format whose extension ends ``path``'s name (longest wins); ``path``
    may be a URL (its last ``/`` component is the name)."""
    if _remote(path):
        name = str(path).rstrip("/").rsplit("/", 1)[-1].lower()
    elif path.is_dir():
        if _is_hf_dir(path):
            return "hf"
        raise CorpusError(f"{path}: a directory that is not a saved datasets dataset")
    else:
        name = path.name.lower()
    best, best_len = None, 0
    for fmt, extensions in reader_extensions():
        for ext in extensions:
            if name.endswith(ext) and len(ext) > best_len:
                best, best_len = fmt, len(ext)
    if best is None:
        raise CorpusError(
            f"{path}: cannot tell the corpus format from the name; set corpus.format "
            f"(one of {', '.join(sorted(READERS))})"
        )
    return best


def _hidden(path: Path, root: Path) -> bool:
    rel = path.relative_to(root).parts
    return any(p.startswith((".", "_")) for p in rel)


def _expand_dir(root: Path, fmt: str) -> list[tuple[Path, str]]:
    """Files of ``root`` (recursive) that ``fmt`` (or auto detection) can read."""
    if _is_hf_dir(root) and fmt in ("auto", "hf"):
        return [(p, "hf") for p in _hf_splits(root)]
    out: list[tuple[Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here != root and _hidden(here, root):
            dirnames[:] = []
            continue
        if here != root and _is_hf_dir(here) and fmt in ("auto", "hf"):
            out += [(p, "hf") for p in _hf_splits(here)]
            dirnames[:] = []
            continue
        for name in filenames:
            p = here / name
            if _hidden(p, root):
                continue
            if fmt == "auto":
                try:
                    out.append((p, detect_format(p)))
                except CorpusError:
                    continue  # other files in a corpus directory (README, checksums) are ignored
            elif fmt != "hf":
                out.append((p, fmt))
    return out


def _expand_url(spec: str, fmt: str, store: StoreOptions) -> list[tuple[str, str]]:
    """``(URL, format)`` of every corpus file a URL, a glob on URLs or a store "directory"
    (a prefix, searched recursively) names, listed with the ``store`` options."""
    items: list[tuple[str, str]] = []
    for url, is_dir in storage.expand(spec, store):
        if not is_dir:
            if fmt == "hf":
                raise CorpusError(f"{url}: format 'hf' needs a local save_to_disk directory")
            items.append((url, fmt if fmt != "auto" else detect_format(url)))
            continue
        before = len(items)
        for member in storage.list_files(url):
            if fmt != "auto":
                items.append((member, fmt))
                continue
            try:
                items.append((member, detect_format(member)))
            except CorpusError:
                continue  # README, checksums... beside the corpus files
        if len(items) == before:
            raise CorpusError(f"{url}: the prefix holds no corpus file of format {fmt}")
    return items


def _hub_specs(spec: str, fmt: str) -> list[str]:
    """What an ``hf://`` corpus path reads (:mod:`corpus_audit.backends.hub`): a dataset by
    name (no path) is its corpus files, else its parquet export's; a path is itself. Local
    paths in the Hub's cache with ``HF_HUB_OFFLINE`` set, ``hf://`` URLs otherwise."""
    if hub.parse(spec).path:
        return [hub.resolve(spec)]
    if fmt in ("auto", "hf"):
        chosen = reader_extensions()
    else:  # an unknown format is named with the known ones
        chosen = [(fmt, tuple(getattr(get_reader(fmt), "extensions", ())))]
    exts = tuple(e for _, extensions in chosen for e in extensions)
    return hub.data_files(spec, exts=exts or (".parquet",))


def _local_files(spec: str, fmt: str, base: Path | None) -> list[tuple[Path, str]]:
    """The files (with their format) of one local corpus path, glob or directory (relative
    to ``base``). Raises CorpusError for a glob or directory that matches nothing, a missing
    path, or a file given with format ``hf``."""
    p = Path(spec).expanduser()
    if not p.is_absolute() and base is not None:
        p = base / p
    if any(ch in str(p) for ch in "*?["):
        matches = [Path(m) for m in sorted(glob.glob(str(p), recursive=True))]
        if not matches:
            raise CorpusError(f"{spec}: the glob matches no file")
    elif p.exists():
        matches = [p]
    else:
        raise CorpusError(f"{spec}: no such corpus file or directory")
    out: list[tuple[Path, str]] = []
    for m in matches:
        if m.is_dir():
            items = _expand_dir(m, fmt)
            if not items:
                raise CorpusError(f"{m}: the directory holds no corpus file of format {fmt}")
        elif fmt == "hf":
            raise CorpusError(f"{m}: format 'hf' needs a save_to_disk directory, not a file")
        else:
            items = [(m, fmt if fmt != "auto" else detect_format(m))]
        out += items
    return out


def resolve_corpus(
    paths: list[str],
    fmt: str = "auto",
    base: Path | None = None,
    store: StoreOptions | None = None,
) -> list[CorpusFile]:
    """Expand files, globs and directories into the sorted list of corpus files.

    ``fmt`` is ``auto`` (by name) or a registered format applied to every file. Relative
    paths are taken from ``base``. A path may be a URL (``s3://bucket/*.parquet``), read
    with the ``store`` options (:mod:`corpus_audit.backends.storage`); URLs sort with the
    local paths, so a corpus's file ids (and samples) do not depend on where it lies as long
    as its file names do not change. Raises CorpusError for a path that matches nothing, a
    file whose format cannot be told, an unknown format, or an empty result.
    """
    if fmt != "auto":
        get_reader(fmt)
    store = store or StoreOptions()
    found: dict[str, str] = {}
    known: dict[str, tuple[tuple[str, Any], ...] | None] = {}  # URL -> its listing's entry
    remote = False
    specs: list[tuple[str, bool]] = []
    for spec in paths:
        spec = local_path(spec)
        if scheme(spec) == "hf":  # offline: the Hub's local cache (links to blobs)
            specs += [(s, hub.offline()) for s in _hub_specs(spec, fmt)]
        else:
            specs.append((spec, False))
    for spec, in_hub_cache in specs:
        if is_url(spec):
            remote = True
            for url, f in _expand_url(spec, fmt, store):
                found.setdefault(str(url), f)
                known.setdefault(str(url), storage.known_of(url))
            continue
        for path, f in _local_files(spec, fmt, base):
            # a Hub snapshot keeps its file names (the blobs they link to have none)
            name = os.path.abspath(path) if in_hub_cache else str(path.resolve())
            found.setdefault(name, f)
    if not found:
        raise CorpusError("corpus: no corpus files configured (corpus.paths is empty)")
    opts = store if remote else None
    return [
        CorpusFile(i, path, found[path], opts, known.get(path))
        for i, path in enumerate(sorted(found))
    ]


INSPECT_THREADS = 16  # objects of a store inspected at once while planning (each a footer GET)


def inspect_files(files: list[CorpusFile]) -> list[FileInfo]:
    """:meth:`CorpusReader.inspect` of every file, in file order (a bad file raises the
    error of the first one in that order). Files on a store are inspected
    :data:`INSPECT_THREADS` at a time: each needs a request for its footer, and planning a
    prefix of thousands of objects one request after the other takes minutes."""
    from concurrent.futures import ThreadPoolExecutor

    def one(f: CorpusFile) -> FileInfo:
        return get_reader(f.format).inspect(source(f.path, f.store, f.known))

    networked = [f for f in files if is_url(f.path) and scheme(f.path) != "memory"]
    if len(networked) < 2:  # local files and memory:// are read in this thread: no wait
        return [one(f) for f in files]
    with ThreadPoolExecutor(max_workers=INSPECT_THREADS) as pool:
        return list(pool.map(one, files))


def fingerprint_entry(file: CorpusFile) -> dict[str, Any]:
    """Path, format, size and mtime of one file (of every data file for ``hf``); for a URL,
    its size and the store's ETag / version (:func:`~corpus_audit.backends.storage.identity`)."""
    if is_url(file.path):
        obj = storage.identity(source(file.path, file.store, file.known), file.store)
        return {"path": file.path, "format": file.format, "object": obj}
    p = Path(file.path)
    targets = HfDiskReader.data_files(p) + [p / "state.json"] if file.format == "hf" else [p]
    stats = []
    for t in targets:
        try:
            st = t.stat()
        except OSError as exc:
            raise CorpusError(f"{t}: cannot stat the corpus file ({exc})") from None
        stats.append([st.st_size, st.st_mtime_ns])
    return {"path": file.path, "format": file.format, "stat": stats}


def iter_clean_batches(
    file: CorpusFile,
    unit: Any,
    columns: ColumnMap,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    keep: Callable[[pa.Array], pa.Array] | None = None,
) -> Iterator[CleanBatch]:
    """Read one unit of ``file`` as :class:`CleanBatch` es (errors name the file); ``keep``
    as in :func:`clean_batch`."""
    reader = get_reader(file.format)
    path = source(
        file.path, file.store, file.known
    )  # a worker opens the file itself (Ray task, thread)
    try:
        for batch, rows in reader.read(path, unit, columns, batch_rows):
            yield clean_batch(batch, rows, columns, keep)
    except NotTextError as exc:
        check_text_column(path, exc.column, exc.dtype)
    except CorpusError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        if _remote(path) and storage.is_store_problem(exc):
            raise storage.store_error(path, exc) from None
        raise CorpusError(f"{path}: cannot read the {file.format} file ({exc})") from None


def read_file(
    file: CorpusFile,
    text_column: str = "",
    url_column: str = "",
    key_column: str = "",
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> Iterator[CleanBatch]:
    """Every clean batch of one whole file, in row order (convenience for tests and tools)."""
    reader = get_reader(file.format)
    info = reader.inspect(source(file.path, file.store, file.known))
    if info.empty:
        return
    columns = resolve_columns(file.path, info.columns, text_column, url_column, key_column)
    if columns.text in info.types:
        check_text_column(file.path, columns.text, info.types[columns.text])
    for unit in info.units:
        yield from iter_clean_batches(file, unit, columns, batch_rows)
