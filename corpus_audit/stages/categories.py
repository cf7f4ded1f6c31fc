"""The ``categories`` stage: gender distribution per occupational category of the images
generated from prompt tables (MAGBIG, BAFIS), against official statistics (METHODS §3).

Reads the generated images of the prompts that have a ``prompt_categories`` row (written by
``select`` for every prompt-table entry of ``lexicon.prompts``), their labels (the classifier
and threshold the ``analyze`` stage uses: ``analysis.classifier``, ``analysis.threshold``; the
face filter's kept images only) and, per prompt language, the official statistics file of
``lexicon.official_stats`` (``{en = "builtin:labor_stats_us_bls2024_pst.csv", de =
"stats_de.csv"}``; a language without a file gets no official figure). Writes
``category_distribution``: one row per model x prompt family x language x variant x category
(:func:`corpus_audit.methods.categories.category_distribution`, intervals at
``analysis.confidence``).

A study without prompt-table prompts skips the stage with a message (so ``corpus-audit run``
passes through it). The table is rewritten in one transaction: a failed run keeps the old
rows.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.categories import category_distribution, official_table
from corpus_audit.methods.lexicon.official_stats import load_official_stats
from corpus_audit.methods.lexicon.prompt_sets import load_categories
from corpus_audit.tables.labelled import choose_classifier, prepare_labels

STAGE = "categories"


def _labelled(study: Study) -> tuple[Any, str | None]:
    """One row per labelled generated image of a prompt-table prompt, and the classifier."""
    classifier = choose_classifier(study)
    prepare_labels(study, classifier, study.config.analysis.threshold)
    try:
        cur = study.sql("categories/labels")
        columns = [d[0] for d in cur.description]
        frame = pd.DataFrame(cur.fetchall(), columns=columns)
    finally:
        study.con.execute("DROP TABLE IF EXISTS analysis_labelled")
    return frame, classifier


def official_figures(study: Study, occupations: list[str]) -> Any:
    """Official %female per (language, category) from ``lexicon.official_stats`` (files
    relative to the study directory); raises LexiconError naming a bad file and line."""
    lex = study.config.lexicon
    categories = load_categories(lex.categories, study.root)
    stats = {
        language: load_official_stats(spec, study.root)
        for language, spec in sorted(lex.official_stats.items())
    }
    return official_table(stats, categories, occupations)


@stage_body(STAGE)
def categories(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Write ``category_distribution`` (see the module docstring)."""
    if not study.count("prompt_categories"):
        return run.skip("no prompt-table prompts (MAGBIG/BAFIS) in lexicon.prompts: nothing to do")
    occupations = study.column(
        "SELECT DISTINCT p.occupation FROM prompts p "
        "JOIN prompt_categories c USING (prompt_id) ORDER BY 1"
    )
    official = official_figures(study, occupations)
    labels, classifier = _labelled(study)
    table = category_distribution(labels, official, confidence=study.config.analysis.confidence)
    with study.transaction() as con:
        con.execute("DELETE FROM category_distribution")
        if len(table):
            con.register("_category_rows", table.astype(object).where(table.notna(), None))
            con.execute("INSERT INTO category_distribution BY NAME SELECT * FROM _category_rows")
            con.unregister("_category_rows")
    run.rows_in, run.rows_out = len(labels), len(table)
    run.drop("no_category", int(table.attrs.get("uncategorised", 0)))
    run.provenance.update(
        {
            "classifier": classifier,
            "threshold": study.config.analysis.threshold,
            "official_stats": dict(study.config.lexicon.official_stats),
            "categories": study.config.lexicon.categories,
        }
    )
    run.summary = _summary(table)
    if not len(labels):
        run.messages.append(
            "no labelled generated images of the prompt tables yet: run generate and label"
        )
    return run


def _summary(table: Any) -> list[dict[str, Any]]:
    """One line per row: the group, images, %female and the official figure."""
    keep = ["model_id", "prompt_set", "language", "variant", "category", "n_images"]
    out = []
    for rec in table.to_dict("records"):
        row = {k: rec[k] for k in keep}
        for key in ("percent_female", "official_pf", "gap_pp"):
            value = rec[key]
            row[key] = None if value is None or value != value else round(float(value), 1)
        out.append(row)
    return out
