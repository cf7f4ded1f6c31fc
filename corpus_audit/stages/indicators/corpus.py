"""The per-corpus results of ``indicators``: ``corpus_file_groups`` and ``corpus_summary``.

Written at the end of every ``indicators`` run, in one transaction: the corpus group of each
corpus file (``corpus.groups``, ``corpus.hypernymized``; the rule is
:mod:`corpus_audit.methods.corpus_groups`), then per group and occupation, and pooled over
every file, the captions that mention an occupation and their indicator labels, with the
Wilson interval (at ``analysis.confidence``) of the share with an indicator and the mean over
occupations of each one's share (the paper's statistic). A demo or study that mixes LAION,
COCO and CC3M compares its LAION row, not the pooled one, with the paper's LAION number.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from corpus_audit.core.config import CONFIG_NAME
from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.corpus_groups import FileGroup, assign_groups, is_paper_group
from corpus_audit.methods.stats import wilson_interval

#: % of LAION occupation captions with an indicator, a mean over occupations (Seshadri et
#: al.); the same number as ``indicators.PAPER_LAION_SHARE``
PAPER_LAION_SHARE = 59.5
#: the columns of corpus_summary (sql/schema/008_indicators.sql), in table order
SUMMARY_COLUMNS = (
    "corpus_group",
    "occupation",
    "files",
    "rows_total",
    "captions",
    "with_indicator",
    "male_only",
    "female_only",
    "both_genders",
    "pct_any_indicator",
    "ci_low",
    "ci_high",
    "mean_occupation_pct",
    "occupations",
    "name_triggers",
    "hypernymized",
)


def file_groups(study: Study) -> list[FileGroup]:
    """The group of every corpus file of ``corpus_files``. Raises :class:`ConfigError` for a
    ``corpus.hypernymized`` name that is no group (the stage calls it before it changes
    anything)."""
    files = study.con.execute(
        "SELECT file_id, path, coalesce(sample_key, path) FROM corpus_files ORDER BY file_id"
    ).fetchall()
    return assign_groups(
        files,
        study.config.corpus.groups,
        study.config.corpus.hypernymized,
        source=str(study.root / CONFIG_NAME),
    )


def write_corpus_summary(study: Study) -> bool:
    """Rewrite ``corpus_file_groups`` and ``corpus_summary`` (one transaction); whether
    ``corpus_summary`` changed."""
    cfg = study.config
    groups = file_groups(study)
    before = study.fingerprint("corpus_summary")
    rows_in = pa.table(
        {
            "file_id": pa.array([g.file_id for g in groups], pa.int32()),
            "corpus_group": pa.array([g.group for g in groups], pa.string()),
            "hypernymized": pa.array([g.hypernymized for g in groups], pa.bool_()),
        }
    )
    with study.transaction():
        study.con.register("_corpus_groups_in", rows_in)
        try:
            study.sql("indicators/corpus_groups")
        finally:
            study.con.unregister("_corpus_groups_in")
        rows = [_with_interval(r, cfg.analysis.confidence) for r in summary_rows(study)]
        study.con.execute("DELETE FROM corpus_summary")
        if rows:
            table = pa.Table.from_pylist(rows)
            study.con.register("_corpus_summary_in", table)
            try:
                cols = ", ".join(SUMMARY_COLUMNS)
                study.con.execute(
                    f"INSERT INTO corpus_summary ({cols}) SELECT {cols} FROM _corpus_summary_in"
                )
            finally:
                study.con.unregister("_corpus_summary_in")
    return study.fingerprint("corpus_summary") != before


def summary_rows(study: Study) -> list[dict[str, Any]]:
    """The rows of ``sql/indicators/corpus_summary.sql`` (no interval yet), pooled last."""
    return dicts(study.sql("indicators/corpus_summary"))


def _with_interval(row: dict[str, Any], confidence: float) -> dict[str, Any]:
    """``row`` with ``pct_any_indicator`` and its Wilson interval (percent, 0-100)."""
    n, k = int(row["captions"]), int(row["with_indicator"])
    lo, hi = wilson_interval(k, n, confidence)
    out = dict(row)
    out["pct_any_indicator"] = 100.0 * k / n if n else None
    out["ci_low"], out["ci_high"] = lo, hi
    return {c: out.get(c) for c in SUMMARY_COLUMNS}


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
