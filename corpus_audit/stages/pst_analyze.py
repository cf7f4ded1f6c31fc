"""Stage ``pst_analyze``: every PST number into the study tables (METHODS 2; docs/pst.md).

Image side (``side = 'image'``): the persons of ``pst_people`` from the configured classifier
(``label.classifier``), unit = image: Stereotype Score overall, per stereotype, per role and
per power occupation (``pst_scores``), single vs paired with the gap (``pst_gap``), PST-Both
and PST-Any (``pst_both_any``), perceived %female per role against the labour statistics
(``pst_labor``) and their correlation (``pst_labor_correlation``).

Caption side (``side = 'caption'``, when ``pst_captions`` found mentions): the same tables
over the corpus's (caption, role) units, unit = caption (kind ``corpus`` = every caption,
``single`` / ``paired`` = captions naming one / two or more roles), and ``pst_caption_roles``.

Intervals: percentile bootstrap with ``analysis.bootstrap`` replicates at
``analysis.confidence``, seed ``study.seed`` (:class:`corpus_audit.methods.pst.score.Bootstrap`).
Every run recomputes all tables and replaces them in one transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corpus_audit.backends.classifiers import classifier_id
from corpus_audit.core.catalogue import PST_SCORE_TABLES
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts
from corpus_audit.methods.lexicon import load_labor_stats
from corpus_audit.methods.pst import score
from corpus_audit.methods.pst.captions import caption_people, caption_scores
from corpus_audit.methods.pst.score import Bootstrap, labor_comparison
from corpus_audit.tables.pst_frames import insert_frame, read_frame

if TYPE_CHECKING:
    import pandas as pd

NAME = "pst_analyze"
SCORE_TABLES = PST_SCORE_TABLES  # each holds both sides (column `side`)


def image_tables(people: pd.DataFrame, labor: dict, boot: Any, confidence: float) -> dict:
    """Table name -> frame of the image side (unit = image)."""
    rows = score.labor_comparison(people, labor, confidence)
    return {
        "pst_scores": score.score_summary(people, bootstrap=boot),
        "pst_gap": score.single_vs_paired(people, bootstrap=boot),
        "pst_both_any": score.pst_both_any(people, bootstrap=boot),
        "pst_labor": rows,
        "pst_labor_correlation": score.labor_correlation(rows),
    }


def caption_tables(mentions: pd.DataFrame, labor: dict, boot: Any, confidence: float) -> dict:
    """Table name -> frame of the caption side (unit = caption), ``pst_caption_roles`` too."""
    scores = caption_scores(mentions, labor, bootstrap=boot)
    whole = caption_people(scores.caption_roles, split=False)
    return {
        "pst_scores": scores.summary,
        "pst_gap": scores.gap,
        "pst_both_any": scores.both_any,
        "pst_labor": labor_comparison(whole, labor, confidence),
        "pst_labor_correlation": scores.correlation,
        "pst_caption_roles": scores.roles,
    }


@stage_body(NAME)
def pst_analyze(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Recompute every PST score table; see the module docstring."""
    cfg = study.config
    cid = classifier_id(cfg.label)
    labor = load_labor_stats(cfg.lexicon.labor_stats, study.root)
    boot = Bootstrap(cfg.analysis.bootstrap, cfg.study.seed, cfg.analysis.confidence)
    people = read_frame(study, "pst_people", "classifier = ?", [cid])
    mentions = read_frame(study, "pst_caption_mentions")
    sides: dict[str, dict] = {}
    if len(people):
        sides["image"] = image_tables(people, labor, boot, cfg.analysis.confidence)
    if len(mentions):
        sides["caption"] = caption_tables(mentions, labor, boot, cfg.analysis.confidence)
    run.rows_in = len(people) + len(mentions)
    with study.transaction() as con:
        clear_tables(con, *SCORE_TABLES, "pst_caption_roles")
        for side, tables in sides.items():
            for table, frame in tables.items():
                extra = {} if table == "pst_caption_roles" else {"side": side}
                run.rows_out += insert_frame(con, table, frame, **extra)
    if not sides:
        run.skip(f"no persons from classifier {cid} and no caption mentions: nothing to score")
    run.summary = overall_rows(study)
    run.provenance.update(classifier=cid, bootstrap=cfg.analysis.bootstrap)
    return run


def overall_rows(study: Study) -> list[dict[str, Any]]:
    """The overall SS of each side, kind and variant (the stage's printed summary)."""
    return dicts(study.sql("pst_analyze/summary"))
