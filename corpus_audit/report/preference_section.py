"""The report's METHODS §3 sections: category distribution vs official statistics, and the
ratings from human votes (Elo, Bradley-Terry, pairwise counts).

Both read study tables only (``category_distribution`` from the ``categories`` stage;
``preference_ratings`` / ``preference_pairs`` from ``corpus-audit battles import``) and are
empty when those are. Figures: one grouped bar chart per prompt language
(:func:`corpus_audit.report.preference_figures.category_bars`), the rating intervals, and a
pairwise-score heatmap per aspect.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit.core.store import Study
from corpus_audit.report import figures as figs
from corpus_audit.report import preference_figures as pf
from corpus_audit.tables.read import rows


def categories_section(study: Study) -> dict[str, Any]:
    """``rows`` of ``category_distribution`` (ordered for the table) and its ``languages``."""
    table = rows(
        study,
        "SELECT * FROM category_distribution ORDER BY language, prompt_set NULLS FIRST, variant, "
        "category, model_id",
    )
    return {"rows": table, "languages": sorted({r["language"] for r in table})}


def preferences_section(study: Study) -> dict[str, Any]:
    """Ratings and pair counts per aspect, and how many votes / annotators they rest on."""
    ratings = rows(study, "SELECT * FROM preference_ratings ORDER BY aspect, rank, model_id")
    pairs = rows(study, "SELECT * FROM preference_pairs ORDER BY aspect, model_id, opponent")
    row = study.con.execute(
        "SELECT count(*), count(DISTINCT annotator), count(DISTINCT pair_id) FROM battles"
    ).fetchone()
    votes, annotators, battles = (int(v) for v in row) if row else (0, 0, 0)
    return {
        "ratings": ratings,
        "pairs": pairs,
        "votes": votes,
        "annotators": annotators,
        "battles": battles,
        "aspects": sorted({r["aspect"] for r in ratings}),
    }


def _frame(records: list[dict[str, Any]]) -> Any:
    return pd.DataFrame(records)


CATEGORY_CAPTION = (
    "Bars: %female = female / (female + male) of the labelled generated images of the "
    "category's prompts, per model, with its Wilson interval; black line: the official %female "
    "of the category for this language's statistics."
)
RATING_CAPTION = (
    "Per aspect: Elo median over shuffled battle orders with its 95 % interval, Elo in the "
    "import order (bar) and the Bradley-Terry rating (diamond)."
)
PAIR_CAPTION = (
    "Share of points (wins + ties / 2) of the row model against the column model, with the "
    "number of battles."
)


def preference_figures(
    ctx: dict[str, Any], out_dir: Path | None, safe: Any
) -> list[figs.RenderedFigure]:
    """The figures of both sections (none when their tables are empty)."""
    cats, prefs = ctx["categories"], ctx["preferences"]
    title = "Generated %female per occupational category vs official statistics: {}"
    jobs: list[tuple[Any, str, str, str]] = [  # (figure, file name, title, caption)
        (pf.category_bars(_frame(cats["rows"]), lang), f"categories_{safe(lang)}",
         title.format(lang), CATEGORY_CAPTION)
        for lang in cats["languages"]
    ]  # fmt: skip
    if prefs["ratings"]:
        fig = pf.rating_intervals(_frame(prefs["ratings"]))
        jobs.append((fig, "preference_ratings", "Model ratings from human votes", RATING_CAPTION))
    jobs += [
        (pf.win_rate_heatmap(_frame(prefs["pairs"]), aspect), f"preference_pairs_{safe(aspect)}",
         f"Pairwise score: {aspect.replace('_', ' ')}", PAIR_CAPTION)
        for aspect in prefs["aspects"]
    ]  # fmt: skip
    return [
        figs.save(fig, name, title, caption, out_dir)
        for fig, name, title, caption in jobs
        if fig is not None  # None: nothing to draw
    ]
