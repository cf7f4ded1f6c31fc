"""The labels the analysis uses: which classifier's, confident at which threshold.

:func:`choose_classifier` picks the ``labels.classifier`` (``analysis.classifier``, else the only
one, else the one ``label.classifier`` names); :func:`prepare_labels` makes the temp table
``analysis_labelled`` (``sql/analyze/labelled.sql``) that the cut at N labelled images
(:mod:`corpus_audit.tables.subsets`), the ``analyze`` stage and ``categories`` read.
"""

from __future__ import annotations

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.core.store import Study


def choose_classifier(study: Study) -> str | None:
    """The ``labels.classifier`` the analysis uses; None when there are no labels.

    ``analysis.classifier`` when set (it must exist in ``labels``); else the only classifier
    present; else the one matching ``label.classifier`` (``clip`` matches ``clip:...``).
    """
    names = study.column("SELECT DISTINCT classifier FROM labels ORDER BY classifier")
    wanted = study.config.analysis.classifier
    if wanted:
        if names and wanted not in names:
            raise CorpusAuditError(
                f"{study.root / 'study.toml'}: analysis.classifier {wanted!r} has no labels "
                f"(labels hold: {', '.join(names)})"
            )
        return wanted if names else None
    if len(names) <= 1:
        return names[0] if names else None
    configured = study.config.label.classifier
    matching = [n for n in names if n == configured or n.startswith(configured + ":")]
    if len(matching) == 1:
        return matching[0]
    raise CorpusAuditError(
        f"{study.root / 'study.toml'}: labels hold several classifiers ({', '.join(names)}); "
        "set analysis.classifier to the one to analyse"
    )


def prepare_labels(study: Study, classifier: str | None, threshold: float) -> int:
    """Create the temp table ``analysis_labelled``; returns how many images it holds."""
    study.sql("analyze/labelled", classifier=classifier or "", threshold=float(threshold))
    return study.count("analysis_labelled")
