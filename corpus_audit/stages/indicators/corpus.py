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
from corpus_audit.core.store import Study, dicts, insert_rows
from corpus_audit.methods.corpus_groups import FileGroup, assign_groups
from corpus_audit.methods.stats import wilson_interval

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
            table = pa.Table.from_pylist(rows).select(list(SUMMARY_COLUMNS))
            insert_rows(study.con, "corpus_summary", table)
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
