"""The stored per-corpus results of ``indicators`` (``corpus_summary``), as the stage, the
report and the demo's console read them back."""

from __future__ import annotations

from typing import Any

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.corpus_groups import is_paper_group

#: % of LAION occupation captions with an indicator, a mean over occupations (Seshadri et
#: al.)
PAPER_LAION_SHARE = 59.5


def corpus_summary(study: Study) -> list[dict[str, Any]]:
    """The stored ``corpus_summary`` rows: per group its occupation-NULL row first, then its
    occupations; the pooled rows (``corpus_group`` None) last. Empty before ``indicators``
    ran (or in a study made before migration 8 ran it)."""
    if not study.table_exists("corpus_summary"):
        return []
    return dicts(
        study.con.execute(
            "SELECT * FROM corpus_summary ORDER BY corpus_group NULLS LAST, occupation NULLS FIRST"
        )
    )


#: the corpus name of the pooled row in pages and CSVs
POOLED = "all corpora (pooled)"


def corpus_rows(study: Study) -> list[dict[str, Any]]:
    """One row per corpus group and the pooled row last (the occupation-NULL rows of
    ``corpus_summary``), with ``corpus`` (the pooled row: :data:`POOLED`), ``pooled``,
    ``paper_pct`` (the paper's LAION share beside the group compared with it, else None)."""
    out = []
    for r in corpus_summary(study):
        if r["occupation"] is not None:
            continue
        pooled = r["corpus_group"] is None
        row = dict(r)
        row["corpus"] = POOLED if pooled else r["corpus_group"]
        row["pooled"] = pooled
        row["paper_pct"] = PAPER_LAION_SHARE if is_paper_group(r["corpus_group"]) else None
        out.append(row)
    return out
