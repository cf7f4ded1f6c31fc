"""``corpus-audit export DIR``: the study's result tables as Parquet (or CSV) files with a
``manifest.json`` saying what each table and column holds and where the numbers come from.

Every table the schema migrations create is a result table, except the bookkeeping ones
(:data:`BOOKKEEPING`: schema version, stage runs, unfinished marks); ``--tables`` picks some.
A table with no rows is left out unless named or ``include_empty`` (``--include-empty``).
Rows are sorted by all columns (``ORDER BY ALL``) so two exports of the same study are the same
files. Parquet keeps every type as DuckDB gives it to Arrow; CSV writes lists, structs and maps
as JSON text and binary as hex, and a text cell a spreadsheet would run as a formula (``=``,
``+``, ``-``, ``@``, tab, CR first) gets a leading apostrophe, as the battles CSV does.

**Atomic as a whole.** Everything is written into a hidden temporary folder beside the target
(``.<name>.export-<pid>-<token>``), the manifest last, and the folder is then swapped in for the
target in one step (:func:`~corpus_audit.core.fileio.replace_dir`); the old export is removed
after. A failure or a kill at any point leaves the previous export as it was (or, where there
was none, nothing); the target never holds a ``.part`` file nor a manifest beside files of
another export. An earlier export folder is replaced whole (no old file stays beside the new
manifest); a folder holding anything an export did not write is refused. A temporary folder
left by a killed export is removed by the next export to the same target.

**Bounded memory.** Each table is streamed from DuckDB in record batches of
:data:`BATCH_ROWS` rows, each written as it comes (a Parquet row group, CSV lines).

**Partial stages.** A table written by a stage whose last run did not finish (``partial``)
mixes rows of finished and unfinished runs: the export is refused, naming the stage, unless
``allow_partial`` (``--allow-partial``), which marks each such table ``"partial": [stages]``
and the manifest's ``partial_stages``.

``manifest.json`` holds, per table, the file, the row count and the columns with their type,
their meaning (the column's comment in ``corpus_audit/sql/schema/*.sql``, else its entry in
``corpus_audit/sql/schema/columns.csv``) and their display label
(``corpus_audit/core/columns.csv``); for the study: the config hash
(:meth:`StudyConfig.section_hash`), the effective config, and each stage's latest run
(status, finish time, config hash and provenance as ``stage_runs`` records them).

The connection of a study may not write files (:data:`~corpus_audit.core.store.LOCKED_SETTINGS`),
so rows are fetched as Arrow and written by pyarrow; table names come from the schema, never
from the command line (a name given there is only compared with them).
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_audit import __version__
from corpus_audit.core.catalogue import STAGE_NAMES, STAGES
from corpus_audit.core.errors import StudyError, printable
from corpus_audit.core.fileio import refuse_links, replace_dir
from corpus_audit.methods.preferences.battles import FORMULA_STARTS

if TYPE_CHECKING:  # DuckDB and pyarrow load when a table is read: `--help` stays light
    import pyarrow as pa

    from corpus_audit.core.store import Study

FORMATS = ("parquet", "csv")
MANIFEST = "manifest.json"
BATCH_ROWS = 65_536  # rows fetched and written at a time (one Parquet row group)
_TEMP = ".{name}.export-"  # prefix of the temporary folder beside the target
BOOKKEEPING = frozenset({"schema_version", "stage_runs", "stage_unfinished"})

_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)\s*\(", re.IGNORECASE)
_ALTER = re.compile(
    r"ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)[^-]*(?:--\s*(.*))?$", re.IGNORECASE
)
_NOT_COLUMNS = {"PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT"}


@dataclass(frozen=True)
class ExportResult:
    """What one export wrote: the folder, the manifest, and ``table -> rows``."""

    out_dir: Path
    manifest: Path
    rows: dict[str, int]


def result_tables() -> list[str]:
    """Every result table of the schema, sorted by name (module docstring)."""
    # not at the top: the export verb's parser imports this module, and the store is DuckDB
    from corpus_audit.core.store import expected_catalog

    return sorted(expected_catalog().objects["table"] - BOOKKEEPING)


@cache
def schema_comments() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """``(table -> description, table -> column -> meaning)`` from the ``--`` comments of
    ``corpus_audit/sql/schema/*.sql``: the comment block right above a ``CREATE TABLE`` and
    the comment after a column (continued on comment-only lines below it)."""
    tables: dict[str, str] = {}
    columns: dict[str, dict[str, str]] = {}
    folder = resources.files("corpus_audit").joinpath("sql", "schema")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            _parse_schema(entry.read_text(encoding="utf-8"), tables, columns)
    return tables, columns


def _parse_schema(text: str, tables: dict[str, str], columns: dict[str, dict[str, str]]) -> None:
    block: list[str] = []  # the comment lines just read (a blank line ends a block)
    table: str | None = None  # inside CREATE TABLE (...)
    last: str | None = None  # the column the last comment belongs to
    for raw in text.splitlines():
        code, _, comment = raw.strip().partition("--")
        code, comment = code.strip(), comment.strip()
        if table is None:
            created = _CREATE.search(code)
            altered = _ALTER.search(raw.strip())
            if created:
                table, last = created.group(1), None
                if block:
                    tables.setdefault(table, " ".join(block))
                columns.setdefault(table, {})
            elif altered:
                columns.setdefault(altered.group(1), {}).setdefault(
                    altered.group(2), (altered.group(3) or "").strip()
                )
            block = [*block, comment] if not code and comment else []
            continue
        if not code and comment and last:  # a comment continued on its own line
            columns[table][last] = f"{columns[table][last]} {comment}".strip()
            continue
        closing = code.startswith(")")
        names = (
            [p.split()[0].strip('"') for p in code.split(",") if p.strip()] if not closing else []
        )
        names = [n for n in names if n.upper() not in _NOT_COLUMNS and re.fullmatch(r"\w+", n)]
        if names:
            last = names[-1]
            for name in names:
                columns[table].setdefault(name, "")
            if comment:  # a comment on a line of several columns is each one's
                for name in names:
                    if name == last or not columns[table][name]:
                        columns[table][name] = comment
        if closing or code.endswith(");"):
            table, block = None, []


@cache
def column_labels() -> dict[str, str]:
    """``column -> display label`` of ``corpus_audit/core/columns.csv``."""
    path = resources.files("corpus_audit").joinpath("core", "columns.csv")
    with path.open(encoding="utf-8", newline="") as fh:
        return {row["key"]: row["label"] for row in csv.DictReader(fh)}


@cache
def column_meanings() -> dict[str, str]:
    """``column`` or ``table.column`` -> meaning, from ``corpus_audit/core/column_meanings.csv``:
    what a column holds where its schema file has no comment for it (a ``table.column`` key
    wins over a bare column name)."""
    path = resources.files("corpus_audit").joinpath("core", "column_meanings.csv")
    with path.open(encoding="utf-8", newline="") as fh:
        return {row["key"]: row["meaning"] for row in csv.DictReader(fh)}


def resolve_tables(names: list[str] | None) -> list[str]:
    """The result tables to export: all of them, or ``names`` (each a result table; an
    unknown one is a :class:`StudyError` listing them)."""
    known = result_tables()
    if not names:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise StudyError(
            f"export: unknown table {printable(unknown[0])!r} (tables: {', '.join(known)})"
        )
    return [t for t in known if t in set(names)]


def _select_all(table: str) -> str:
    """``SELECT * FROM "<table>" ORDER BY ALL`` for a schema table (never user text)."""
    if table not in result_tables():
        raise StudyError(f"unknown table {printable(table)!r} (tables: see `export --help`)")
    return f'SELECT * FROM "{table}" ORDER BY ALL'  # a schema name (\w+), compared above


def read_table(study: Study, table: str) -> pa.Table:
    """Table ``table`` (a name :func:`result_tables` gives) as Arrow, rows sorted by all
    columns."""
    return study.con.sql(_select_all(table)).to_arrow_table()


def iter_batches(study: Study, table: str, rows: int | None = None) -> pa.RecordBatchReader:
    """Table ``table`` as a stream of record batches of at most ``rows`` rows (default
    :data:`BATCH_ROWS`), sorted by all columns (memory: about one batch on the Python side)."""
    return study.con.sql(_select_all(table)).to_arrow_reader(rows or BATCH_ROWS)


def partial_stages(study: Study, table: str) -> list[str]:
    """The stages writing ``table`` whose last run did not finish (``partial``)."""
    return [
        name
        for name in STAGE_NAMES
        if table in STAGES.get(name).writes and study.unfinished(name) is not None
    ]


def export_tables(
    study: Study,
    out_dir: Path | None = None,
    *,
    fmt: str = "parquet",
    tables: list[str] | None = None,
    allow_partial: bool = False,
    include_empty: bool = False,
) -> ExportResult:
    """Write the result tables (or ``tables``) of ``study`` as ``<table>.parquet`` / ``.csv``
    into ``out_dir`` (default ``<study>/export``) with ``manifest.json``, atomically as a
    whole (module docstring). Tables without rows are left out unless named or
    ``include_empty``; a table of a partial stage is refused unless ``allow_partial``. Every
    problem (a file where the folder should be, a link, a write error) is one
    :class:`StudyError`; the previous export is then unchanged."""
    if fmt not in FORMATS:
        raise StudyError(f"export: format {printable(fmt)!r} is not one of {', '.join(FORMATS)}")
    chosen = resolve_tables(tables)
    out = Path(out_dir) if out_dir is not None else study.root / "export"
    out = Path(os.path.abspath(out))
    refuse_links(study.root, out)  # <study>/export, or a link on the way inside the study
    _check_target(out)
    partial = {t: p for t in chosen if (p := partial_stages(study, t))}
    if partial and not allow_partial:
        table, stages = next(iter(partial.items()))
        raise StudyError(
            f"export: stage {stages[0]!r} is partial (its last run did not finish), so table "
            f"{table!r} mixes rows of finished and unfinished runs; run `corpus-audit "
            f"{stages[0]} {printable(study.root)}` to finish it, or pass --allow-partial "
            "(marked in the manifest)"
        )
    if not tables and not include_empty:
        chosen = [t for t in chosen if _count(study, t) > 0]
    _remove_stale(out)
    temp = out.with_name(f"{_TEMP.format(name=out.name)}{os.getpid()}-{secrets.token_hex(4)}")
    old: Path | None = None
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)  # links refused above
            temp.mkdir()
            entries, rows = _write_all(study, temp, chosen, fmt, partial)
            manifest = _manifest(
                study, fmt, entries, sorted({s for p in partial.values() for s in p})
            )
            with (temp / MANIFEST).open("w", encoding="utf-8") as fh:
                json.dump(manifest, fh, indent=2, sort_keys=False, default=str)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            _fsync_dir(temp)
            old = replace_dir(temp, out)
            _fsync_dir(out.parent)
        except OSError as exc:
            where = printable(exc.filename or out)
            raise StudyError(
                f"export: cannot write {where} ({exc.strerror or exc}); "
                f"{printable(out)} is unchanged"
            ) from None
    finally:
        for leftover in (temp, old):
            if leftover is not None and os.path.isdir(leftover) and not os.path.islink(leftover):
                shutil.rmtree(leftover, ignore_errors=True)
    return ExportResult(out, out / MANIFEST, rows)


def _check_target(out: Path) -> None:
    """Refuse a target that is a link, a file, under a file, or a folder holding anything
    an export did not write (it would be replaced whole)."""
    if os.path.islink(out):
        raise StudyError(f"export: {printable(out)} is a symbolic link; give a folder")
    for parent in out.parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise StudyError(f"export: {printable(parent)} is a file, not a folder")
            break
    if not os.path.lexists(out):
        return
    if not out.is_dir():
        raise StudyError(
            f"export: {printable(out)} is a file, not a folder (--out names the folder to "
            "write the tables and manifest.json into)"
        )
    present = {p.name for p in out.iterdir()}
    if not present:
        return
    written = _export_files(out / MANIFEST) or set()
    strangers = sorted(
        n for n in present if n != MANIFEST and n not in written and not n.endswith(".part")
    )
    if strangers or (MANIFEST in present and _export_files(out / MANIFEST) is None):
        what = strangers[0] if strangers else MANIFEST
        raise StudyError(
            f"export: {printable(out)} holds {printable(what)!r}, which no export wrote; an "
            "export replaces its folder as a whole, so give a new or empty folder (or an "
            "earlier export's)"
        )


def _export_files(manifest: Path) -> set[str] | None:
    """The files an earlier export's ``manifest.json`` lists; None when it is no such
    manifest."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        return {str(t["file"]) for t in data["tables"]} if "corpus_audit_version" in data else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remove_stale(out: Path) -> None:
    """Remove temporary folders of earlier exports to ``out`` whose process is gone (killed)."""
    prefix = _TEMP.format(name=out.name)
    if not out.parent.is_dir():
        return
    for entry in out.parent.iterdir():
        if not entry.name.startswith(prefix) or entry.is_symlink() or not entry.is_dir():
            continue
        pid = entry.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue  # another export to the same folder is running
        shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(folder: Path) -> None:
    """Make a folder's entries (renames, new files) durable where the system allows it."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _count(study: Study, table: str) -> int:
    """Rows of the schema table ``table``."""
    _select_all(table)  # a result table of the schema, never user text
    return study.count(table)


def _write_all(
    study: Study, folder: Path, chosen: list[str], fmt: str, partial: dict[str, list[str]]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Stream every table of ``chosen`` into ``folder``; the manifest entries and row counts."""
    descriptions, meanings = schema_comments()
    fallback = column_meanings()
    labels = column_labels()
    entries: list[dict[str, Any]] = []
    rows: dict[str, int] = {}
    for table in chosen:
        path = folder / f"{table}.{fmt}"
        reader = iter_batches(study, table)
        n = _write_stream(reader, path, fmt)
        rows[table] = n
        entry: dict[str, Any] = {
            "table": table,
            "file": path.name,
            "rows": n,
            "description": descriptions.get(table, ""),
            "columns": [
                {
                    "name": field.name,
                    "type": str(field.type),
                    "meaning": meanings.get(table, {}).get(field.name)
                    or fallback.get(f"{table}.{field.name}")
                    or fallback.get(field.name, ""),
                    "label": labels.get(field.name, field.name),
                }
                for field in reader.schema
            ],
        }
        if table in partial:
            entry["partial"] = partial[table]
        entries.append(entry)
    return entries, rows


def _write_stream(reader: pa.RecordBatchReader, path: Path, fmt: str) -> int:
    """Write the batches of ``reader`` to ``path`` as they come; the number of rows."""
    n = 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(path, reader.schema) as writer:
            for batch in _batches(reader):
                writer.write_batch(batch)
                n += batch.num_rows
        return n
    import pyarrow.csv as pcsv

    writer = None
    try:
        for batch in _batches(reader):
            ready = _csv_ready(batch)
            if writer is None:
                writer = pcsv.CSVWriter(path, ready.schema)
            writer.write_batch(ready)
            n += batch.num_rows
        if writer is None:  # no rows: the header alone
            import pyarrow as pa

            empty = _csv_ready(pa.RecordBatch.from_pylist([], schema=reader.schema))
            writer = pcsv.CSVWriter(path, empty.schema)
    finally:
        if writer is not None:
            writer.close()
    return n


def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    for batch in reader:
        if batch.num_rows:
            yield batch


def _csv_ready(data: pa.RecordBatch) -> pa.RecordBatch:
    """Lists, structs and maps as JSON text, binary as hex, text that a spreadsheet would run
    as a formula with a leading apostrophe: what CSV can hold safely."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    for i, field in enumerate(data.schema):
        kind, column = field.type, data.column(i)
        if pa.types.is_nested(kind):
            text = [None if v is None else json.dumps(v, default=str) for v in column.to_pylist()]
            column = pa.array(text, pa.string())
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            column = pa.array(
                [None if v is None else v.hex() for v in column.to_pylist()], pa.string()
            )
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            risky = pc.match_substring_regex(column, _FORMULA_PATTERN)
            if pc.any(risky).as_py():
                quoted = pc.binary_join_element_wise("'", column, "")
                column = pc.if_else(risky, quoted, column)
        arrays.append(column)
    names = [f.name for f in data.schema]
    return pa.RecordBatch.from_arrays(arrays, names=names)


_FORMULA_PATTERN = "^[" + "".join(re.escape(c) for c in FORMULA_STARTS) + "]"


def _manifest(
    study: Study, fmt: str, entries: list[dict[str, Any]], partial: list[str]
) -> dict[str, Any]:
    """What ``manifest.json`` holds (module docstring); ``partial``: the partial stages whose
    tables were exported anyway (``--allow-partial``)."""
    runs = {}
    for stage in STAGE_NAMES:
        last = study.last_run(stage)
        if stage in partial:
            runs[stage] = {"status": "partial", "last_finished": _run(last) if last else None}
        elif last is not None:
            runs[stage] = _run(last)
    return {
        "corpus_audit_version": __version__,
        "exported_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "study": {"name": study.config.study.name, "root": str(study.root.resolve())},
        "config_hash": study.config.section_hash(),
        "config": study.config.to_dict(),
        "format": fmt,
        "partial_stages": partial,
        "tables": entries,
        "stage_runs": runs,
    }


def _run(last: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": last["status"],
        "finished_at": str(last["finished_at"]),
        "rows_in": last["rows_in"],
        "rows_out": last["rows_out"],
        "config_hash": last["config_hash"],
        "provenance": last["provenance"],
    }
