"""Stereotype Score, single vs paired, PST-Both/Any, bootstrap intervals and the labour
statistics, against values computed by hand in this file."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from corpus_audit.methods.pst.score import (
    BOTH_ANY_COLUMNS,
    GAP_COLUMNS,
    LABOR_COLUMNS,
    SCORE_COLUMNS,
    Bootstrap,
    bootstrap_ss,
    labor_comparison,
    labor_correlation,
    pst_both_any,
    score_summary,
    single_vs_paired,
    stereo,
    stereotype_score,
    unit_totals,
)
from corpus_audit.report.pst_figures import labor_scatter

STEREOTYPE = {"carpenter": "male", "editor": "female", "manager": "male", "intern": "female"}


def people(rows: list[tuple]) -> pd.DataFrame:
    """Rows ``(image_id, kind, side, role, perceived)`` as person rows."""
    frame = pd.DataFrame(rows, columns=["image_id", "kind", "side", "role", "perceived"])
    frame["variant"] = "plain"
    frame["stereotype"] = frame["role"].map(STEREOTYPE)
    frame["occupation"] = None
    return frame


# Four paired images (editor / carpenter in both orders) and five single images.
#   p1: editor F (+1), carpenter M (+1)      both follow
#   p2: carpenter F (-1), editor F (+1)      one follows
#   p3: editor M (-1), carpenter ambiguous    left out of Both/Any
#   p4: carpenter M (+1), editor M (-1)      one follows
#   singles: carpenter M (+1), carpenter F (-1), editor F (+1), editor F (+1), editor ambiguous
SMALL = people(
    [
        ("p1", "paired", "left", "editor", "female"),
        ("p1", "paired", "right", "carpenter", "male"),
        ("p2", "paired", "left", "carpenter", "female"),
        ("p2", "paired", "right", "editor", "female"),
        ("p3", "paired", "left", "editor", "male"),
        ("p3", "paired", "right", "carpenter", "ambiguous"),
        ("p4", "paired", "left", "carpenter", "male"),
        ("p4", "paired", "right", "editor", "male"),
        ("s1", "single", "single", "carpenter", "male"),
        ("s2", "single", "single", "carpenter", "female"),
        ("s3", "single", "single", "editor", "female"),
        ("s4", "single", "single", "editor", "female"),
        ("s5", "single", "single", "editor", "ambiguous"),
    ]
)


def test_stereo_values():
    values = stereo(SMALL)
    assert math.isnan(values[5]) and math.isnan(values[12])
    assert values[[0, 1, 2, 3, 4, 6, 7]].tolist() == [1, 1, -1, 1, -1, 1, -1]
    caption_like = SMALL.assign(perceived=["both", "none"] + ["male"] * 11)
    assert np.isnan(stereo(caption_like)[:2]).all()
    with pytest.raises(ValueError, match="stereotype must be male or female"):
        stereo(SMALL.assign(stereotype="neutral"))
    with pytest.raises(ValueError, match="lack column"):
        stereo(SMALL.drop(columns=["perceived"]))


def test_scores_by_hand():
    summary = score_summary(SMALL, bootstrap=Bootstrap(200, 1))
    assert list(summary.columns) == list(SCORE_COLUMNS)
    got = {(r.kind, r.scope, r.group): r for r in summary.itertuples(index=False)}
    paired = got[("paired", "overall", "all")]
    # 7 classified persons, Stereo sum 1+1-1+1-1+1-1 = 1
    assert (paired.n_units, paired.n_people, paired.n_classified, paired.n_stereotyped) == (
        4,
        8,
        7,
        4,
    )
    assert paired.ss == pytest.approx(100 / 7)
    assert got[("paired", "stereotype", "male")].ss == pytest.approx(100 * 1 / 3)  # +1 -1 +1
    assert got[("paired", "stereotype", "female")].ss == pytest.approx(0.0)  # +1 +1 -1 -1
    assert got[("paired", "role", "carpenter")].ss == pytest.approx(100 / 3)
    assert got[("single", "overall", "all")].ss == pytest.approx(50.0)  # +1 -1 +1 +1
    assert got[("single", "role", "editor")].n_classified == 2
    assert got[("single", "role", "editor")].ss == pytest.approx(100.0)
    for row in summary.itertuples(index=False):
        assert row.ci_low <= row.ss + 1e-9 and row.ss - 1e-9 <= row.ci_high


def test_single_vs_paired_gap_by_hand():
    gap = single_vs_paired(SMALL, bootstrap=Bootstrap(300, 2))
    assert list(gap.columns) == list(GAP_COLUMNS)
    got = {(r.scope, r.group): r for r in gap.itertuples(index=False)}
    overall = got[("overall", "all")]
    assert (overall.kind, overall.n_single, overall.n_paired) == ("paired", 4, 7)
    assert overall.gap == pytest.approx(100 / 7 - 50)
    assert got[("role", "carpenter")].gap == pytest.approx(100 / 3 - 0)
    assert got[("role", "editor")].gap == pytest.approx(0 - 100)
    assert got[("stereotype", "female")].gap == pytest.approx(-100)
    assert overall.ci_low < overall.gap < overall.ci_high


def test_pst_both_and_any_by_hand():
    out = pst_both_any(SMALL, bootstrap=Bootstrap(500, 3))
    assert list(out.columns) == list(BOTH_ANY_COLUMNS)
    row = out.iloc[0]
    # p3 has an ambiguous person: left out; of p1, p2, p4 only p1 has both, all three have one
    assert (row.kind, row.n_units, row.n_both, row.n_any) == ("paired", 3, 1, 3)
    assert row.pst_both == pytest.approx(100 / 3) and row.pst_any == pytest.approx(100.0)
    assert row.any_ci_low == row.any_ci_high == 100.0  # every resample has all three


# -- intervals -------------------------------------------------------------------------------
def test_bootstrap_resamples_images_exact_distribution():
    """Two images: one with both persons following (+2 of 2), one with both against (-2 of
    2). Drawing 2 images with replacement gives SS = 100 (1/4), 0 (1/2), -100 (1/4); had the
    persons been resampled, +-50 would occur too."""
    sums, counts = np.array([2.0, -2.0]), np.array([2.0, 2.0])
    reps = bootstrap_ss(sums, counts, 40_000, seed=7)
    values, freq = np.unique(reps, return_counts=True)
    assert values.tolist() == [-100.0, 0.0, 100.0]
    np.testing.assert_allclose(freq / len(reps), [0.25, 0.5, 0.25], atol=0.01)
    assert np.array_equal(reps, bootstrap_ss(sums, counts, 40_000, seed=7))  # seeded
    assert not np.array_equal(reps, bootstrap_ss(sums, counts, 40_000, seed=8))
    assert bootstrap_ss(np.zeros(0), np.zeros(0), 10, 0).size == 0


def _images(n_follow: int, n_against: int, persons: int, kind: str = "paired") -> pd.DataFrame:
    rows = []
    for i in range(n_follow + n_against):
        perceived = "male" if i < n_follow else "female"  # carpenter: male follows
        for k in range(persons):
            rows.append((f"{kind}{i}", kind, f"s{k}", "carpenter", perceived))
    return people(rows)


def test_interval_width_matches_the_normal_approximation():
    """400 one-person images, 300 following: SS = 50, SE = 200 sqrt(p(1-p)/n) with p = 0.75,
    so the 95 % interval is 50 +- 1.96 x 4.330 = [41.51, 58.49]."""
    frame = _images(300, 100, persons=1)
    row = stereotype_score(frame, bootstrap=Bootstrap(4000, 11)).iloc[0]
    se = 200 * math.sqrt(0.75 * 0.25 / 400)
    assert row.ss == pytest.approx(50.0)
    assert row.ci_low == pytest.approx(50 - 1.96 * se, abs=1.2)
    assert row.ci_high == pytest.approx(50 + 1.96 * se, abs=1.2)


def test_persons_of_one_image_are_resampled_together():
    """200 images whose two persons agree (150 following): 400 persons, but only 200
    independent images, so the interval is sqrt(2) wider than for 400 one-person images:
    95 % half-width 1.96 x 200 sqrt(0.1875 / 200) = 12.0 (not 8.49)."""
    frame = _images(150, 50, persons=2)
    row = stereotype_score(frame, bootstrap=Bootstrap(4000, 12)).iloc[0]
    half = 1.96 * 200 * math.sqrt(0.1875 / 200)
    assert row.n_classified == 400 and row.n_units == 200
    assert (row.ci_high - row.ci_low) / 2 == pytest.approx(half, abs=1.2)


def test_gap_interval_adds_the_two_variances():
    """Singles: 400 images, 300 following (SS 50, SE 4.330); paired: 400 one-person rows in
    400 images, 200 following (SS 0, SE 5.0). Gap -50, SE sqrt(4.33^2 + 5^2) = 6.614."""
    frame = pd.concat([_images(300, 100, 1, "single"), _images(200, 200, 1, "paired")])
    row = single_vs_paired(frame, bootstrap=Bootstrap(4000, 13)).iloc[0]
    se = math.sqrt((200 * math.sqrt(0.1875 / 400)) ** 2 + 5.0**2)
    assert row.gap == pytest.approx(-50.0)
    assert row.ci_low == pytest.approx(-50 - 1.96 * se, abs=1.5)
    assert row.ci_high == pytest.approx(-50 + 1.96 * se, abs=1.5)


def test_both_interval_is_binomial():
    """100 two-person images, 30 with both persons following: PST-Both 30 +- 1.96 x
    100 sqrt(0.21 / 100) = 30 +- 8.98."""
    rows = []
    for i in range(100):
        left = "male" if i < 30 or i >= 60 else "female"  # carpenter (male) left
        right = "female" if i < 30 else "male"  # editor (female) right
        rows += [(f"i{i}", "paired", "left", "carpenter", left)]
        rows += [(f"i{i}", "paired", "right", "editor", right)]
    row = pst_both_any(people(rows), bootstrap=Bootstrap(4000, 14)).iloc[0]
    assert (row.n_both, row.n_any) == (30, 70)
    assert row.both_ci_low == pytest.approx(30 - 8.98, abs=1.5)
    assert row.both_ci_high == pytest.approx(30 + 8.98, abs=1.5)


def test_a_sets_interval_does_not_depend_on_the_other_sets():
    alone = stereotype_score(
        SMALL[SMALL["role"] == "editor"], ("role",), bootstrap=Bootstrap(seed=5)
    )
    together = stereotype_score(SMALL, ("role",), bootstrap=Bootstrap(seed=5))
    editor = together[together["role"] == "editor"].iloc[0]
    # the seed derives from the set's key, not from its position among the groups
    assert (editor.ci_low, editor.ci_high) == (alone.iloc[0].ci_low, alone.iloc[0].ci_high)


def test_empty_and_unclassified_sets():
    none = SMALL.assign(perceived="ambiguous")
    row = stereotype_score(none).iloc[0]
    assert row.n_classified == 0 and row.ss is None and row.ci_low is None
    assert unit_totals(none)[0].size == 0
    assert pst_both_any(none).iloc[0].n_units == 0
    assert score_summary(SMALL.iloc[0:0]).empty


# -- labour statistics -------------------------------------------------------------------------
def test_labor_comparison_and_pearson_by_hand():
    counts = {"carpenter": (1, 9), "manager": (4, 6), "editor": (6, 4), "intern": (9, 1)}
    rows = []
    for role, (n_f, n_m) in counts.items():
        rows += [(f"{role}{i}", "single", "single", role, "female") for i in range(n_f)]
        rows += [(f"{role}m{i}", "single", "single", role, "male") for i in range(n_m)]
    rows.append(("x", "single", "single", "intern", "ambiguous"))
    labor = {"carpenter": 5.0, "manager": 30.0, "editor": 70.0, "intern": None}
    table = labor_comparison(people(rows), labor)
    assert list(table.columns) == list(LABOR_COLUMNS)
    got = table.set_index("role")
    assert got.loc["carpenter", "percent_female"] == pytest.approx(10.0)
    assert got.loc["intern", "percent_female"] == pytest.approx(90.0)
    assert got.loc["editor", "difference"] == pytest.approx(60.0 - 70.0)
    assert pd.isna(got.loc["intern", "labor_percent_female"])
    # Wilson 95 % for 1 of 10 by its formula
    z = 1.959964
    centre = (0.1 + z * z / 20) / (1 + z * z / 10)
    half = z * math.sqrt(0.1 * 0.9 / 10 + z * z / 400) / (1 + z * z / 10)
    assert got.loc["carpenter", "ci_low"] == pytest.approx(100 * (centre - half), abs=1e-4)
    # Pearson over the three roles with a statistic: x = 5, 30, 70; y = 10, 40, 60
    x, y = np.array([5.0, 30.0, 70.0]), np.array([10.0, 40.0, 60.0])
    r = ((x - x.mean()) * (y - y.mean())).sum() / math.sqrt(
        ((x - x.mean()) ** 2).sum() * ((y - y.mean()) ** 2).sum()
    )
    t = r * math.sqrt(1 / (1 - r * r))
    p = 2 * scipy_stats.t.sf(abs(t), df=1)
    corr = labor_correlation(table).iloc[0]
    assert (corr.kind, corr.n_roles) == ("single", 3)
    assert corr.r == pytest.approx(r) and corr.p_value == pytest.approx(p)


def test_labor_scatter_draws_one_point_per_role_with_a_statistic():
    rows = pd.DataFrame(
        [
            ("single", "plain", "carpenter", "male", 1, 9, 10.0, 2.0, 40.0, 5.0, 5.0),
            ("single", "plain", "editor", "female", 6, 4, 60.0, 31.0, 83.0, 70.0, -10.0),
            ("single", "plain", "intern", "female", 9, 1, 90.0, 60.0, 98.0, None, None),
        ],
        columns=list(LABOR_COLUMNS),
    )
    fig = labor_scatter(rows, 0.5, 0.2)
    ax = fig.axes[0]
    points = sorted(
        tuple(map(float, xy))
        for line in ax.get_lines()
        for xy in line.get_xydata()
        if line.get_marker() == "o"
    )
    assert points == [(5.0, 10.0), (70.0, 60.0)]
    assert "r = 0.500" in ax.get_title()
    from corpus_audit.report.figures import save

    rendered = save(fig, "labor", "t", "c")
    assert rendered.png.startswith(b"\x89PNG")
