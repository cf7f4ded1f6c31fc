"""The report's section on votes imported from another arena (``arena_ratings`` /
``arena_pairs``, written by ``corpus-audit battles import DIR FILE.json``): the ratings per
aspect and prompt language and, as figures, the rating intervals per aspect (one panel per
language) and the win-rate heatmap per aspect over all languages. Empty when the tables are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit.core.store import Study
from corpus_audit.report import figures as figs
from corpus_audit.report.leaderboard_page import interval_figure, win_rate_heatmap
from corpus_audit.tables.read import rows

TABLES = ("arena_votes", "arena_ratings", "arena_pairs")
INTERVAL_CAPTION = (
    "One panel per prompt language: Elo median over shuffled battle orders with its 95 % "
    "interval, Elo in the given order (tick) and the Bradley-Terry rating (diamond)."
)
WIN_RATE_CAPTION = (
    "Share of the decided battles (ties left out) the row model won against the column model; "
    "in brackets all battles of the pair, ties included. All prompt languages."
)


def arena_section(study: Study) -> dict[str, Any]:
    """Ratings (ordered by aspect, language with ``all`` first, rank), pairs, vote counts."""
    ratings = rows(
        study,
        "SELECT * FROM arena_ratings ORDER BY aspect, language <> 'all', language, rank, "
        "bt_rating DESC",
    )
    pairs = rows(study, "SELECT * FROM arena_pairs ORDER BY aspect, language, model_id, opponent")
    counts = rows(
        study,
        "SELECT aspect, count(*) AS votes, count(DISTINCT (record_sha256, occurrence)) AS records "
        "FROM arena_votes GROUP BY aspect ORDER BY aspect",
    )
    files = rows(study, "SELECT DISTINCT source_file FROM arena_votes ORDER BY source_file")
    return {
        "ratings": ratings,
        "pairs": pairs,
        "counts": counts,
        "files": [f["source_file"] for f in files],
        "aspects": sorted({r["aspect"] for r in ratings}),
    }


def arena_figures(
    ctx: dict[str, Any], out_dir: Path | None, safe: Any
) -> list[figs.RenderedFigure]:
    """Per aspect: the rating intervals per language and the all-language win-rate heatmap."""
    arena = ctx["arena"]
    if not arena["ratings"]:
        return []
    ratings, pairs = pd.DataFrame(arena["ratings"]), pd.DataFrame(arena["pairs"])
    out = []
    for aspect in arena["aspects"]:
        label = aspect.replace("_", " ")
        part = pairs[(pairs["aspect"] == aspect) & (pairs["language"] == "all")]
        title = f"Imported arena votes, win rate: {label}"
        jobs = (
            (
                interval_figure(ratings, aspect),
                f"arena_ratings_{safe(aspect)}",
                f"Imported arena votes, ratings per prompt language: {label}",
                INTERVAL_CAPTION,
            ),
            (
                win_rate_heatmap(part, title),
                f"arena_win_rate_{safe(aspect)}",
                title,
                WIN_RATE_CAPTION,
            ),
        )
        out += [
            figs.save(fig, name, fig_title, caption, out_dir)
            for fig, name, fig_title, caption in jobs
            if fig is not None  # None: nothing to draw
        ]
    return out
