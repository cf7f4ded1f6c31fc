"""The leaderboard page: an arena's published votes as ratings per aspect and prompt language.

``corpus-audit demo`` writes it from the BAFIS arena's published votes
(``demo_data/bafis_arena``) as its third page, ``published/leaderboard.html``; it is labelled as
those votes (no new measurement). One self-contained page like the report and the
amplification page: figures are PNG ``data:`` URIs, the style sheet is inline, no script, no
external URL, a Content-Security-Policy that allows nothing else; Jinja2 with autoescape on
(model names and prompts come from the file).

At the top, an overview of models x aspects (LMSYS / HEIM style, all prompts): per cell the
rank from the Bradley-Terry intervals and the rating with its interval, rows by the mean rank
over the aspects. Per aspect (bias, image quality, prompt alignment): one table per language
(all, en, de) with ONE rank column, labelled with its method (Bradley-Terry, 95 % percentile
bootstrap intervals), the rows in that rank's order (ties by the rating), battles,
Bradley-Terry with its interval, Elo median and 95 % interval over shuffled orders, Elo in the
given order (timestamps); a figure of the intervals (one panel per language); the win-rate
heatmap per language (wins / (wins + losses) of the row model against the column model,
battles in brackets).
The numbers are :func:`corpus_audit.methods.preferences.leaderboard.leaderboard` and
:func:`~corpus_audit.methods.preferences.leaderboard.pairs` of the votes read by
:func:`corpus_audit.methods.preferences.arena_import.read_arena_file`, the same functions
``corpus-audit battles import`` stores in a study.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit import __version__
from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.methods.preferences.arena_import import read_arena_file
from corpus_audit.methods.preferences.leaderboard import leaderboard, pairs
from corpus_audit.report import figures as figs
from corpus_audit.report import render
from corpus_audit.report.preference_figures import pair_heatmap, rating_intervals

TEMPLATE = "leaderboard.html.j2"
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
ASPECT_TITLES = {
    "bias": "Bias (which image reinforces stereotypes less)",
    "image_quality": "Image quality",
    "prompt_alignment": "Prompt alignment",
    "overall": "Overall",
}
LANGUAGE_TITLES = {"all": "all prompts", "en": "English prompts", "de": "German prompts"}


def arena_votes(files: Sequence[Path]) -> Any:
    """The answered votes of ``files`` in the given order (timestamp, then file and record),
    as ``battles import`` orders them in a study."""
    frames = [read_arena_file(Path(f)) for f in files]
    votes = pd.concat(frames, ignore_index=True)
    votes = votes.drop_duplicates(["record_sha256", "occurrence", "aspect"])
    return votes.sort_values(
        ["created_at", "source_file", "record", "aspect"], na_position="last", kind="stable"
    ).reset_index(drop=True)


def _uri(fig: Any, name: str) -> str | None:
    """The figure as a PNG data URI; None for no figure (no data to draw)."""
    if fig is None:
        return None
    png = figs.save(fig, name, "", "", None).png
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure(fig: Any, alt: str) -> dict[str, str] | None:
    """``{"uri", "alt"}`` of a figure for the template; None when there is none."""
    uri = _uri(fig, "figure")
    return None if uri is None else {"uri": uri, "alt": alt}


def win_rate_heatmap(pairs: Any, title: str) -> Any:
    """Win rate (wins / (wins + losses), ties left out) of the row model against the column
    model, with the battles behind it; ``pairs``: one (aspect, language) of the
    :func:`corpus_audit.methods.preferences.leaderboard.pairs` frame."""
    return pair_heatmap(pairs, "win_rate", "win rate: wins / (wins + losses)", title)


def interval_figure(ratings: Any, aspect: str) -> Any:
    """Elo median with its interval, Elo in the given order, Bradley-Terry: one panel per
    language, in the leaderboard's order (all prompts first), models in their rank order
    (:func:`corpus_audit.report.preference_figures.rating_intervals`); None without ratings."""
    part = ratings[ratings["aspect"] == aspect].copy()
    languages = list(part["language"].drop_duplicates())
    part["aspect"] = [LANGUAGE_TITLES.get(lang, lang) for lang in part["language"]]
    return rating_intervals(
        part,
        panels=[LANGUAGE_TITLES.get(lang, lang) for lang in languages],
        title=f"{ASPECT_TITLES.get(aspect, aspect)}: ratings per prompt language",
    )


def overview(ratings: Any) -> dict[str, Any]:
    """The models x aspects table at the top of the page (all prompts): per model and aspect
    the rank from the Bradley-Terry intervals and the rating with its interval; rows by the
    mean of a model's ranks over the aspects it was rated on, then its mean rating (the
    order of the ``mean rank`` column)."""
    part = ratings[ratings["language"] == "all"]
    aspects = list(part["aspect"].drop_duplicates())
    rows = []
    for model, mine in part.groupby("model_id", sort=True):
        cells = {r["aspect"]: r for r in mine.to_dict("records")}
        ranks = [int(c["rank"]) for c in cells.values()]
        rows.append(
            {
                "model_id": model,
                "cells": cells,
                "mean_rank": sum(ranks) / len(ranks),
                "mean_rating": sum(float(c["bt_rating"]) for c in cells.values()) / len(cells),
            }
        )
    rows.sort(key=lambda r: (r["mean_rank"], -r["mean_rating"], r["model_id"]))
    return {
        "aspects": [{"aspect": a, "title": ASPECT_TITLES.get(a, a)} for a in aspects],
        "rows": rows,
    }


def _count(votes: Any, aspect: str, language: str) -> int:
    chosen = votes["aspect"] == aspect
    if language != "all":
        chosen &= votes["language"] == language
    return int(chosen.sum())


def page_context(votes: Any, *, rounds: int = 1000, seed: int = 0) -> dict[str, Any]:
    """What the template shows (numbers as floats; figures as data URIs)."""
    ratings = leaderboard(votes, rounds=rounds, seed=seed)
    pair_rows = pairs(votes)
    aspects = []
    for aspect in ratings["aspect"].drop_duplicates():
        part = ratings[ratings["aspect"] == aspect]
        languages = []
        for language in part["language"].drop_duplicates():
            rows = part[part["language"] == language].to_dict("records")
            mask = (pair_rows["aspect"] == aspect) & (pair_rows["language"] == language)
            title = (
                f"Win rate: {aspect.replace('_', ' ')}, {LANGUAGE_TITLES.get(language, language)}"
            )
            languages.append(
                {
                    "language": language,
                    "title": LANGUAGE_TITLES.get(language, language),
                    "rows": rows,
                    "votes": _count(votes, aspect, language),
                    "heatmap": _figure(win_rate_heatmap(pair_rows[mask], title), title),
                }
            )
        aspects.append(
            {
                "aspect": aspect,
                "title": ASPECT_TITLES.get(aspect, aspect),
                "languages": languages,
                "figure": _figure(
                    interval_figure(ratings, aspect),
                    f"Rating intervals per prompt language: {aspect.replace('_', ' ')}",
                ),
            }
        )
    counts = votes.groupby("aspect").size().to_dict()
    return {
        "overview": overview(ratings),
        "aspects": aspects,
        "rounds": rounds,
        "seed": seed,
        "n_records": int(votes[["record_sha256", "occurrence"]].drop_duplicates().shape[0]),
        "votes_per_aspect": {str(k): int(v) for k, v in counts.items()},
        "first": votes["created_at"].min(),
        "last": votes["created_at"].max(),
    }


def write_leaderboard_page(
    path: Path,
    files: Sequence[Path],
    *,
    title: str,
    note: str,
    rounds: int = 1000,
    seed: int = 0,
) -> Path:
    """Render the page for the votes of ``files`` to ``path`` (atomically); returns ``path``."""
    ctx = page_context(arena_votes(files), rounds=rounds, seed=seed)
    ctx.update(
        {
            "title": title,
            "note": note,
            "version": __version__,
            "csp": CSP,
            "sources": [Path(f).name for f in files],
        }
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, render(ctx, TEMPLATE))
