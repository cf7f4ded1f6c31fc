"""``kind = "dir"``: a folder of image files named by key (``<key>.jpg``), searched
recursively; an img2dataset-style ``<key>.json`` beside a file is read for url / caption_id.
Files are referenced where they are (not copied). A folder is one unit, rescanned each run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_audit.backends.image_sources.base import (
    IMAGE_EXTS,
    PlainSource,
    Record,
    Skip,
    SourceContext,
    SourceOptions,
    Unit,
    existing_target,
    load_meta,
    meta_fields,
)
from corpus_audit.core.errors import ImageSourceError


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
        caption_id, url, key = meta_fields(meta)
        yield Record(
            origin=str(file),
            ext=file.suffix.lower(),
            file=file,
            key=key or file.stem,
            url=url,
            caption_id=caption_id,
        )


def folder_unit(path: Path) -> Unit:
    return Unit(path, lambda: iter_dir(path), resumable=False)


class DirSource(PlainSource):
    kind = "dir"
    options = SourceOptions

    def units(self, ctx: SourceContext, options: SourceOptions) -> list[Unit]:
        target = existing_target(ctx, options)
        if not target.is_dir():
            raise ImageSourceError(f"{target}: a dir source must be a folder")
        return [folder_unit(target)]
