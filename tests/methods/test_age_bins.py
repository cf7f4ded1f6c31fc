"""Perceived age from 81 class probabilities: expected age, BLS-aligned bins, minors."""

from __future__ import annotations

import numpy as np
import pytest

from corpus_audit.methods.age_bins import (
    AGE_BINS,
    GROUP_BINS,
    MINOR_BIN,
    bin_probabilities,
    estimate,
    expected_age,
)


def _one_hot(year: int) -> np.ndarray:
    p = np.zeros(81)
    p[year] = 1.0
    return p


@pytest.mark.parametrize(
    ("year", "bin_name", "group"),
    [
        (0, "under_16", None),
        (15, "under_16", None),
        (16, "16_24", "under_35"),
        (24, "16_24", "under_35"),
        (25, "25_34", "under_35"),
        (35, "35_44", "35_54"),
        (54, "45_54", "35_54"),
        (55, "55_64", "55_plus"),
        (64, "55_64", "55_plus"),
        (65, "65_plus", "55_plus"),
        (80, "65_plus", "55_plus"),
    ],
)
def test_bin_edges_follow_the_bls_bands(year, bin_name, group):
    e = estimate(_one_hot(year))
    assert e.age_bin == bin_name and e.age_group == group
    assert e.minor == (bin_name == "under_16")
    assert e.expected_age == pytest.approx(0.25 if year == 0 else year)


def test_every_adult_bin_lies_in_one_group_in_bin_order():
    spanned = [b for bins in GROUP_BINS.values() for b in bins]
    assert spanned == [b for b in AGE_BINS if b != MINOR_BIN]


def test_minor_flag_follows_the_binned_argmax_not_the_mean():
    # 45 % at age 10 and 55 % spread evenly over 16..80 (65 years): under_16 holds the largest
    # bin mass (0.45 vs at most 16/65 x 0.55 = 0.135), so the face is a minor although its
    # expected age is ~37 years
    p = np.zeros(81)
    p[10] = 0.45
    p[16:] = 0.55 / 65
    e = estimate(p)
    assert e.minor and e.age_bin == "under_16" and e.age_group is None
    assert e.expected_age == pytest.approx(0.45 * 10 + 0.55 * np.mean(np.arange(16, 81)))
    assert e.expected_age > 30
    # the same mass moved to age 20: an adult in 16_24
    q = np.roll(p, 10)
    q[:16], q[20] = 0.0, 0.0
    q[20] = 1 - q.sum()
    f = estimate(q)
    assert not f.minor and f.age_bin == "16_24" and f.age_group == "under_35"


def test_bin_probabilities_sum_the_classes_in_order():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(81))
    bins = bin_probabilities(p)
    assert len(bins) == len(AGE_BINS) == 7
    assert bins.sum() == pytest.approx(1.0)
    assert bins[0] == pytest.approx(p[:16].sum()) and bins[1] == pytest.approx(p[16:25].sum())
    assert bins[-1] == pytest.approx(p[65:].sum())
    assert expected_age(p) == pytest.approx(float(np.dot(p, [0.25, *range(1, 81)])))


@pytest.mark.parametrize(
    "bad",
    [np.ones(80) / 80, np.full(81, np.nan), np.r_[-0.1, np.full(80, 1.1 / 80)], np.ones(81)],
)
def test_bad_probability_vectors_are_refused(bad):
    with pytest.raises(ValueError):
        estimate(bad)
