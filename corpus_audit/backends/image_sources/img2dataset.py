"""``kind = "img2dataset"``: an img2dataset output folder in any of its formats: webdataset
``.tar`` shards, ``parquet`` with image bytes, or ``files`` (read like a ``dir`` source). Its
``*_stats.json`` files become the ``download_stats`` table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def read_stats(folder: Path) -> list[dict[str, Any]]:
    """img2dataset's ``*_stats.json`` files under ``folder`` as rows of ``download_stats``."""
    rows = []
    for file in sorted(folder.rglob("*_stats.json")):
        try:
            stats = json.loads(file.read_text(encoding="utf-8"))
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
            if not p.name.endswith("_stats.parquet") and has_image_column(p, options)
        ]
        if parquets:
            return [file_unit(p, options) for p in parquets]
        return [folder_unit(target)]

    def download_stats(self, ctx: SourceContext, options: ColumnOptions) -> list[dict[str, Any]]:
        assert options.path is not None
        return read_stats(ctx.resolve(options.path))
