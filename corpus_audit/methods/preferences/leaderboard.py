"""An arena's leaderboard from its votes: ratings per aspect and per aspect x prompt language.

Pure computation on a DataFrame of votes in their given order (``aspect``, ``language``,
``model_a``, ``model_b``, ``vote``; vote 0 = A wins, 1 = B wins, 2 and 3 = the two tie kinds,
both a draw, as METHODS §3 and the BAFIS Elo have it). Every rating is the one of
:mod:`corpus_audit.methods.preferences.elo` (Elo k = 4, scale 400, base 10, initial 1000;
Bradley-Terry maximum likelihood on the Elo scale with ties as half a win each, ridge 1e-6):

- **groups**: each aspect over all languages (``language`` = ``all``) and each aspect x
  language (``en``, ``de``, ...; votes without a language only count in ``all``);
- **Elo** in the given order (``elo``), and its median and percentile interval over
  ``rounds`` shuffled orders (``elo_median``, ``elo_ci_low``, ``elo_ci_high``);
- **Bradley-Terry** (``bt_rating``) with a percentile bootstrap interval over ``rounds``
  resamples of the group's votes (``bt_ci_low``, ``bt_ci_high``);
- **ranks from the intervals**: ``rank`` = 1 + the number of models whose Bradley-Terry
  interval lies wholly above this model's (lower bound > this upper bound), so a model ranks
  above another only when its interval lies above; ``rank_elo`` the same over the Elo
  shuffled-order intervals (which show order dependence, not sampling uncertainty). Models
  that share a rank are not separable by these votes;
- **pairs**: battles, wins, losses, ties (both kinds) and ``ties_bothbad`` (vote 3 only), win
  rate = wins / (wins + losses), score = (wins + ties / 2) / battles, per ordered pair.

``rounds`` is at most :data:`MAX_ROUNDS`; rounds run in chunks of :data:`CHUNK` (the battle
orders and the resampled score tables of one chunk only), so memory beyond the kept
rounds x models replicate ratings does not grow with ``rounds``. Seeds: one stream per
(aspect, language), derived from ``seed`` (adding a language changes no other group's
intervals).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.methods.preferences import elo
from corpus_audit.methods.stats import stable_seed

ALL_LANGUAGES = "all"
MAX_ROUNDS = 10_000
CHUNK = 250


def _span(columns: tuple[str, ...], first: str, last: str) -> tuple[str, ...]:
    """The columns from ``first`` to ``last``, both included."""
    return columns[columns.index(first) : columns.index(last) + 1]


# elo.RATING_COLUMNS from model_id to rank: model_id, n_battles, elo, elo_median, elo_ci_low,
# elo_ci_high, bt_rating, bt_ci_low, bt_ci_high, rank
LEADERBOARD_COLUMNS = (
    "aspect",
    "language",
    *_span(elo.RATING_COLUMNS, "model_id", "rank"),
    "rank_elo",
    "rounds",
)
# elo.PAIR_MATRIX_COLUMNS from model_id to ties: model_id, opponent, battles, wins, losses, ties
PAIR_COLUMNS = (
    "aspect",
    "language",
    *_span(elo.PAIR_MATRIX_COLUMNS, "model_id", "ties"),
    "ties_bothbad",
    "win_rate",
    "score",
)


class LeaderboardError(CorpusAuditError):
    """Settings or votes a leaderboard cannot be computed from."""


def check_rounds(rounds: int) -> int:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise LeaderboardError(
            f"rounds must be a whole number from 1 to {MAX_ROUNDS}, got {rounds!r}"
        )
    return rounds


def groups(votes: Any) -> Iterator[tuple[str, str, Any]]:
    """``(aspect, language, votes of the group in given order)``: each aspect with ``all``
    first, then its languages in name order."""
    missing = [c for c in ("aspect", "model_a", "model_b", "vote") if c not in votes.columns]
    if missing:
        raise LeaderboardError(f"leaderboard: the votes lack the column(s) {', '.join(missing)}")
    language = votes["language"] if "language" in votes.columns else None
    for aspect in sorted(votes["aspect"].astype(str).unique()):
        part = votes[votes["aspect"].astype(str) == aspect]
        yield aspect, ALL_LANGUAGES, part
        if language is None:
            continue
        langs = part["language"].dropna().astype(str)
        for lang in sorted(langs.unique()):
            if lang != ALL_LANGUAGES:
                yield aspect, lang, part[part["language"].astype(str) == lang]


def _encode(part: Any) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    models = sorted(set(part["model_a"].astype(str)) | set(part["model_b"].astype(str)))
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[m] for m in part["model_a"].astype(str)], dtype=np.intp)
    b = np.array([index[m] for m in part["model_b"].astype(str)], dtype=np.intp)
    if np.any(a == b):
        raise LeaderboardError("leaderboard: a battle of a model against itself")
    return models, a, b, elo.score_a(part["vote"].to_numpy())


def _chunks(rounds: int) -> Iterator[int]:
    done = 0
    while done < rounds:
        size = min(CHUNK, rounds - done)
        yield size
        done += size


def elo_shuffled(
    a: np.ndarray, b: np.ndarray, s: np.ndarray, m: int, rounds: int, rng: np.random.Generator
) -> np.ndarray:
    """Elo after each of ``rounds`` random orders of the battles: rounds x m, chunk by chunk."""
    out = np.empty((rounds, m))
    at = 0
    for size in _chunks(rounds):
        orders = rng.permuted(np.tile(np.arange(len(a)), (size, 1)), axis=1)
        out[at : at + size] = elo.elo_orders(a, b, s, orders, m)
        at += size
    return out


def bt_bootstrap(
    a: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
    m: int,
    rounds: int,
    rng: np.random.Generator,
    ridge: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """Bradley-Terry strengths (natural scale, mean 0) of all battles, and of ``rounds``
    resamples (n battles with replacement, drawn as one multinomial over the distinct
    (A, B, outcome) kinds): ``(theta, rounds x m)``, refitted chunk by chunk."""
    kinds, counts = np.unique(np.column_stack([a, b, s]), axis=0, return_counts=True)
    ka, kb, ks = kinds[:, 0].astype(np.intp), kinds[:, 1].astype(np.intp), kinds[:, 2]
    won_k, n_k = np.zeros((len(kinds), m, m)), np.zeros((len(kinds), m, m))
    k = np.arange(len(kinds))
    won_k[k, ka, kb], won_k[k, kb, ka] = ks, 1.0 - ks
    n_k[k, ka, kb] = n_k[k, kb, ka] = 1.0
    weights = counts.astype(float)
    theta = elo.bt_fit(
        np.tensordot(weights, won_k, axes=1), np.tensordot(weights, n_k, axes=1), ridge=ridge
    )
    out = np.empty((rounds, m))
    at = 0
    for size in _chunks(rounds):
        draws = rng.multinomial(len(a), counts / len(a), size=size).astype(float)
        out[at : at + size] = elo.bt_fit_many(
            np.tensordot(draws, won_k, axes=1),
            np.tensordot(draws, n_k, axes=1),
            np.tile(theta, (size, 1)),
            ridge=ridge,
        )
        at += size
    return theta, out


def interval_ranks(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """1 + the number of models whose interval lies wholly above each model's."""
    return 1 + (low[None, :] > high[:, None]).sum(axis=1)


def leaderboard(votes: Any, *, rounds: int = 1000, seed: int = 0, confidence: float = 0.95) -> Any:
    """Ratings per (aspect, language) and model: DataFrame :data:`LEADERBOARD_COLUMNS`, sorted
    by aspect, language (``all`` first), rank, Bradley-Terry rating. See the module docstring."""
    check_rounds(rounds)
    if not 0 < confidence < 1:
        raise LeaderboardError(f"confidence {confidence} is not in (0, 1)")
    q = [(1 - confidence) / 2, 0.5, 1 - (1 - confidence) / 2]
    factor = elo.SCALE / math.log(elo.BASE)
    rows = []
    for aspect, language, part in groups(votes):
        models, a, b, s = _encode(part)
        m = len(models)
        given = elo.elo_orders(a, b, s, np.arange(len(a))[None, :], m)[0]
        rng = np.random.default_rng(stable_seed(seed, "arena-elo", aspect, language))
        e_low, e_mid, e_high = np.quantile(elo_shuffled(a, b, s, m, rounds, rng), q, axis=0)
        rng = np.random.default_rng(stable_seed(seed, "arena-bt", aspect, language))
        theta, boot = bt_bootstrap(a, b, s, m, rounds, rng)
        b_low, _, b_high = elo.INITIAL + factor * np.quantile(boot, q, axis=0)
        rank, rank_elo = interval_ranks(b_low, b_high), interval_ranks(e_low, e_high)
        counts = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
        for i, model in enumerate(models):
            rows.append(
                {
                    "aspect": aspect,
                    "language": language,
                    "model_id": model,
                    "n_battles": int(counts[i]),
                    "elo": float(given[i]),
                    "elo_median": float(e_mid[i]),
                    "elo_ci_low": float(e_low[i]),
                    "elo_ci_high": float(e_high[i]),
                    "bt_rating": float(elo.INITIAL + factor * theta[i]),
                    "bt_ci_low": float(b_low[i]),
                    "bt_ci_high": float(b_high[i]),
                    "rank": int(rank[i]),
                    "rank_elo": int(rank_elo[i]),
                    "rounds": rounds,
                }
            )
    frame = pd.DataFrame(rows, columns=list(LEADERBOARD_COLUMNS))
    if frame.empty:
        return frame
    frame["_all"] = frame["language"] != ALL_LANGUAGES
    frame = frame.sort_values(
        ["aspect", "_all", "language", "rank", "bt_rating"],
        ascending=[True, True, True, True, False],
        kind="stable",
    )
    return frame.drop(columns="_all").reset_index(drop=True)


def pairs(votes: Any) -> Any:
    """Battles, wins, losses, ties per (aspect, language) and ordered model pair: DataFrame
    :data:`PAIR_COLUMNS` (each pair twice, once from each side; pairs that never met absent)."""
    rows = []
    for aspect, language, part in groups(votes):
        counts: dict[
            tuple[str, str], list[int]
        ] = {}  # (model, opponent): wins, losses, ties, bothbad
        codes = [elo._as_number(v) for v in part["vote"]]
        for model_a, model_b, code in zip(
            part["model_a"].astype(str), part["model_b"].astype(str), codes, strict=True
        ):
            for me, other, win, lose in (
                (model_a, model_b, 0.0, 1.0),
                (model_b, model_a, 1.0, 0.0),
            ):
                c = counts.setdefault((me, other), [0, 0, 0, 0])
                if code == win:
                    c[0] += 1
                elif code == lose:
                    c[1] += 1
                else:
                    c[2] += 1
                    c[3] += code == 3.0
        for (me, other), (w, lose, ties, bothbad) in sorted(counts.items()):
            total = w + lose + ties
            rows.append(
                {
                    "aspect": aspect,
                    "language": language,
                    "model_id": me,
                    "opponent": other,
                    "battles": total,
                    "wins": w,
                    "losses": lose,
                    "ties": ties,
                    "ties_bothbad": bothbad,
                    "win_rate": w / (w + lose) if w + lose else None,
                    "score": (w + ties / 2) / total,
                }
            )
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))
