"""What a study's image imports were (``corpus-audit import-images``): one line per import for
``status`` and the rows of the report's provenance section. Reads ``image_imports`` and
``images``; writes nothing."""

from __future__ import annotations

from typing import Any

from corpus_audit.core.store import Study


def import_provenance(study: Study) -> list[dict[str, Any]]:
    """Per import run: source, layout, SHA-256, time and counts (status and the report)."""
    if not study.table_exists("image_imports"):
        return []
    cur = study.con.execute(
        "SELECT i.source_path, i.layout, i.source_sha256, i.imported_at, i.n_items, i.n_added, "
        "i.n_present, i.n_dropped, (SELECT string_agg(DISTINCT m.model_id, ', ' ORDER BY m.model_id) "
        "FROM images m WHERE m.origin = 'import:' || i.import_id) AS models "
        "FROM image_imports i ORDER BY i.imported_at, i.import_id"
    )
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def status_lines(study: Study) -> list[str]:
    """One line per import run that added images (``corpus-audit status``)."""
    lines = []
    for r in import_provenance(study):
        if not r["n_added"]:
            continue
        lines.append(
            f"imported {r['n_added']} image(s) of {r['models']} from {r['source_path']} "
            f"({r['layout']}, sha256 {r['source_sha256'][:12]}, {str(r['imported_at'])[:19]} UTC); "
            "they cannot be regenerated"
        )
    return lines
