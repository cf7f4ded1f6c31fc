"""The leaderboard page: an arena's published votes as ratings per aspect and prompt language.

``corpus-audit demo`` writes it from the BAFIS arena's published votes
(``demo_data/bafis_arena``) as its third page, ``published/leaderboard.html``; it is labelled as
those votes (no new measurement). One self-contained page like the report and the
amplification page: figures are PNG ``data:`` URIs, the style sheet is inline, no script, no
external URL, a Content-Security-Policy that allows nothing else; Jinja2 with autoescape on
(model names and prompts come from the file).

Per aspect (bias, image quality, prompt alignment): one table per language (all, en, de) with
the rank from the Bradley-Terry intervals, battles, Elo in the given order (timestamps), Elo
median and 95 % interval over shuffled orders, Bradley-Terry with its 95 % bootstrap interval;
a figure of the intervals (one panel per language); the win-rate heatmap per language
(wins / (wins + losses) of the row model against the column model, battles in brackets).
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


def _uri(fig: Any, name: str) -> str:
    png = figs.save(fig, name, "", "", None).png
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def win_rate_heatmap(pairs: Any, title: str) -> Any:
    """Win rate (wins / (wins + losses), ties left out) of the row model against the column
    model, with the battles behind it; ``pairs``: one (aspect, language) of the
    :func:`corpus_audit.methods.preferences.leaderboard.pairs` frame."""
    return pair_heatmap(pairs, "win_rate", "win rate: wins / (wins + losses)", title)


def interval_figure(ratings: Any, aspect: str) -> Any:
    """Elo median with its interval, Elo in the given order, Bradley-Terry: one panel per
    language (:func:`corpus_audit.report.preference_figures.rating_intervals`)."""
    part = ratings[ratings["aspect"] == aspect].copy()
    order = {lang: i for i, lang in enumerate(part["language"].drop_duplicates())}
    part["aspect"] = [
        f"{order[lang]}. {LANGUAGE_TITLES.get(lang, lang)}" for lang in part["language"]
    ]
    fig = rating_intervals(part)
    fig.suptitle(f"{ASPECT_TITLES.get(aspect, aspect)}: ratings per prompt language", fontsize=10)
    return fig


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
                    "heatmap": {
                        "uri": _uri(win_rate_heatmap(pair_rows[mask], title), "heatmap"),
                        "alt": title,
                    },
                }
            )
        aspects.append(
            {
                "aspect": aspect,
                "title": ASPECT_TITLES.get(aspect, aspect),
                "languages": languages,
                "figure": {
                    "uri": _uri(interval_figure(ratings, aspect), "intervals"),
                    "alt": f"Rating intervals per prompt language: {aspect.replace('_', ' ')}",
                },
            }
        )
    counts = votes.groupby("aspect").size().to_dict()
    return {
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
