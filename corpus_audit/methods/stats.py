"""Small statistics: Wilson interval, percentile bootstrap helpers, t-test and Pearson r.

Every function returns ``None`` (or a tuple of ``None``) where the statistic is undefined
(no observations, zero variance) instead of NaN, so callers and tables show a blank rather
than a number that is not one. Percentages are on the 0-100 scale throughout.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy.stats import norm, pearsonr, ttest_1samp
from scipy.stats import t as t_dist


def z_value(confidence: float) -> float:
    """Two-sided normal quantile for ``confidence`` in (0, 1), e.g. 1.95996 for 0.95."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} is not in (0, 1)")

    return float(norm.ppf(0.5 + confidence / 2.0))


def percent(k: int, n: int) -> float | None:
    """100 * k / n, or None when n = 0."""
    return 100.0 * k / n if n > 0 else None


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Wilson score interval for a binomial proportion, in percent (0-100).

    ``k`` successes out of ``n`` trials. Returns ``(None, None)`` when ``n = 0``. Unlike the
    normal (Wald) interval it stays inside [0, 100] and is not degenerate at k = 0 or k = n.
    """
    if k < 0 or n < 0 or k > n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (None, None)
    z = z_value(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, centre - half)  # exact bounds at 0 and n (no rounding)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return (100.0 * lo, 100.0 * hi)


def ttest_zero(values: Sequence[float]) -> tuple[float | None, float | None]:
    """One-sample t-test of H0 "mean = 0" (scipy, two-sided): ``(t, p)``.

    ``(None, None)`` with fewer than two values or zero variance (t undefined).
    """
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size < 2 or float(np.ptp(arr)) == 0.0:
        return (None, None)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = ttest_1samp(arr, 0.0)
    t, p = float(res.statistic), float(res.pvalue)
    return (None if math.isnan(t) else t, None if math.isnan(p) else p)


def t_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Student-t interval of the mean of ``values`` (same unit as the values): mean +- t(n-1)
    x sd / sqrt(n). ``(None, None)`` for fewer than two values; a zero-width interval when
    they are all equal."""
    n = len(values)
    if n < 2:
        return (None, None)
    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    half = float(t_dist.ppf(0.5 + confidence / 2, n - 1) * arr.std(ddof=1) / math.sqrt(n))
    return (mean - half, mean + half)


def pearson(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None, int]:
    """Pearson r and its two-sided p-value (scipy) over pairs where both values exist.

    Returns ``(r, p, n)``; r and p are None with fewer than three pairs or a constant side.
    """
    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    n = len(pairs)
    if n < 3:
        return (None, None, n)
    xs = np.array([a for a, _ in pairs], dtype=float)
    ys = np.array([b for _, b in pairs], dtype=float)
    if float(np.ptp(xs)) == 0.0 or float(np.ptp(ys)) == 0.0:
        return (None, None, n)

    res = pearsonr(xs, ys)
    return (float(res.statistic), float(res.pvalue), n)


def percentile_interval(
    samples: np.ndarray, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of 1-D ``samples`` (NaNs ignored); Nones if none left."""
    arr = np.asarray(samples, dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return (None, None)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(arr, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def stable_seed(*parts: object) -> int:
    """A 63-bit seed derived from ``parts`` (stable across runs, platforms and processes)."""
    blob = "\x1f".join(repr(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


def bootstrap_percent(k: int | float, n: int, replicates: int, seed: int) -> np.ndarray | None:
    """Bootstrap replicates of a %female: resample the ``n`` labelled images with replacement.

    Resampling n binary labels with replacement and counting the women is a Binomial(n, k/n)
    draw, so this draws that directly (exactly the same distribution, much faster). Returns
    an array of ``replicates`` percentages (0-100), or None when ``n = 0``.
    """
    if n <= 0:
        return None
    p = min(1.0, max(0.0, float(k) / n))
    rng = np.random.default_rng(seed)
    return 100.0 * rng.binomial(n, p, size=replicates) / n


def allocate(available: dict[str, int], n: int) -> dict[str, int]:
    """Equal shares of ``n`` over strata, capped by what each has; leftovers re-shared."""
    take = dict.fromkeys(available, 0)
    left = min(n, sum(available.values()))
    while left > 0:
        open_ = sorted(s for s in available if take[s] < available[s])
        share, extra = divmod(left, len(open_))
        for i, stratum in enumerate(open_):
            want = share + (1 if i < extra else 0)
            got = min(want, available[stratum] - take[stratum])
            take[stratum] += got
            left -= got
    return take
