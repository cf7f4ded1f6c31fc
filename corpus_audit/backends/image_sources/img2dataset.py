"""``kind = "img2dataset"``: an img2dataset output folder in any of its formats: webdataset
``.tar`` shards, ``parquet`` with image bytes, or ``files`` (read like a ``dir`` source). Its
``*_stats.json`` files become the ``download_stats`` table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corpus_audit.backends import storage
from corpus_audit.backends.image_sources.base import (
    ColumnOptions,
    SourceContext,
    Unit,
    as_int,
    existing_target,
    expand,
)
from corpus_audit.backends.image_sources.directory import folder_unit
from corpus_audit.backends.image_sources.parquet import file_unit, has_image_column
from corpus_audit.backends.image_sources.webdataset import shard_unit
from corpus_audit.core.errors import ImageSourceError


def _stats_files(folder: Path | str) -> list[Any]:
    """The ``*_stats.json`` files under a folder, or under a store's URL (prefix)."""
    if isinstance(folder, str):
        return list(expand(folder, ("*_stats.json",)))
    return sorted(folder.rglob("*_stats.json"))


def _read_text(file: Path | str) -> str:
    if isinstance(file, str):
        with storage.open_input(file) as fh:
            return fh.read().decode("utf-8")
    return file.read_text(encoding="utf-8")


def read_stats(folder: Path | str) -> list[dict[str, Any]]:
    """img2dataset's ``*_stats.json`` files under ``folder`` (a path or a store's URL) as rows
    of ``download_stats``."""
    rows = []
    for file in _stats_files(folder):
        try:
            stats = json.loads(_read_text(file))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(stats, dict):
            continue
        rows.append(
            {
                "shard": str(file),
                "count": as_int(stats.get("count")),
                "successes": as_int(stats.get("successes")),
                "failed_to_download": as_int(stats.get("failed_to_download")),
                "failed_to_resize": as_int(stats.get("failed_to_resize")),
                "status_dict": json.dumps(stats.get("status_dict") or {}, sort_keys=True),
            }
        )
    return rows


class Img2datasetSource:
    kind = "img2dataset"
    options = ColumnOptions

    def prepare(self, ctx: SourceContext, options: ColumnOptions) -> ColumnOptions:
        return options

    def units(self, ctx: SourceContext, options: ColumnOptions) -> list[Unit]:
        """Whichever format the folder holds: shards, else parquet with images, else files."""
        target = existing_target(ctx, options)
        tars = expand(target, ("*.tar",))
        if tars:
            return [shard_unit(p) for p in tars]
        parquets = [
            p
            for p in expand(target, ("*.parquet",))
            if not str(p).endswith("_stats.parquet") and has_image_column(p, options)
        ]
        if parquets:
            return [file_unit(p, options) for p in parquets]
        if isinstance(target, str):
            raise ImageSourceError(
                f"{target}: no img2dataset shards (*.tar) or parquet with images under this "
                "URL (loose image files are read from local folders only)"
            )
        return [folder_unit(target)]

    def download_stats(self, ctx: SourceContext, options: ColumnOptions) -> list[dict[str, Any]]:
        assert options.path is not None
        return read_stats(ctx.resolve(options.path))
