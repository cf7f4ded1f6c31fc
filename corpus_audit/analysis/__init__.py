"""Amplification analysis (METHODS 1.5-1.7): the ``analyze`` stage and ``amplify`` from CSVs.

- :func:`analyze` — the stage: %female per training subset and generated set, amplification
  per (model, strategy, occupation, prompt), per-prompt and overall means with t-tests and
  bootstrap intervals, captions-as-prompts lower bound, indicator statistics and the
  correlation with training %female. Tables: ``sql/schema_001_analyze.sql``.
- :func:`amplify_tables` — the same amplification arithmetic on two plain CSV tables.

Modules: ``stats`` (Wilson, bootstrap, t-test, Pearson), ``percent`` (%female from labels),
``amplification`` (A, exclusions, summaries, paper layout), ``correlation``, ``tables``
(CSV input/output), ``read`` (reading results back), ``stage`` (the stage body).
"""

from __future__ import annotations

from pathlib import Path

from corpus_audit.store import StageRun, Study


def analyze(study: Study, *, progress: bool = True) -> StageRun:
    """Run the ``analyze`` stage (see :mod:`corpus_audit.analysis.stage`)."""
    from corpus_audit.analysis.stage import analyze as _analyze

    return _analyze(study, progress=progress)


def amplify_tables(
    training_csv: Path, generated_csv: Path, out_dir: Path | None = None, **options: object
) -> StageRun:
    """Amplification from two %female CSVs (see :mod:`corpus_audit.analysis.tables`)."""
    from corpus_audit.analysis.tables import amplify_tables as _amplify

    return _amplify(training_csv, generated_csv, out_dir, **options)  # type: ignore[arg-type]


__all__ = ["amplify_tables", "analyze"]
