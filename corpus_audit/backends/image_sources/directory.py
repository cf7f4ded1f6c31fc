"""``kind = "dir"``: a folder of image files named by key (``<key>.jpg``), searched
recursively; an img2dataset-style ``<key>.json`` beside a file is read for url / caption_id.
Local files are referenced where they are (not copied); a folder on a store (a prefix URL,
``s3://bucket/photos/``, or a glob on one) is listed and each object read whole (one GET,
at most :data:`~corpus_audit.backends.image_sources.base.MAX_MEMBER_BYTES`). A folder is one
unit, rescanned each run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_audit.backends import storage
from corpus_audit.backends.image_sources.base import (
    IMAGE_EXTS,
    MAX_MEMBER_BYTES,
    PlainSource,
    Record,
    Skip,
    SourceContext,
    SourceOptions,
    Unit,
    existing_target,
    expand,
    load_meta,
    short_error,
    with_meta,
)
from corpus_audit.core.errors import CorpusAuditError, ImageSourceError

_PATTERNS = tuple(f"*{e}" for e in sorted(IMAGE_EXTS)) + tuple(
    f"*{e.upper()}" for e in sorted(IMAGE_EXTS)
)


def iter_dir(root: Path) -> Iterator[Record | Skip]:
    """Image files under ``root`` (recursive, sorted); ``<key>.json`` beside them is read."""
    for file in sorted(root.rglob("*")):
        if file.suffix.lower() not in IMAGE_EXTS:
            continue
        if not file.is_file():
            yield Skip(str(file), "not_a_file", "not a regular file")
            continue
        meta: dict[str, Any] = {}
        sidecar = file.with_suffix(".json")
        if sidecar.is_file():
            try:
                meta = load_meta(sidecar.read_text(encoding="utf-8"))
            except (ValueError, OSError) as exc:  # bad JSON / UTF-8, unreadable
                yield Skip(str(sidecar), "bad_metadata", str(exc)[:200])
        yield with_meta(Record(str(file), file.suffix.lower(), file=file, key=file.stem), meta)


def storage_bind(name: str, like: str) -> str:
    """``name`` carrying the store options of the URL ``like``."""
    return storage.bind(name, getattr(like, "options", None))


def _read_object(url: str) -> bytes:
    """An object's bytes (at most ``MAX_MEMBER_BYTES + 1``: more is too large)."""
    with storage.open_input(url, stream=True) as fh:
        return fh.read(MAX_MEMBER_BYTES + 1)


def iter_store_dir(target: str) -> Iterator[Record | Skip]:
    """Image objects under a store's prefix or glob (sorted); ``<key>.json`` beside them."""
    try:
        urls = list(expand(target, _PATTERNS + ("*.json",)))
    except CorpusAuditError as exc:
        raise ImageSourceError(str(exc)) from None
    names = set(urls)
    for url in urls:
        stem, dot, ext = url.rpartition(".")
        if not dot or f".{ext.lower()}" not in IMAGE_EXTS:
            continue
        try:
            data = _read_object(url)
        except CorpusAuditError as exc:
            yield Skip(str(url), "unreadable_file", short_error(exc))
            continue
        if len(data) > MAX_MEMBER_BYTES:
            yield Skip(str(url), "too_large", f"over {MAX_MEMBER_BYTES} bytes")
            continue
        meta: dict[str, Any] = {}
        sidecar = f"{stem}.json"
        if sidecar in names:
            try:
                meta = load_meta(_read_object(storage_bind(sidecar, url)))
            except (ValueError, CorpusAuditError) as exc:
                yield Skip(str(sidecar), "bad_metadata", str(exc)[:200])
        key = stem.rsplit("/", 1)[-1]
        yield with_meta(Record(str(url), f".{ext.lower()}", data=data, key=key), meta)


def folder_unit(path: Path) -> Unit:
    return Unit(path, lambda: iter_dir(path), resumable=False)


class DirSource(PlainSource):
    kind = "dir"
    options = SourceOptions

    def units(self, ctx: SourceContext, options: SourceOptions) -> list[Unit]:
        target = existing_target(ctx, options)
        if isinstance(target, str):  # a prefix or glob on a store
            return [Unit(target, lambda: iter_store_dir(target), resumable=False)]  # type: ignore[arg-type]
        if not target.is_dir():
            raise ImageSourceError(f"{target}: a dir source must be a folder")
        return [folder_unit(target)]
