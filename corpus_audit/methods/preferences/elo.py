"""Ratings from battles: Elo (METHODS §3), its spread over battle orders, Bradley-Terry.

Input everywhere: a DataFrame of battles with ``model_a``, ``model_b``, ``vote`` and optional
``aspect`` (missing = one aspect, ``all``). ``vote`` 0 = A wins, 1 = B wins, anything else
(2, empty, NaN) = draw, exactly as METHODS §3. Each aspect (bias, image quality, prompt
alignment) is rated on its own.

**Elo** (:func:`elo_ratings`): every model starts at ``initial`` = 1000; battle by battle,
``e_a = 1 / (1 + base^((r_b - r_a) / scale))``, ``e_b = 1 / (1 + base^((r_a - r_b) / scale))``,
``r_a += k (s_a - e_a)``, ``r_b += k (1 - s_a - e_b)`` with ``s_a`` = 1, 0 or 0.5; k = 4,
scale = 400, base = 10. Ratings are points on the Elo scale (a 400-point gap = 10:1 odds).

**Order spread** (:func:`elo_bootstrap`): Elo depends on the order of the battles, so it is
recomputed over ``rounds`` = 1000 random orders (``method="shuffle"``: permutations of the
battles, the METHODS default) or bootstrap samples (``method="resample"``: n battles drawn with
replacement, as the LMSYS arena notebooks do; this also carries sampling uncertainty). The
report gives the median and the percentile interval. Seeded (``numpy.random.default_rng``);
the rounds run at once as one array of ratings (rounds x models), battle by battle.

**Bradley-Terry** (:func:`bradley_terry`): the maximum-likelihood fit of
``P(i beats j) = 1 / (1 + base^((R_j - R_i) / scale))`` to all battles of an aspect at once
(order-free), ties counted as half a win for each side (as LMSYS does), by
``scipy.optimize.minimize`` (L-BFGS-B, analytic gradient) with a ridge penalty of
``ridge`` = 1e-6 on the natural-scale strengths (sklearn's C = 1e6 in the LMSYS notebooks):
it keeps the fit finite when a model never lost, and with it the ratings are anchored at
mean = ``initial``. Intervals: percentile bootstrap over ``rounds`` resamples of the battles.
A model that never lost (or never won) has an unbounded MLE: its rating is then limited only
by the penalty and its interval is wide; read it as "above every other model".

**Pairs** (:func:`pair_matrix`): battles, wins, losses and ties per ordered model pair, win
rate = wins / (wins + losses) (ties left out, as the arena's win-fraction matrix) and score
= (wins + ties / 2) / battles, both in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from corpus_audit.core.errors import RatingError
from corpus_audit.methods.stats import stable_seed

K, SCALE, BASE, INITIAL = 4.0, 400.0, 10.0, 1000.0
DEFAULT_ASPECT = "all"
ELO_COLUMNS = (
    "aspect",
    "model_id",
    "n_battles",
    "elo",
    "elo_median",
    "elo_ci_low",
    "elo_ci_high",
    "rounds",
    "method",
)
BT_COLUMNS = ("aspect", "model_id", "n_battles", "bt_rating", "bt_ci_low", "bt_ci_high", "rounds")
PAIR_MATRIX_COLUMNS = (
    "aspect",
    "model_id",
    "opponent",
    "battles",
    "wins",
    "losses",
    "ties",
    "win_rate",
    "score",
)
# aspect, model_id, n_battles, elo, elo_median, elo_ci_low, elo_ci_high, bt_rating,
# bt_ci_low, bt_ci_high, rank, rounds, method
RATING_COLUMNS = (*ELO_COLUMNS[:7], *BT_COLUMNS[3:6], "rank", "rounds", "method")


def score_a(votes: Any) -> np.ndarray:
    """``s_a`` per battle: 1.0 for vote 0, 0.0 for vote 1, 0.5 for anything else (2, empty,
    NaN, ``tie``). Numbers written as text (``"0"``, ``"1.0"``) count as those numbers."""
    return np.array([{0.0: 1.0, 1.0: 0.0}.get(_as_number(v), 0.5) for v in votes], dtype=float)


def _as_number(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value.strip() if isinstance(value, str) else value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _by_aspect(battles: Any) -> list[tuple[str, Any]]:
    missing = [c for c in ("model_a", "model_b", "vote") if c not in battles.columns]
    if missing:
        raise RatingError(f"ratings: the battles lack the column(s) {', '.join(missing)}")
    frame = battles.copy()
    if "aspect" not in frame.columns:
        frame["aspect"] = DEFAULT_ASPECT
    if frame[["model_a", "model_b", "aspect"]].isna().any().any():
        raise RatingError("ratings: a battle without model_a, model_b or aspect")
    same = frame[frame["model_a"] == frame["model_b"]]
    if len(same):
        raise RatingError(f"ratings: a battle of {same['model_a'].iloc[0]!r} against itself")
    return [(str(a), g) for a, g in frame.groupby("aspect", sort=True)]


def _encode(group: Any) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    models = sorted(set(group["model_a"].astype(str)) | set(group["model_b"].astype(str)))
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[m] for m in group["model_a"].astype(str)], dtype=np.intp)
    b = np.array([index[m] for m in group["model_b"].astype(str)], dtype=np.intp)
    return models, a, b, score_a(group["vote"].to_numpy())


def elo_orders(
    a: np.ndarray,
    b: np.ndarray,
    s: np.ndarray,
    orders: np.ndarray,
    n_models: int,
    *,
    k: float = K,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL,
) -> np.ndarray:
    """Elo after the battles taken in each order: ``orders`` is (rounds x steps) of battle
    indices; returns ratings (rounds x models). Vectorised over the rounds."""
    orders = np.atleast_2d(np.asarray(orders, dtype=np.intp))
    rounds = orders.shape[0]
    ratings = np.full((rounds, n_models), float(initial))
    rows = np.arange(rounds)
    for step in range(orders.shape[1]):
        j = orders[:, step]
        ia, ib, sa = a[j], b[j], s[j]
        ra, rb = ratings[rows, ia], ratings[rows, ib]
        ea = 1.0 / (1.0 + base ** ((rb - ra) / scale))
        eb = 1.0 / (1.0 + base ** ((ra - rb) / scale))
        ratings[rows, ia] = ra + k * (sa - ea)
        ratings[rows, ib] = rb + k * (1.0 - sa - eb)
    return ratings


_BLOCK_CELLS = 1 << 22  # battle indices of the orders drawn at once (32 MiB of intp)


def _orders(n: int, rounds: int, seed: int, method: str) -> np.ndarray:
    """Every order at once (rounds x n): :func:`_order_blocks` in one array."""
    return np.concatenate(list(_order_blocks(n, rounds, seed, method)))


def _order_blocks(n: int, rounds: int, seed: int, method: str) -> Iterator[np.ndarray]:
    """The ``rounds`` random orders of ``n`` battles, drawn from one generator in blocks of
    about :data:`_BLOCK_CELLS` cells, so memory does not grow with ``rounds`` (one block when
    rounds x n fits, as it does at the default 1,000 rounds for up to 4,194 battles)."""
    if method not in ("shuffle", "resample"):
        raise RatingError(f"ratings: method {method!r} is not 'shuffle' or 'resample'")
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, rounds, block):
        size = min(block, rounds - start)
        if method == "shuffle":
            yield rng.permuted(np.tile(np.arange(n), (size, 1)), axis=1)
        else:
            yield rng.integers(0, n, size=(size, n))


def _model_rows(
    aspect: str, models: list[str], a: np.ndarray, b: np.ndarray, values: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row per model: aspect, model_id, n_battles, then ``values`` (a per-model sequence,
    or one value for all); numbers as Python floats, None kept."""
    counts = np.bincount(a, minlength=len(models)) + np.bincount(b, minlength=len(models))
    rows = []
    for i, model in enumerate(models):
        row: dict[str, Any] = {"aspect": aspect, "model_id": model, "n_battles": int(counts[i])}
        for name, value in values.items():
            item = value[i] if isinstance(value, list | np.ndarray) else value
            row[name] = float(item) if isinstance(item, float | np.floating) else item
        rows.append(row)
    return rows


def elo_ratings(
    battles: Any,
    *,
    k: float = K,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL,
) -> Any:
    """Elo in the battles' row order, per aspect: DataFrame ``aspect, model_id, n_battles,
    elo`` (points), models sorted by name within an aspect."""
    rows = []
    for aspect, group in _by_aspect(battles):
        models, a, b, s = _encode(group)
        order = np.arange(len(group))[None, :]
        final = elo_orders(
            a, b, s, order, len(models), k=k, scale=scale, base=base, initial=initial
        )[0]
        rows += _model_rows(aspect, models, a, b, {"elo": final})
    return pd.DataFrame(rows, columns=["aspect", "model_id", "n_battles", "elo"])


def elo_bootstrap(
    battles: Any,
    *,
    rounds: int = 1000,
    seed: int = 0,
    method: str = "shuffle",
    confidence: float = 0.95,
    orders: dict[str, np.ndarray] | None = None,
    k: float = K,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL,
) -> Any:
    """Elo in the given order and its median and percentile interval over ``rounds`` random
    orders, per aspect: DataFrame :data:`ELO_COLUMNS` (ratings in points).

    ``orders``: explicit battle orders per aspect (rounds x steps arrays of row positions
    within the aspect's battles, in their given order), replacing the seeded ones; for
    reproducing a published run or testing. The seed of an aspect is derived from ``seed``
    and the aspect name, so adding an aspect does not change another's intervals.
    """
    if rounds < 1:
        raise RatingError(f"ratings: rounds must be >= 1, got {rounds}")
    if not 0 < confidence < 1:
        raise RatingError(f"ratings: confidence {confidence} is not in (0, 1)")
    alpha = (1 - confidence) / 2
    rows = []
    for aspect, group in _by_aspect(battles):
        models, a, b, s = _encode(group)
        opts = {"k": k, "scale": scale, "base": base, "initial": initial}
        given = elo_orders(a, b, s, np.arange(len(group))[None, :], len(models), **opts)[0]
        if orders is not None and aspect in orders:
            drawn = np.atleast_2d(np.asarray(orders[aspect], dtype=np.intp))
            if drawn.size == 0 or drawn.min() < 0 or drawn.max() >= len(group):
                raise RatingError(
                    f"ratings: the orders of {aspect!r} must index its {len(group)} battles"
                )
            label = "given"
            spread = elo_orders(a, b, s, drawn, len(models), **opts)
        else:
            blocks = _order_blocks(len(group), rounds, stable_seed(seed, "elo", aspect), method)
            spread = np.concatenate(
                [elo_orders(a, b, s, block, len(models), **opts) for block in blocks]
            )  # rounds x models: the orders themselves are never all held at once
            label = method
        low, mid, high = np.quantile(spread, [alpha, 0.5, 1 - alpha], axis=0)
        values = {"elo": given, "elo_median": mid, "elo_ci_low": low, "elo_ci_high": high}
        values.update({"rounds": int(spread.shape[0]), "method": label})
        rows += _model_rows(aspect, models, a, b, values)
    return pd.DataFrame(rows, columns=list(ELO_COLUMNS))


# -- Bradley-Terry ----------------------------------------------------------------------------
def _pair_scores(
    m: int, a: np.ndarray, b: np.ndarray, s: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(won, n)`` over ``m`` models: won[i, j] = points of i against j (win 1, tie 0.5),
    n[i, j] = battles of i and j; ``weights``: how often each battle counts (default 1)."""
    w = np.ones(len(a)) if weights is None else weights
    won = np.zeros((m, m))
    n = np.zeros((m, m))
    np.add.at(won, (a, b), w * s)
    np.add.at(won, (b, a), w * (1.0 - s))
    np.add.at(n, (a, b), w)
    np.add.at(n, (b, a), w)
    return won, n


def bt_fit(
    won: np.ndarray, n: np.ndarray, *, ridge: float = 1e-6, start: np.ndarray | None = None
) -> np.ndarray:
    """Natural-scale strengths theta (mean 0) maximising
    ``sum_ij won_ij log sigma(theta_i - theta_j) - ridge/2 |theta|^2`` (each pair counted
    from both sides, so ``won_ij + won_ji = n_ij``); ``start``: initial theta."""
    m = won.shape[0]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        diff = theta[:, None] - theta[None, :]
        log_p = -np.logaddexp(0.0, -diff)  # log sigma(theta_i - theta_j)
        value = -float(np.sum(won * log_p)) + 0.5 * ridge * float(theta @ theta)
        g = won * (1.0 - np.exp(log_p))  # d/d theta_i of won_ij log p_ij, per (i, j)
        grad = -(g.sum(axis=1) - g.sum(axis=0)) + ridge * theta
        return value, grad

    res = minimize(
        loss,
        np.zeros(m) if start is None else start,
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 10_000},
    )
    return res.x - res.x.mean()


def bt_fit_many(
    won: np.ndarray, n: np.ndarray, start: np.ndarray, *, ridge: float = 1e-6
) -> np.ndarray:
    """:func:`bt_fit` for many score tables at once (``won``, ``n``: rounds x m x m; ``start``:
    rounds x m): Newton's method on the same objective, vectorised over the rounds (the
    gradient as in :func:`bt_fit`, the Hessian ``H_ii = sum_j n_ij p_ij (1 - p_ij) + ridge``,
    ``H_ij = -n_ij p_ij (1 - p_ij)``), steps capped at 4 per coordinate and kept at mean 0,
    until no strength moves by more than 1e-10 (at most 500 steps). Returns rounds x m
    strengths, each row with mean 0; ``start`` should have mean-0 rows."""
    theta = np.array(start, dtype=float)
    diagonal = np.arange(theta.shape[1])
    for _ in range(500):
        p = 1.0 / (1.0 + np.exp(theta[:, None, :] - theta[:, :, None]))  # sigma(theta_i - theta_j)
        g = won * (1.0 - p)
        grad = -(g.sum(axis=2) - g.sum(axis=1)) + ridge * theta
        hess = -n * p * (1.0 - p)
        hess[:, diagonal, diagonal] = -hess.sum(axis=2) + ridge
        step = np.clip(np.linalg.solve(hess, grad[:, :, None])[:, :, 0], -4.0, 4.0)
        # The optimum has mean 0; a shift of all strengths is flat up to the tiny ridge, so
        # the step's mean is rounding noise: drop it (and measure convergence without it).
        step -= step.mean(axis=1, keepdims=True)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return theta - theta.mean(axis=1, keepdims=True)


def bradley_terry(
    battles: Any,
    *,
    rounds: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    scale: float = SCALE,
    base: float = BASE,
    initial: float = INITIAL,
    ridge: float = 1e-6,
) -> Any:
    """Bradley-Terry maximum-likelihood ratings on the Elo scale (mean = ``initial``) per
    aspect, with a percentile bootstrap interval over ``rounds`` resamples of the battles
    (``rounds`` = 0: no interval): DataFrame :data:`BT_COLUMNS`.

    Resampling n battles with replacement only changes how often each distinct (A, B,
    outcome) occurs, so a resample is one multinomial draw over the distinct battles (the same
    distribution, without materialising n rows per round); the resamples are refitted together
    by :func:`bt_fit_many`, starting from the full-data fit."""
    factor = scale / math.log(base)
    alpha = (1 - confidence) / 2
    rows = []
    for aspect, group in _by_aspect(battles):
        models, a, b, s = _encode(group)
        kinds, counts_of_kind = np.unique(np.column_stack([a, b, s]), axis=0, return_counts=True)
        ka, kb, ks = kinds[:, 0].astype(np.intp), kinds[:, 1].astype(np.intp), kinds[:, 2]
        won, n = _pair_scores(len(models), ka, kb, ks, counts_of_kind.astype(float))
        theta = bt_fit(won, n, ridge=ridge)
        rating = initial + factor * theta
        low: Any = None
        high: Any = None
        if rounds > 0:
            rng = np.random.default_rng(stable_seed(seed, "bt", aspect))
            draws = rng.multinomial(len(group), counts_of_kind / len(group), size=rounds)
            m = len(models)
            won_k, n_k = np.zeros((len(kinds), m, m)), np.zeros((len(kinds), m, m))
            k = np.arange(len(kinds))
            won_k[k, ka, kb], won_k[k, kb, ka] = ks, 1.0 - ks
            n_k[k, ka, kb] = n_k[k, kb, ka] = 1.0
            weights = draws.astype(float)
            boot = bt_fit_many(
                np.tensordot(weights, won_k, axes=1),
                np.tensordot(weights, n_k, axes=1),
                np.tile(theta, (rounds, 1)),  # theta has mean 0
                ridge=ridge,
            )
            low, high = initial + factor * np.quantile(boot, [alpha, 1 - alpha], axis=0)
        values = {"bt_rating": rating, "bt_ci_low": low, "bt_ci_high": high, "rounds": rounds}
        rows += _model_rows(aspect, models, a, b, values)
    return pd.DataFrame(rows, columns=list(BT_COLUMNS))


# -- pairs ------------------------------------------------------------------------------------
def pair_matrix(battles: Any) -> Any:
    """Per aspect and ordered model pair: DataFrame :data:`PAIR_MATRIX_COLUMNS` (each pair
    appears twice, once from each side; pairs that never met are absent)."""
    rows = []
    for aspect, group in _by_aspect(battles):
        models, a, b, s = _encode(group)
        won, n = _pair_scores(len(models), a, b, s)
        win = np.zeros_like(n)  # win[i, j]: battles i won against j
        np.add.at(win, (a[s == 1.0], b[s == 1.0]), 1.0)
        np.add.at(win, (b[s == 0.0], a[s == 0.0]), 1.0)
        for i, m in enumerate(models):
            for j, o in enumerate(models):
                if i == j or n[i, j] == 0:
                    continue
                total, w, lose = int(n[i, j]), int(win[i, j]), int(win[j, i])
                ties = total - w - lose
                rows.append(
                    {
                        "aspect": aspect,
                        "model_id": m,
                        "opponent": o,
                        "battles": total,
                        "wins": w,
                        "losses": lose,
                        "ties": ties,
                        "win_rate": w / (w + lose) if w + lose else None,
                        "score": float(won[i, j] / n[i, j]),
                    }
                )
    return pd.DataFrame(rows, columns=list(PAIR_MATRIX_COLUMNS))


def preference_ratings(
    battles: Any,
    *,
    rounds: int = 1000,
    seed: int = 0,
    method: str = "shuffle",
    confidence: float = 0.95,
    ridge: float = 1e-6,
) -> Any:
    """Elo (given order, median and interval over orders) and Bradley-Terry side by side, per
    aspect and model: DataFrame :data:`RATING_COLUMNS`; ``rank`` 1 = highest Elo median."""
    elo = elo_bootstrap(battles, rounds=rounds, seed=seed, method=method, confidence=confidence)
    bt = bradley_terry(battles, rounds=rounds, seed=seed, confidence=confidence, ridge=ridge)
    merged = elo.merge(
        bt.drop(columns=["n_battles", "rounds"]), on=["aspect", "model_id"], how="left"
    )
    merged["rank"] = (
        merged.groupby("aspect")["elo_median"].rank(ascending=False, method="min").astype(int)
    )
    merged = merged.sort_values(["aspect", "rank", "model_id"], kind="stable")
    return merged.reset_index(drop=True)[list(RATING_COLUMNS)]
