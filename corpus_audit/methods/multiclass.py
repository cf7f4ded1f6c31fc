"""Distributions over K classes: correction for an instrument's errors, and amplification.

The perceived-attribute instruments (age bins, skin-tone groups, gender) label each measured
image with one of ``K`` classes. Everything here works on **shares** (in [0, 1], rows summing
to 1) and **counts**; percentages are the caller's business. Arrays may carry leading
replicate dimensions where a docstring says so.

Correction (multi-class Rogan-Gladen, "adjusted classify and count")
--------------------------------------------------------------------
``M[i, j] = P(instrument says j | true class i)`` over ``K`` true classes and ``J`` predicted
columns, where the last ``J - K`` columns may be outcomes that are not counted (``ambiguous``).
The observed share ``q`` is over the counted columns only. With ``d_i`` the probability that
an item of true class ``i`` lands in a counted column, the true shares ``p`` satisfy, for every
counted column ``j``::

    sum_i p_i (M[i, j] - q_j d_i) = 0,      sum_i p_i = 1,   p_i >= 0

:func:`corrected_shares` solves this as a least-squares problem on the simplex (non-negative
least squares with the sum constraint as a heavily weighted row). With two classes and a
third ``ambiguous`` column the solution is exactly the binary estimator of
:func:`corpus_audit.methods.misclassification.corrected_share` (the system has one unknown and one
equation; clipping to [0, 1] is the simplex constraint).

Amplification
-------------
``tv_uniform(p) = 1/2 sum_i |p_i - 1/K|`` (0 for a uniform distribution, at most
``1 - 1/K``). ``A_K = TV(g, u) - TV(t, u)`` for a generated distribution ``g`` and a training
distribution ``t``; at ``K = 2`` it is ``|g_1 - 1/2| - |t_1 - 1/2|``, the binary amplification
``|G - 50| - |T - 50|`` divided by 100. A share estimated from ``n`` items is noisy and
``TV`` of a noisy share is biased **upward** (a uniform generator scores ~0.12 over 10 classes
at n = 100), so comparing sets of unequal size shows "amplification" from sample size alone.
:func:`amplification_k` removes it by **equal n**: the larger set is compared at the smaller
set's n (the mean TV of multinomial draws of that size from its shares), so two sets drawn from
the same distribution give A_K = 0 in expectation. :func:`tv_excess` reports a single set's TV
beyond what a uniform sample of the same n shows (0 in expectation for a uniform source).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls
from scipy.stats import chi2_contingency, norm, wasserstein_distance

SUM_WEIGHT = 1e4  # weight of the sum-to-one row in the simplex least squares
NULL_DRAWS = 2000  # multinomial draws behind the uniform-null and equal-n expectations


# -- the instrument's errors ------------------------------------------------------------------
def confusion(
    truth: Sequence[int],
    predicted: Sequence[int],
    k_true: int,
    k_pred: int,
    weights: Sequence[float] | None = None,
) -> np.ndarray:
    """Weighted ``(k_true, k_pred)`` matrix of ``P(predicted j | true i)``.

    ``truth`` in ``0..k_true-1`` (the human majority), ``predicted`` in ``0..k_pred-1`` (the
    instrument's class; extra columns such as ``ambiguous`` after the K classes), ``weights``
    the items' sampling weights (inverse inclusion probabilities; None = 1). A true class with
    no validated item has a row of NaN.
    """
    t = np.asarray(truth, dtype=int)
    p = np.asarray(predicted, dtype=int)
    w = np.ones(t.size) if weights is None else np.asarray(weights, dtype=float)
    if not t.size == p.size == w.size:
        raise ValueError("confusion: truth, predicted and weights differ in length")
    if t.size and (t.min() < 0 or t.max() >= k_true or p.min() < 0 or p.max() >= k_pred):
        raise ValueError("confusion: a class index out of range")
    cells = np.zeros((k_true, k_pred))
    np.add.at(cells, (t, p), w)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cells / cells.sum(axis=1, keepdims=True)


def corrected_shares(q: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """True shares ``(K,)`` on the simplex from the observed shares ``q`` over the counted
    predicted columns (``(C,)``, ``C <= J``, summing to 1) and ``matrix`` ``(K, J)`` of
    ``P(pred | true)`` whose first ``C`` columns are the counted ones. NaN where the matrix has a
    NaN row (a true class without validated items) or no counted outcome at all."""
    q = np.asarray(q, dtype=float)
    m = np.asarray(matrix, dtype=float)
    k, c = m.shape[0], q.size
    if np.isnan(m).any() or np.isnan(q).any():
        return np.full(k, np.nan)
    counted = m[:, :c]
    d = counted.sum(axis=1)
    system = counted.T - np.outer(q, d)  # (C, K): row j is sum_i p_i (M_ij - q_j d_i)
    a = np.vstack([system, SUM_WEIGHT * np.ones((1, k))])
    b = np.concatenate([np.zeros(c), [SUM_WEIGHT]])
    p, _ = nnls(a, b)
    total = p.sum()
    return p / total if total > 0 else np.full(k, np.nan)


def corrected_draws(q_draws: np.ndarray, matrix_draws: np.ndarray) -> np.ndarray:
    """Replicates ``(R, K)`` of :func:`corrected_shares` from paired replicates of the
    observed shares ``(R, C)`` and of the matrix ``(R, K, J)``."""
    return np.stack([corrected_shares(q, m) for q, m in zip(q_draws, matrix_draws, strict=True)])


def bootstrap_confusion(
    truth: Sequence[int],
    predicted: Sequence[int],
    strata: Sequence[object],
    k_true: int,
    k_pred: int,
    weights: Sequence[float] | None,
    replicates: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Replicates ``(R, k_true, k_pred)`` of :func:`confusion`: the validated items
    resampled with replacement within each stratum (the design ``validate export`` drew)."""
    t = np.asarray(truth, dtype=int)
    p = np.asarray(predicted, dtype=int)
    w = np.ones(t.size) if weights is None else np.asarray(weights, dtype=float)
    groups = [np.flatnonzero([s == g for s in strata]) for g in dict.fromkeys(strata)]
    out = np.empty((replicates, k_true, k_pred))
    for r in range(replicates):
        idx = np.concatenate([rng.choice(g, g.size) for g in groups]) if groups else t[:0]
        out[r] = confusion(t[idx], p[idx], k_true, k_pred, w[idx])
    return out


# -- distances to uniform and amplification ---------------------------------------------------
def tv_uniform(shares: np.ndarray) -> np.ndarray:
    """Total variation distance to the uniform distribution over the last axis, in
    [0, 1 - 1/K]."""
    s = np.asarray(shares, dtype=float)
    return 0.5 * np.abs(s - 1.0 / s.shape[-1]).sum(axis=-1)


def expected_tv(shares: np.ndarray, n: int, rng: np.random.Generator) -> float:
    """Mean TV to uniform of the shares of ``n`` items drawn from ``shares`` (multinomial):
    what a set of ``n`` items from that distribution shows on average."""
    if n <= 0:
        return float("nan")
    draws = rng.multinomial(n, np.asarray(shares, dtype=float), size=NULL_DRAWS) / n
    return float(tv_uniform(draws).mean())


def tv_excess(shares: np.ndarray, n: int, rng: np.random.Generator) -> float:
    """TV to uniform beyond what a perfectly uniform source shows at the same ``n`` (its
    expectation under uniformity is 0; negative values mean "as uniform as chance")."""
    k = np.asarray(shares).shape[-1]
    return float(tv_uniform(shares)) - expected_tv(np.full(k, 1.0 / k), n, rng)


@dataclass(frozen=True)
class Amplification:
    """``A_K`` of one (training, generated) pair, 0-1 scale (x 100 = percentage points)."""

    raw: float  # TV(g, u) - TV(t, u) of the measured shares
    equal_n: float  # both sides at the smaller n (small-sample bias removed)
    low: float  # interval of equal_n (bootstrap percentile, re-centred)
    high: float


def _tv_at(shares: np.ndarray, n_own: int, n_common: int, rng: np.random.Generator) -> float:
    """TV of a set's shares seen at ``n_common`` items: its own TV when it has that many,
    else the mean TV of ``n_common``-item draws from its shares."""
    return float(tv_uniform(shares)) if n_own == n_common else expected_tv(shares, n_common, rng)


def amplification_k(
    t_counts: np.ndarray,
    g_counts: np.ndarray,
    replicates: int,
    rng: np.random.Generator,
    confidence: float = 0.95,
) -> Amplification:
    """``A_K`` of training counts ``t_counts`` (K,) and generated counts ``g_counts`` (K,),
    raw and at equal n, with a bootstrap interval (both sides redrawn at the common n)."""
    t = np.asarray(t_counts, dtype=float)
    g = np.asarray(g_counts, dtype=float)
    n_t, n_g = int(t.sum()), int(g.sum())
    if n_t == 0 or n_g == 0:
        nan = float("nan")
        return Amplification(nan, nan, nan, nan)
    ts, gs = t / n_t, g / n_g
    n = min(n_t, n_g)
    raw = float(tv_uniform(gs) - tv_uniform(ts))
    point = _tv_at(gs, n_g, n, rng) - _tv_at(ts, n_t, n, rng)
    draws = tv_uniform(rng.multinomial(n, gs, size=replicates) / n) - tv_uniform(
        rng.multinomial(n, ts, size=replicates) / n
    )
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
    centre = float(draws.mean())
    return Amplification(raw, point, point + float(lo) - centre, point + float(hi) - centre)


def directional_amplification(train: np.ndarray, generated: np.ndarray) -> float:
    """Wang & Russakovsky (2021) directional bias amplification, task -> attribute.

    ``train`` and ``generated``: count matrices ``(T, A)`` (tasks = occupations, attributes =
    classes). ``y_ta = 1`` where task and class co-occur more than independence predicts in
    training; ``delta_ta = P_gen(a | t) - P_train(a | t)``; the result is the mean over cells
    of ``y delta - (1 - y) delta``, in [-1, 1] (positive: the generator moves towards the
    training set's associations)."""
    tr = np.asarray(train, dtype=float)
    ge = np.asarray(generated, dtype=float)
    total = tr.sum()
    if total == 0 or (tr.sum(axis=1) == 0).any() or (ge.sum(axis=1) == 0).any():
        return float("nan")
    joint = tr / total
    y = joint > np.outer(joint.sum(axis=1), joint.sum(axis=0))
    delta = ge / ge.sum(axis=1, keepdims=True) - tr / tr.sum(axis=1, keepdims=True)
    return float(np.where(y, delta, -delta).mean())


def emd_ordinal(p: np.ndarray, q: np.ndarray) -> float:
    """Earth mover's distance between two share vectors over ordered classes 1..K, in class
    steps (0 .. K - 1)."""
    positions = np.arange(len(p), dtype=float)
    if not (np.sum(p) > 0 and np.sum(q) > 0):
        return float("nan")
    return float(wasserstein_distance(positions, positions, p, q))


def normalised_entropy(counts: np.ndarray) -> tuple[float, float]:
    """Plug-in entropy of ``counts`` over ``ln K`` and its Miller-Madow bias-corrected value
    (adds ``(m - 1) / 2n`` nats, m = classes seen), both in [0, 1] (the corrected one capped)."""
    c = np.asarray(counts, dtype=float)
    n, k = c.sum(), c.size
    if n == 0 or k < 2:
        return float("nan"), float("nan")
    p = c[c > 0] / n
    h = float(-(p * np.log(p)).sum())
    h_mm = h + (p.size - 1) / (2.0 * n)
    return h / np.log(k), min(h_mm / np.log(k), 1.0)


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg q-values (NaN p-values stay NaN and are not counted)."""
    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if not ok.size:
        return q
    order = ok[np.argsort(p[ok])]
    ranked = p[order] * ok.size / np.arange(1, ok.size + 1)
    q[order] = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    return q


def two_proportion_p(k1: float, n1: float, k2: float, n2: float) -> float:
    """Two-sided p-value of a difference between the proportions ``k1/n1`` and ``k2/n2``
    (pooled z test); NaN when a side is empty or the pooled proportion is 0 or 1."""
    if n1 <= 0 or n2 <= 0:
        return float("nan")
    pooled = (k1 + k2) / (n1 + n2)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if not se > 0:
        return float("nan")
    return float(2 * norm.sf(abs(k1 / n1 - k2 / n2) / se))


def joint_matrix(*matrices: np.ndarray) -> np.ndarray:
    """The misclassification matrix of the joint label of several attributes when their errors
    are independent given the truth (the product model): the Kronecker product, classes in
    row-major order of the attributes given (first attribute slowest)."""
    out = np.ones((1, 1))
    for m in matrices:
        out = np.kron(out, np.asarray(m, dtype=float))
    return out


def error_independence_p(wrong_a: Sequence[bool], wrong_b: Sequence[bool]) -> float:
    """p-value of the product model's assumption on validated items: is the instrument's error
    on attribute A independent of its error on attribute B? (chi-square on the 2 x 2 table of
    wrong / right; NaN when a margin is empty)."""
    a = np.asarray(wrong_a, dtype=bool)
    b = np.asarray(wrong_b, dtype=bool)
    table = np.array([[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]])
    if (table.sum(axis=0) == 0).any() or (table.sum(axis=1) == 0).any():
        return float("nan")
    return float(chi2_contingency(table)[1])
