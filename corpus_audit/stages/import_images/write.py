"""Writing one source's plan: its ``image_imports`` row, the ``images`` and ``imported_images``
rows (bulk, through Arrow) and its ``import_skips``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from corpus_audit.core.store import insert_rows
from corpus_audit.core.versions import package_versions
from corpus_audit.stages.import_images.manifest import Source


def write(con: Any, plan: dict[str, Any], now: datetime) -> None:
    """One source's :func:`~corpus_audit.stages.import_images.plan.plans` entry, written on
    ``con`` (inside the caller's transaction); ``now``: the import's time (UTC, naive)."""
    source: Source = plan["source"]
    con.execute(
        "INSERT INTO image_imports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            plan["import_id"], str(source.path), source.layout, source.sha256, plan["model"], now,
            plan["n_items"], len(plan["images"]), plan["n_present"], len(plan["skips"]),
            json.dumps(package_versions("corpus_audit", "pillow"), sort_keys=True),
        ],
    )  # fmt: skip
    if plan["images"]:  # bulk, through Arrow (executemany costs ~1 ms a row in DuckDB)
        _bulk_insert(con, "images", IMAGE_COLUMNS, plan["images"])
        _bulk_insert(con, "imported_images", IMPORTED_COLUMNS, plan["imported"])
    if plan["skips"]:
        con.executemany(
            "INSERT INTO import_skips VALUES (?, ?, ?, ?, ?, ?)",
            [(iid, str(source.path), line, file, reason, detail)
             for iid, _where, line, file, reason, detail in plan["skips"]],
        )  # fmt: skip


IMAGE_COLUMNS = {
    "image_id": "string", "source": "string", "prompt_id": "string", "occupation": "string",
    "path": "string", "model_id": "string", "prompt_text": "string", "seed": "int64",
    "origin": "string",
}  # fmt: skip
IMPORTED_COLUMNS = {
    "image_id": "string", "import_id": "string", "file": "string", "sha256": "string",
    "n_bytes": "int64", "width": "int32", "height": "int32", "source_line": "int32",
    "image_index": "int32", "metadata": "string",
}  # fmt: skip


def _bulk_insert(con: Any, table: str, columns: dict[str, str], rows: Sequence[tuple]) -> None:
    """``INSERT INTO table (columns) SELECT ... FROM`` an Arrow table of ``rows`` (the values
    are data in the Arrow table, never SQL text; the table and column names are constants)."""
    import pyarrow as pa

    arrays = {
        name: pa.array([r[i] for r in rows], type=getattr(pa, kind)())
        for i, (name, kind) in enumerate(columns.items())
    }
    insert_rows(con, table, pa.table(arrays))
