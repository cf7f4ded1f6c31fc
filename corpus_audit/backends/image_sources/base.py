"""What every image source shares: the protocol, its records, typed options and helpers.

An image source (one module per ``kind`` in this package) turns one entry of
``images.sources`` into *units* of work (a shard, a parquet file, a folder), and each unit into
a stream of :class:`Record` (an image and what links it to a caption) and :class:`Skip` (an
item that cannot be used, recorded in ``image_skips``). The ``images`` stage links records to
captions and writes them; a source never touches the study's tables.
"""

from __future__ import annotations

import fnmatch
import glob as globlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from corpus_audit.backends import storage
from corpus_audit.backends.storage import StoreOptions, bind
from corpus_audit.core.errors import ConfigError, CorpusAuditError, ImageSourceError
from corpus_audit.core.urls import is_url, local_path

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff"}
MAX_MEMBER_BYTES = 128 * 1024 * 1024  # a single image larger than this is skipped (too_large)
IMAGE_COLUMNS = ("jpg", "jpeg", "png", "webp", "image", "image_bytes", "img", "bytes")
URL_COLUMNS = ("url", "URL", "image_url")
KEY_COLUMNS = ("key", "__key__")
LINK_MODES = ("auto", "caption_id", "url", "row")


@dataclass
class Record:
    """One image of a source: where its bytes are and what links it to a caption."""

    origin: str  # human-readable reference, e.g. 'shard.tar:000001.jpg'
    ext: str  # lower-case suffix with dot, e.g. '.jpg'
    data: bytes | None = None  # image bytes (shards, parquet, datasets)
    file: Path | None = None  # or an existing file (dir sources)
    key: str | None = None
    url: str | None = None
    caption_id: int | None = None


@dataclass
class Skip:
    """An item of a source that cannot be used, recorded in ``image_skips``."""

    item: str
    reason: str
    detail: str = ""


@dataclass
class SourceOptions:
    """Options every source entry takes. ``spec`` is the entry as written (provenance).

    ``link``: auto | caption_id | url | row (how a record finds its caption; module docstring
    of :mod:`corpus_audit.stages.images`); ``corpus_file``: the corpus file whose row numbers the
    keys are (``link = "row"`` only).
    """

    kind: str
    path: str | None = None  # a file, folder or glob, relative to the study directory
    link: str = "auto"
    corpus_file: str = ""
    spec: dict[str, Any] = field(default_factory=dict, repr=False, metadata={"user": False})

    def validate(self, key: str) -> None:
        """Raise :class:`ConfigError` naming ``<key>.<option>`` for a bad value."""
        if self.link not in LINK_MODES:
            raise ConfigError(f"{key}.link: {self.link!r} is not auto, caption_id, url or row")
        if not isinstance(self.path, str):
            raise ConfigError(f"{key}.path: a {self.kind} source needs a path")


@dataclass
class ColumnOptions(SourceOptions):
    """Options of tabular sources (parquet, hf, img2dataset's parquet output); an empty
    column name means the first present of the usual names (:data:`IMAGE_COLUMNS`, ...)."""

    image_column: str = ""
    url_column: str = ""
    key_column: str = ""


@dataclass(frozen=True)
class Unit:
    """One piece of work of a source: ``read()`` streams its records. A ``resumable`` unit
    (a shard, a file) is listed in ``image_shards`` once done and skipped by later runs; a
    folder is rescanned every run."""

    path: Path
    read: Callable[[], Iterator[Record | Skip]]
    resumable: bool = True


@dataclass(frozen=True)
class SourceContext:
    """What a source may use: the study, its entry's index and the wanted captions
    (``caption_id -> (url, occupation)``)."""

    study: Any  # corpus_audit.core.store.Study (not imported: this module stays light)
    index: int
    wanted: dict[int, tuple[str | None, str | None]]

    @property
    def store(self) -> Any:
        """The study's ``[storage]`` options (a
        :class:`~corpus_audit.backends.storage.StoreOptions`) that its URLs are read with."""
        return StoreOptions.from_config(self.study.config.storage)

    def resolve(self, path: str) -> Path | str:
        """A local path resolved against the study directory; a store's URL as written,
        carrying the study's ``[storage]`` options (docs/storage.md)."""
        if is_url(path):
            return bind(path, self.store)
        return self.study.config.resolve(local_path(path))


class ImageSource(Protocol):
    """A kind of image source, registered in :data:`corpus_audit.backends.image_sources.SOURCES`."""

    kind: str  # what ``kind`` in the config entry names
    options: type[SourceOptions]  # its typed options, checked when the config loads

    def prepare(self, ctx: SourceContext, options: SourceOptions) -> SourceOptions:
        """Fetch what must be fetched (``urls`` downloads); the options to read from."""
        ...

    def units(self, ctx: SourceContext, options: SourceOptions) -> list[Unit]:
        """The units to read, in a stable order; :class:`ImageSourceError` if none exist."""
        ...

    def download_stats(self, ctx: SourceContext, options: SourceOptions) -> list[dict[str, Any]]:
        """Rows for ``download_stats`` (img2dataset's ``*_stats.json``); [] for most."""
        ...


class PlainSource:
    """Defaults of the protocol for a source that downloads nothing and has no stats."""

    kind = ""
    options: type[SourceOptions] = SourceOptions

    def prepare(self, ctx: SourceContext, options: SourceOptions) -> SourceOptions:
        return options

    def download_stats(self, ctx: SourceContext, options: SourceOptions) -> list[dict[str, Any]]:
        return []


# -- helpers ---------------------------------------------------------------------------------
def as_int(value: Any) -> int | None:
    """An int from an int or a numeric string; None for anything else (bools included)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def expand(target: Path | str, patterns: tuple[str, ...]) -> list[Path] | list[str]:
    """Files matching ``patterns`` for a file, folder (recursive) or glob ``target``; a URL
    (``s3://bucket/shards/``, a glob on one) lists the store (URLs, see docs/storage.md)."""
    if isinstance(target, str):
        try:
            return storage.matching(target, patterns)
        except CorpusAuditError as exc:
            raise ImageSourceError(str(exc)) from None
    if target.is_file():
        return [target]
    if target.is_dir():
        return [
            p
            for p in sorted(target.rglob("*"))
            if p.is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns)
        ]
    return sorted(Path(p) for p in globlib.glob(str(target)) if Path(p).is_file())


def safe_member_name(name: str) -> str | None:
    """The member name if it is a plain relative path, else None (absolute, ``..``, drive)."""
    if not name or "\x00" in name or "\\" in name:
        return None
    pure = PurePosixPath(name)
    if pure.is_absolute() or any(part == ".." for part in pure.parts):
        return None
    return name


def with_meta(record: Record, meta: dict[str, Any]) -> Record:
    """``record`` with what its img2dataset-style metadata ``meta`` (:func:`load_meta`; {}
    for none) says: ``key`` (when it names one), the url (the first of :data:`URL_COLUMNS`
    that is a string) and ``caption_id``."""
    key = meta.get("key") if isinstance(meta.get("key"), str) else None
    return replace(
        record,
        key=key or record.key,
        url=next((meta[c] for c in URL_COLUMNS if isinstance(meta.get(c), str)), None),
        caption_id=as_int(meta.get("caption_id")),
    )


def load_meta(data: bytes | str) -> dict[str, Any]:
    """A JSON object (a non-object reads as {}); raises ValueError for bad JSON or UTF-8."""
    loaded = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    return loaded if isinstance(loaded, dict) else {}


def pick(columns: list[str], wanted: str | None, candidates: tuple[str, ...]) -> str | None:
    """``wanted`` if it is a column, else (when not set) the first present candidate."""
    if wanted:
        return wanted if wanted in columns else None
    return next((c for c in candidates if c in columns), None)


def image_payload(value: Any) -> tuple[bytes | None, str | None]:
    """(bytes, path) from a binary cell or a ``{bytes, path}`` struct cell."""
    if value is None:
        return None, None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value), None
    if isinstance(value, dict):
        data = value.get("bytes")
        return (bytes(data) if data is not None else None), value.get("path")
    return None, None


def ext_of(path: str | None) -> str:
    """The image suffix of ``path``; ``.jpg`` when it has none we know."""
    suffix = Path(path).suffix.lower() if path else ""
    return suffix if suffix in IMAGE_EXTS else ".jpg"


def batch_rows(
    batch: dict[str, list[Any]],
    image_col: str,
    cols: tuple[str | None, ...],
    origin: str,
    first_row: int,
    *,
    default_ext: str = "",
    local_files: bool = False,
) -> Iterator[Record | Skip]:
    """A :class:`Record` (or a ``no_image_bytes`` :class:`Skip`) per row of one column batch
    whose rows are numbered from ``first_row``: origin ``<origin>row=<n>``. ``cols`` names the
    (url, key, caption_id) columns (:func:`row_links`); ``default_ext``: the suffix of a cell
    without a path ("" = :func:`ext_of`'s ``.jpg``); ``local_files``: a cell holding only the
    path of an existing local file is that file (a saved dataset's ``Image`` cell)."""
    for i, cell in enumerate(batch[image_col]):
        blob, inner = image_payload(cell)
        where = f"{origin}row={first_row + i}"
        file = None
        if local_files and blob is None and inner and Path(inner).is_file():
            file = Path(inner)
        if blob is None and file is None:
            yield Skip(where, "no_image_bytes", "")
            continue
        ext = ext_of(inner) if inner or not default_ext else default_ext
        yield Record(origin=where, ext=ext, data=blob, file=file, **row_links(batch, i, cols))


def link_columns(
    columns: list[str], options: ColumnOptions
) -> tuple[str | None, str | None, str | None]:
    """The (url, key, caption_id) columns among ``columns`` (None for an absent one), as
    :func:`batch_rows` takes them: the options' ``url_column`` / ``key_column``, else the first
    present of :data:`URL_COLUMNS` / :data:`KEY_COLUMNS`; ``caption_id`` when present."""
    return (
        pick(columns, options.url_column, URL_COLUMNS),
        pick(columns, options.key_column, KEY_COLUMNS),
        "caption_id" if "caption_id" in columns else None,
    )


def row_links(batch: dict[str, list[Any]], i: int, cols: tuple[str | None, ...]) -> dict[str, Any]:
    """``key``, ``url``, ``caption_id`` of row ``i`` of a column batch; ``cols`` names the
    (url, key, caption_id) columns, None for an absent one."""
    url_col, key_col, id_col = cols
    key = batch[key_col][i] if key_col else None
    return {
        "key": str(key) if key is not None else None,
        "url": batch[url_col][i] if url_col else None,
        "caption_id": as_int(batch[id_col][i]) if id_col else None,
    }


def existing_target(ctx: SourceContext, options: SourceOptions) -> Path | str:
    """The source's resolved path (a URL as written); :class:`ImageSourceError` when nothing
    is there."""
    assert options.path is not None  # checked when the options were parsed
    target = ctx.resolve(options.path)
    if isinstance(target, str):
        return target
    if not target.exists():
        raise ImageSourceError(f"{target}: no such {options.kind} source (file or folder)")
    return target


def matching_files(
    ctx: SourceContext, options: SourceOptions, patterns: tuple[str, ...]
) -> list[Path] | list[str]:
    """Files of a file / folder / glob source; :class:`ImageSourceError` when there are none."""
    assert options.path is not None  # checked when the options were parsed
    target = ctx.resolve(options.path)
    found = expand(target, patterns)
    if not found:
        raise ImageSourceError(f"{target}: no {options.kind} files here ({', '.join(patterns)})")
    return found


def short_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
