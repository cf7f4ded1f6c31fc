"""Amplification analysis: every formula on hand-made numbers, and the `analyze` stage on real
DuckDB tables (captions from ../shared/data, labels inserted as the label stage would)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from corpus_audit.core.errors import CorpusAuditError, StageOrderError
from corpus_audit.core.metrics import METRICS, metric
from corpus_audit.methods.amplification import (
    EXCLUDE_NO_GENERATED,
    EXCLUDE_NO_TRAINING,
    EXCLUDE_SWITCH,
    Rate,
    amplification,
    direction_switch,
    make_pair,
    paper_layout,
    side,
    summarize,
)
from corpus_audit.methods.correlation import indicator_correlation
from corpus_audit.methods.stats import (
    bootstrap_percent,
    pearson,
    percentile_interval,
    ttest_zero,
    wilson_interval,
)
from corpus_audit.stages.analyze import analyze
from corpus_audit.tables.read import table3, table3_frame


# -- stats ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("k", "n"), [(0, 10), (5, 10), (10, 10), (3, 7), (1, 1), (412, 1000)])
def test_wilson_matches_scipy(k: int, n: int):
    lo, hi = wilson_interval(k, n)
    ref = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo == pytest.approx(100 * ref.low, abs=1e-9)
    assert hi == pytest.approx(100 * ref.high, abs=1e-9)
    assert 0.0 <= lo <= 100.0 * k / n <= hi <= 100.0


def test_wilson_by_hand_and_edge_cases():
    # 5 of 10 at 95 %: centre 0.5, half-width 1.96*sqrt(.025+.0096)/1.3842 = 0.2634
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == (pytest.approx(23.66, abs=0.01), pytest.approx(76.34, abs=0.01))
    assert wilson_interval(0, 0) == (None, None)  # no labelled image: no interval
    wide = wilson_interval(5, 10, confidence=0.99)
    assert wide[0] < lo and wide[1] > hi
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_ttest_zero_by_hand():
    t, p = ttest_zero([1.0, 2.0, 3.0, 4.0])
    # mean 2.5, sd sqrt(5/3), se sd/2 -> t = 2.5 / 0.6455 = 3.873
    assert t == pytest.approx(2.5 / (math.sqrt(5 / 3) / 2))
    assert p == pytest.approx(2 * sps.t.sf(t, df=3))
    assert ttest_zero([10.0, 10.0, 10.0]) == (None, None)  # no spread: t undefined
    assert ttest_zero([3.0]) == (None, None)
    assert ttest_zero([]) == (None, None)


def test_pearson_by_hand():
    x, y = [1, 2, 3, 4, 5], [2, 4, 5, 4, 5]
    r, p, n = pearson(x, y)
    xm, ym = np.mean(x), np.mean(y)
    by_hand = sum((a - xm) * (b - ym) for a, b in zip(x, y, strict=True)) / math.sqrt(
        sum((a - xm) ** 2 for a in x) * sum((b - ym) ** 2 for b in y)
    )
    assert r == pytest.approx(by_hand) and r == pytest.approx(0.7746, abs=1e-4)
    assert n == 5 and 0 < p < 1
    assert pearson([1, 2, None, 4], [1, None, 3, 4])[2] == 2  # pairs with a gap are dropped
    assert pearson([1, 2], [3, 4])[:2] == (None, None)
    assert pearson([1, 1, 1], [1, 2, 3])[:2] == (None, None)


def test_percentile_interval_ignores_nan():
    lo, hi = percentile_interval(np.array([np.nan, *range(101)]), 0.9)
    assert (lo, hi) == (pytest.approx(5.0), pytest.approx(95.0))
    assert percentile_interval(np.array([np.nan])) == (None, None)


def test_bootstrap_percent_equals_resampling_images():
    """Binomial draws have the distribution of resampling the n image labels."""
    draws = bootstrap_percent(3, 10, 20000, seed=1)
    labels = np.array([1] * 3 + [0] * 7)
    rng = np.random.default_rng(2)
    naive = 100 * labels[rng.integers(0, 10, size=(20000, 10))].mean(axis=1)
    assert draws.mean() == pytest.approx(naive.mean(), abs=0.5)
    assert draws.std() == pytest.approx(naive.std(), abs=0.5)
    assert np.percentile(draws, [2.5, 97.5]).tolist() == np.percentile(naive, [2.5, 97.5]).tolist()
    assert bootstrap_percent(0, 0, 10, seed=1) is None
    assert np.array_equal(bootstrap_percent(3, 10, 50, 7), bootstrap_percent(3, 10, 50, 7))


# -- amplification ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("t", "g", "a"),
    [
        (30, 20, 10),  # further below parity: amplification
        (30, 40, -10),  # closer: de-amplification
        (70, 90, 20),
        (70, 55, -15),
        (50, 50, 0),
        (50, 80, 30),  # training at parity, model skewed: amplification
        (80, 50, -30),  # model at parity: de-amplification
        (0, 100, 0),
    ],
)
def test_amplification_formula(t: float, g: float, a: float):
    assert amplification(t, g) == pytest.approx(a)


def test_direction_switch_and_ties_at_50():
    assert side(50.0) == 0 and side(50.0 + 1e-12) == 0 and side(49.9) == -1 and side(50.1) == 1
    for rule in ("upper", "neither"):
        assert direction_switch(40, 60, rule) and direction_switch(60, 40, rule)
        assert direction_switch(49.9, 50.1, rule)
        assert not direction_switch(50, 60, rule)  # 50 and above: same side under both rules
        assert not direction_switch(60, 50, rule)
        assert not direction_switch(50, 50, rule)
        assert not direction_switch(30, 10, rule)
    # The paper's rule (default): 50 counts with the upper side, so 50 vs below 50 switches.
    assert direction_switch(44.8, 50.0) and direction_switch(50.0, 44.8)
    assert direction_switch(44.8, 50.0 - 1e-12)  # within 1e-9 of 50 is exactly 50
    # Strict rule: exactly 50 is on no side and never switches.
    assert not direction_switch(44.8, 50.0, "neither")
    assert not direction_switch(50.0, 44.8, "neither")
    with pytest.raises(ValueError, match="parity_side 'lower'"):
        direction_switch(40, 60, "lower")


def test_make_pair_at_exactly_50_follows_the_rule():
    t, g = Rate("t", 44.8, 500), Rate("g", 50.0, 500)
    paper = make_pair("athlete", 3, t, g)
    assert paper.excluded and paper.exclude_reason == "direction_switch"
    assert paper.amplification == pytest.approx(0.0 - 5.2)  # |50-50| - |44.8-50|, still shown
    strict = make_pair("athlete", 3, t, g, "neither")
    assert not strict.excluded and strict.amplification == pytest.approx(-5.2)


def test_make_pair_reasons():
    t, g = Rate("t", 40.0, 10), Rate("g", 60.0, 10)
    switched = make_pair("nurse", 1, t, g)
    assert switched.excluded and switched.exclude_reason == EXCLUDE_SWITCH
    assert switched.amplification == pytest.approx(0.0)  # still computed, for the listing
    tie = make_pair("nurse", 1, Rate("t", 50.0, 10), g)
    assert not tie.excluded and tie.amplification == pytest.approx(10.0)
    no_t = make_pair("nurse", 1, Rate("t", None, 0), g)
    assert no_t.excluded and no_t.exclude_reason == EXCLUDE_NO_TRAINING
    assert no_t.amplification is None
    no_g = make_pair("nurse", 1, t, Rate("g", None, 0))
    assert no_g.exclude_reason == EXCLUDE_NO_GENERATED


def _pairs(spec):
    """spec: {prompt: [(occupation, T, G), ...]} with the keyword T shared across prompts."""
    return [
        make_pair(
            occ,
            prompt,
            Rate(("t", occ), t, 100 if t is not None else 0),
            Rate(("g", occ, prompt), g, 100 if g is not None else 0),
        )
        for prompt, rows in spec.items()
        for occ, t, g in rows
    ]


def test_summarize_per_prompt_and_overall_mean_of_means():
    pairs = _pairs(
        {
            1: [("nurse", 80, 90), ("engineer", 20, 10), ("teacher", 50, 60), ("pilot", 30, 60)],
            2: [("nurse", 80, 70), ("engineer", 20, 30), ("teacher", 50, 50), ("pilot", 30, 20)],
        }
    )
    per_prompt, overall = summarize(pairs, replicates=0)
    p1, p2 = per_prompt
    assert (p1.n_included, p1.n_excluded) == (3, 1)  # pilot switches sides
    assert p1.mean == pytest.approx(10.0)
    assert [p.occupation for p in p1.excluded] == ["pilot"]
    assert (p1.t_stat, p1.p_value) == (None, None)  # all three A = 10: no spread
    assert p2.mean == pytest.approx((-10 - 10 + 0 + 10) / 4)
    ref = sps.ttest_1samp([-10, -10, 0, 10], 0.0)
    assert p2.t_stat == pytest.approx(ref.statistic) and p2.p_value == pytest.approx(ref.pvalue)
    # Overall = mean of the per-prompt means (3.75), not the mean of all 7 included pairs.
    assert overall.mean == pytest.approx(3.75) and overall.n_prompts == 2
    assert overall.ci_low is None  # bootstrap off


def test_prompt_with_every_occupation_excluded():
    pairs = _pairs(
        {
            1: [("nurse", 80, 30), ("engineer", 20, 70)],  # both switch
            2: [("nurse", 80, 85), ("engineer", 20, 10)],
        }
    )
    (p1, p2), overall = summarize(pairs, replicates=200, seed=3)
    assert p1.n_included == 0 and p1.n_excluded == 2
    assert p1.mean is None and p1.ci_low is None and p1.t_stat is None
    assert p2.mean == pytest.approx((5 + 10) / 2)
    assert overall.n_prompts == 1 and overall.mean == pytest.approx(7.5)
    assert overall.ci_low is not None and overall.ci_low <= 7.5 <= overall.ci_high


def test_occupation_with_zero_labelled_images_is_excluded_not_averaged():
    pairs = [
        make_pair("nurse", 1, Rate("t1", 80.0, 20), Rate("g1", 90.0, 20)),
        make_pair("janitor", 1, Rate("t2", 10.0, 20), Rate("g2", None, 0)),
        make_pair("pilot", 1, Rate("t3", None, 0), Rate("g3", 10.0, 20)),
    ]
    (s,), _ = summarize(pairs, replicates=100)
    assert s.n_included == 1 and s.n_excluded == 2 and s.mean == pytest.approx(10.0)
    assert {p.exclude_reason for p in s.excluded} == {EXCLUDE_NO_GENERATED, EXCLUDE_NO_TRAINING}


def test_bootstrap_intervals():
    big = [
        make_pair("a", 1, Rate("ta", 20.0, 10**6), Rate("ga", 10.0, 10**6)),
        make_pair("b", 1, Rate("tb", 70.0, 10**6), Rate("gb", 80.0, 10**6)),
    ]
    (s,), overall = summarize(big, replicates=300)
    assert s.mean == pytest.approx(10.0)
    assert s.ci_low == pytest.approx(10.0, abs=0.2) and s.ci_high == pytest.approx(10.0, abs=0.2)
    small = [
        make_pair("a", 1, Rate("ta", 20.0, 10), Rate("ga", 10.0, 10)),
        make_pair("b", 1, Rate("tb", 70.0, 10), Rate("gb", 80.0, 10)),
    ]
    (s2,), o2 = summarize(small, replicates=500, seed=1)
    assert s2.ci_high - s2.ci_low > 10 * (s.ci_high - s.ci_low)
    again = summarize(small, replicates=500, seed=1)[0][0]
    assert (again.ci_low, again.ci_high) == (s2.ci_low, s2.ci_high)  # reproducible
    other = summarize(small, replicates=500, seed=2)[0][0]
    assert (other.ci_low, other.ci_high) != (s2.ci_low, s2.ci_high)
    # Without n (plain tables without counts) there is no interval, but still a mean.
    no_n = [make_pair("a", 1, Rate("t", 20.0), Rate("g", 10.0))]
    (s3,), o3 = summarize(no_n, replicates=100)
    assert s3.mean == pytest.approx(10.0) and s3.ci_low is None and o3.ci_low is None


def test_bootstrap_shares_training_draws_across_prompts():
    """T of the keyword subset is one set for all prompts: one draw per replicate."""
    t = Rate(("t", "nurse"), 80.0, 5)
    pairs = [make_pair("nurse", p, t, Rate(("g", p), 80.0, 10**7)) for p in (1, 2)]
    (s1, s2), overall = summarize(pairs, replicates=400, seed=9)
    # G is nearly fixed, so both prompts' replicates are the same function of T's draws and
    # the average's interval is as wide as one prompt's (independent draws would shrink it).
    assert (s1.ci_low, s1.ci_high) == pytest.approx((s2.ci_low, s2.ci_high), abs=0.01)
    assert overall.ci_high - overall.ci_low == pytest.approx(s1.ci_high - s1.ci_low, abs=0.01)


def test_paper_layout_order_and_cells():
    rows = [
        {
            "model_id": "m",
            "strategy": s,
            "template_id": t,
            "mean_amplification": float(i),
            "ci_low": None,
            "ci_high": None,
            "p_value": None,
            "n_included": 3,
            "n_excluded": 0,
        }
        for i, (s, t) in enumerate(
            [("nn", 1), ("keyword", 1), ("keyword", None), ("custom", 2), ("no_indicators", 1)]
        )
    ]
    layout = paper_layout(rows, templates=(1, 2))
    assert [r["strategy"] for r in layout["m"]] == ["keyword", "no_indicators", "nn", "custom"]
    keyword = layout["m"][0]
    assert keyword["#1"]["mean"] == 1.0 and keyword["average"]["mean"] == 2.0
    assert keyword["#2"] is None


def test_indicator_correlation():
    rows = [
        {"training_pf": 10.0, "pct_female_indicator": 60.0},
        {"training_pf": 50.0, "pct_female_indicator": 30.0},
        {"training_pf": 90.0, "pct_female_indicator": 5.0},
        {"training_pf": None, "pct_female_indicator": 99.0},
    ]
    out = indicator_correlation(rows)
    assert out["n_occupations"] == 3
    assert out["r"] == pytest.approx(np.corrcoef([10, 50, 90], [60, 30, 5])[0, 1])
    assert indicator_correlation(rows[:2])["r"] is None


def test_metrics_describe_themselves():
    for m in METRICS.values():
        assert m.name and m.label and m.formula and m.unit is not None
        assert m.range[0] < m.range[1]
        assert m.direction_text
    assert metric("amplification").range_text == "[-50, 50]"
    with pytest.raises(KeyError, match="known"):
        metric("nope")


# -- the stage, on real tables ------------------------------------------------------------------
CLASSIFIER = "clip:ViT-L-14/openai"


def _caption_rows(laion_path, n):
    import duckdb

    con = duckdb.connect()
    rows = con.execute(
        "SELECT file_row_number, TEXT FROM read_parquet(?, file_row_number=true) "
        "WHERE regexp_matches(lower(TEXT), '\\bteachers?\\b') ORDER BY 1 LIMIT ?",
        [str(laion_path), n],
    ).fetchall()
    con.close()
    return rows


@pytest.fixture
def small_study(make_study, laion_path):
    """Two occupations with hand-set labels (real LAION captions for 'teacher')."""
    study = make_study([laion_path], analysis={"bootstrap": 200})
    con = study.con
    caps = _caption_rows(laion_path, 8)
    assert len(caps) == 8
    for i, (row, text) in enumerate(caps):
        occ = "teacher" if i < 4 else "nurse"  # the nurse rows reuse teacher captions' text
        con.execute(
            "INSERT INTO captions (caption_id, text, url, source_file, row_in_file) "
            "VALUES (?, ?, NULL, ?, ?)",
            [row, text, str(laion_path), row],
        )
        con.execute(
            "INSERT INTO mentions (caption_id, occupation, matched_form) VALUES (?, ?, ?)",
            [row, occ, occ],
        )
        con.execute(
            "INSERT INTO indicators (caption_id, label, triggers) VALUES (?, ?, ?)",
            [row, "female" if i in (0, 4) else "none", "she" if i in (0, 4) else ""],
        )
        con.execute(
            "INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank) "
            "VALUES ('keyword', ?, NULL, ?, ?)",
            [occ, row, i % 4 + 1],
        )
    for t in (1, 2):
        for occ in ("teacher", "nurse"):
            con.execute(
                "INSERT INTO prompts (prompt_id, prompt_set, template_id, occupation, text) "
                "VALUES (?, 'paper', ?, ?, ?)",
                [f"paper:{t}:{occ}", t, occ, f"p{t} {occ}"],
            )

    def image(
        image_id, source, label, *, caption_id=None, prompt_id=None, occ=None, kept=True, p=None
    ):
        con.execute(
            "INSERT INTO images (image_id, source, caption_id, prompt_id, occupation, path, "
            "model_id) VALUES (?, ?, ?, ?, ?, 'x.png', ?)",
            [image_id, source, caption_id, prompt_id, occ, "m1" if source == "generated" else None],
        )
        con.execute(
            "INSERT INTO face_filter (image_id, detector, n_faces, kept, reason) "
            "VALUES (?, 'mediapipe', 1, ?, ?)",
            [image_id, kept, None if kept else "no_face"],
        )
        if label:
            prob = p if p is not None else {"female": 0.97, "male": 0.02, "ambiguous": 0.6}[label]
            con.execute(
                "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
                "VALUES (?, ?, ?, ?, 0.9)",
                [image_id, CLASSIFIER, prob, label],
            )

    # Training: teacher 3 female / 1 male = 75 %; nurse 2 female, 1 male, 1 ambiguous = 66.7 %.
    for i, (row, _) in enumerate(caps):
        label = ["female", "female", "female", "male", "female", "female", "male", "ambiguous"][i]
        image(f"train:{row}", "training", label, caption_id=row)
    # Generated (model m1): teacher #1: 9/10 female = 90 % -> A = 40 - 25 = 15
    #                       teacher #2: 5/10 = 50 % (tie)  -> A = 0 - 25 = -25
    #                       nurse #1: 2/10 = 20 % -> switch (T 66.7 > 50 > G), excluded
    #                       nurse #2: every image dropped by the face filter -> no labels
    for occ, t, n_female in (("teacher", 1, 9), ("teacher", 2, 5), ("nurse", 1, 2)):
        for s in range(10):
            image(
                f"gen:m1:paper:{t}:{occ}:{s}",
                "generated",
                "female" if s < n_female else "male",
                prompt_id=f"paper:{t}:{occ}",
                occ=occ,
            )
    for s in range(3):
        image(
            f"gen:m1:paper:2:nurse:{s}",
            "generated",
            "female",
            prompt_id="paper:2:nurse",
            occ="nurse",
            kept=False,
        )
    return study


def _rows(study, sql):
    cur = study.con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def test_analyze_on_hand_made_study(small_study):
    run = analyze(small_study, progress=False)
    assert not run.skipped
    pf = {
        (r["side"], r["occupation"], r["template_id"]): r
        for r in _rows(small_study, "SELECT * FROM percent_female")
    }
    teacher_t = pf[("training", "teacher", None)]
    assert (teacher_t["n_female"], teacher_t["n_male"], teacher_t["n_images"]) == (3, 1, 4)
    assert teacher_t["percent_female"] == pytest.approx(75.0)
    ref = sps.binomtest(3, 4).proportion_ci(method="wilson")
    assert teacher_t["ci_low"] == pytest.approx(100 * ref.low)
    nurse_t = pf[("training", "nurse", None)]
    assert (nurse_t["n_female"], nurse_t["n_male"], nurse_t["n_images"]) == (2, 1, 4)
    nurse_g2 = pf[("generated", "nurse", 2)]
    assert nurse_g2["n_images"] == 3 and nurse_g2["percent_female"] is None  # all dropped

    amp = {
        (r["occupation"], r["template_id"]): r
        for r in _rows(small_study, "SELECT * FROM amplification WHERE strategy = 'keyword'")
    }
    assert amp[("teacher", 1)]["amplification"] == pytest.approx(15.0)
    assert amp[("teacher", 2)]["amplification"] == pytest.approx(-25.0)
    assert not amp[("teacher", 2)]["excluded"]  # G exactly 50: kept
    assert amp[("nurse", 1)]["exclude_reason"] == "direction_switch"
    assert amp[("nurse", 2)]["exclude_reason"] == "no_generated_labels"
    assert amp[("teacher", 1)]["training_n"] == 4 and amp[("teacher", 1)]["generated_n"] == 10

    summ = {
        (r["strategy"], r["template_id"]): r
        for r in _rows(small_study, "SELECT * FROM amplification_summary")
    }
    assert summ[("keyword", 1)]["mean_amplification"] == pytest.approx(15.0)
    assert summ[("keyword", 1)]["n_excluded"] == 1
    assert summ[("keyword", None)]["mean_amplification"] == pytest.approx((15 - 25) / 2)
    assert summ[("keyword", None)]["n_prompts"] == 2
    lo, hi = summ[("keyword", 1)]["ci_low"], summ[("keyword", 1)]["ci_high"]
    assert lo is not None and lo < hi
    assert run.dropped == {
        "pair excluded: direction_switch": 1,
        "pair excluded: no_generated_labels": 1,
    }
    assert run.provenance["classifier"] == CLASSIFIER
    assert run.summary[0]["strategy"] == "keyword" and run.summary[0]["#1"].startswith("+15.0")

    layout = table3(small_study)
    assert list(layout) == ["m1"] and layout["m1"][0]["#2"]["mean"] == pytest.approx(-25.0)
    frame = table3_frame(small_study)
    assert frame.loc[("m1", "keyword"), "average"] == pytest.approx(-5.0)

    occ = {r["occupation"]: r for r in _rows(small_study, "SELECT * FROM occupation_indicators")}
    assert occ["teacher"]["n_captions"] == 4 and occ["teacher"]["pct_female"] == pytest.approx(25)
    assert occ["teacher"]["training_pf"] == pytest.approx(75.0)
    assert occ["teacher"]["pct_female_indicator"] == pytest.approx(25.0)  # 1 of 4 images
    assert occ["teacher"]["pct_marked_female_images"] == pytest.approx(100 / 3)
    assert occ["teacher"]["pct_marked_male_images"] == pytest.approx(0.0)


def test_analyze_rerun_skips_and_changes_recompute(small_study):
    first = analyze(small_study, progress=False)
    counts = {
        t: small_study.count(t)
        for t in ("percent_female", "amplification", "amplification_summary")
    }
    again = analyze(small_study, progress=False)
    assert again.skipped and again.summary == first.summary
    assert counts == {t: small_study.count(t) for t in counts}  # nothing written twice
    # A relabelled image changes the inputs: the analysis runs again, tables replaced.
    small_study.con.execute(
        "UPDATE labels SET label = 'female', p_female = 0.95 WHERE image_id = "
        "'gen:m1:paper:1:teacher:9'"
    )
    third = analyze(small_study, progress=False)
    assert not third.skipped
    assert counts == {t: small_study.count(t) for t in counts}
    a = small_study.con.execute(
        "SELECT amplification FROM amplification WHERE strategy = 'keyword' AND "
        "occupation = 'teacher' AND template_id = 1"
    ).fetchone()[0]
    assert a == pytest.approx(50 - 25)


def test_analyze_threshold_relabels_from_probabilities(small_study):
    from corpus_audit.core.config import write_config

    small_study.con.execute(
        "UPDATE labels SET p_female = 0.92 WHERE image_id = 'gen:m1:paper:1:teacher:0'"
    )
    before = analyze(small_study, progress=False)  # analysis.threshold = 0: stored labels
    assert not [m for m in before.messages if "analysis.threshold" in m]
    small_study.config.analysis.threshold = 0.95  # 0.92 is no longer a confident 'female'
    write_config(small_study.config)
    run = analyze(small_study, progress=False)
    stored = small_study.column("SELECT DISTINCT threshold FROM labels ORDER BY 1")
    made = ", ".join(f"{t:g}" for t in stored)
    note = [m for m in run.messages if m.startswith("analysis.threshold = 0.95 relabels")]
    assert note and f"(made at threshold {made}) from p_female" in note[0]
    assert "label.threshold does not change this analysis" in note[0]
    row = small_study.con.execute(
        "SELECT n_female, n_male FROM percent_female WHERE side = 'generated' AND "
        "occupation = 'teacher' AND template_id = 1"
    ).fetchone()
    assert row == (8, 1)


def test_face_filter_drop_wins_over_a_label(small_study):
    small_study.con.execute(
        "UPDATE face_filter SET kept = false, reason = 'many_faces' "
        "WHERE image_id LIKE 'gen:m1:paper:1:teacher:%' AND image_id < 'gen:m1:paper:1:teacher:5'"
    )
    analyze(small_study, progress=False)
    row = small_study.con.execute(
        "SELECT n_female, n_images FROM percent_female WHERE side = 'generated' AND "
        "occupation = 'teacher' AND template_id = 1"
    ).fetchone()
    assert row == (4, 10)


def test_several_classifiers_need_a_choice(small_study):
    small_study.con.execute(
        "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
        "SELECT image_id, 'other', p_female, label, threshold FROM labels"
    )
    small_study.config.label.classifier = "nonexistent"
    with pytest.raises(CorpusAuditError, match="several classifiers"):
        analyze(small_study, progress=False)
    assert small_study.count("amplification") == 0  # nothing half-written
    small_study.config.analysis.classifier = "other"
    run = analyze(small_study, progress=False)
    assert run.provenance["classifier"] == "other"
    small_study.config.analysis.classifier = "missing"
    with pytest.raises(CorpusAuditError, match="analysis.classifier 'missing' has no labels"):
        analyze(small_study, progress=False)


def test_failed_write_keeps_previous_tables(small_study, monkeypatch):
    import corpus_audit.stages.analyze as stage

    analyze(small_study, progress=False)
    before = _rows(small_study, "SELECT * FROM amplification ORDER BY ALL")
    small_study.con.execute("UPDATE labels SET label = 'male' WHERE label = 'female'")
    real = stage.insert_rows

    def failing(con, table, rows):
        if table == "amplification_summary":
            raise RuntimeError("disk full")
        return real(con, table, rows)

    monkeypatch.setattr(stage, "insert_rows", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        analyze(small_study, progress=False)
    assert _rows(small_study, "SELECT * FROM amplification ORDER BY ALL") == before
    assert small_study.count("stage_runs", "stage = 'analyze'") == 1  # the failed run: no row


def test_captions_as_prompts_and_indicator_match(small_study):
    con = small_study.con
    caps = [
        r[0]
        for r in con.execute(
            "SELECT caption_id FROM samples WHERE occupation = 'teacher' ORDER BY rank"
        ).fetchall()
    ]
    con.execute(
        "INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank) "
        "SELECT 'no_indicators', occupation, NULL, s.caption_id, rank FROM samples s "
        "JOIN indicators USING (caption_id) WHERE label = 'none'"
    )
    # Two images per teacher caption; caption 0 has a female indicator: both images female.
    genders = {
        0: ["female", "female"],
        1: ["male", "male"],
        2: ["female", "male"],
        3: ["male", "male"],
    }
    for i, cid in enumerate(caps):
        for k, g in enumerate(genders[i]):
            iid = f"gen:m1:cap:{cid}:{k}"
            con.execute(
                "INSERT INTO images (image_id, source, caption_id, occupation, path, "
                "model_id, strategy) VALUES (?, 'generated', ?, 'teacher', 'x.png', "
                "'m1', 'keyword')",
                [iid, cid],
            )
            con.execute(
                "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
                "VALUES (?, ?, ?, ?, 0.9)",
                [iid, CLASSIFIER, 0.97 if g == "female" else 0.03, g],
            )
    analyze(small_study, progress=False)
    amp = {
        r["strategy"]: r
        for r in _rows(small_study, "SELECT * FROM amplification WHERE template_id = 0")
    }
    # All captions: T = 75 % (3 of 4 training images), G = 3 of 8 = 37.5 % -> switch.
    assert amp["captions_as_prompts"]["training_pf"] == pytest.approx(75.0)
    assert amp["captions_as_prompts"]["generated_pf"] == pytest.approx(37.5)
    assert amp["captions_as_prompts"]["exclude_reason"] == "direction_switch"
    # No-indicator captions 1-3: T = 2 of 3 = 66.7 %, G = 1 of 6 = 16.7 % (also a switch).
    nid = amp["captions_as_prompts_no_indicators"]
    assert nid["training_pf"] == pytest.approx(200 / 3)
    assert nid["generated_pf"] == pytest.approx(100 / 6)
    summ = {
        r["strategy"]: r
        for r in _rows(small_study, "SELECT * FROM amplification_summary WHERE template_id IS NULL")
    }
    assert summ["captions_as_prompts"]["n_excluded"] == 1
    match = {
        (r["reference"], r["kind"], r["indicator"]): r
        for r in _rows(small_study, "SELECT * FROM indicator_match")
    }
    assert match[("indicator", "caption", "female")]["n_images"] == 2
    assert match[("indicator", "caption", "female")]["percent_match"] == pytest.approx(100.0)
    assert match[("indicator", "caption", "any")]["n_match"] == 2
    # The paper's reference: the training image's perceived gender (caption 0: female).
    assert match[("training_image", "caption", "female")]["n_match"] == 2
    assert ("training_image", "caption", "male") not in match


def test_indicator_match_against_the_training_image(small_study):
    """Caption 3 says "she" but its training image is labelled male, and its generated images
    are male: against the indicator it misses, against the training image (the paper) it
    matches."""
    con = small_study.con
    caps = [
        r[0]
        for r in con.execute(
            "SELECT caption_id FROM samples WHERE occupation = 'teacher' ORDER BY rank"
        ).fetchall()
    ]
    con.execute(
        "UPDATE indicators SET label = 'female', triggers = 'she' WHERE caption_id = ?", [caps[3]]
    )
    generated = {caps[0]: ["female", "male"], caps[3]: ["male", "male"], caps[1]: ["female"]}
    for cid, genders in generated.items():
        for k, g in enumerate(genders):
            iid = f"gen:m1:cap:{cid}:{k}"
            con.execute(
                "INSERT INTO images (image_id, source, caption_id, occupation, path, model_id, "
                "strategy) VALUES (?, 'generated', ?, 'teacher', 'x.png', 'm1', 'keyword')",
                [iid, cid],
            )
            con.execute(
                "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
                "VALUES (?, ?, ?, ?, 0.9)",
                [iid, CLASSIFIER, 0.97 if g == "female" else 0.03, g],
            )
    analyze(small_study, progress=False)
    match = {
        (r["reference"], r["indicator"]): (r["n_images"], r["n_match"])
        for r in _rows(small_study, "SELECT * FROM indicator_match WHERE kind = 'caption'")
    }
    # Against the indicator (both captions "female"): caption 0 1 of 2, caption 3 0 of 2.
    assert match[("indicator", "female")] == (4, 1)
    assert match[("indicator", "any")] == (4, 1)
    # Against the training image: caption 0 (female) 1 of 2, caption 3 (male) 2 of 2; caption
    # 1 has no indicator and is in neither.
    assert match[("training_image", "female")] == (2, 1)
    assert match[("training_image", "male")] == (2, 2)
    assert match[("training_image", "any")] == (4, 3)


def test_analyze_caption_side_only(make_study, laion_path):
    """The demo case: captions, mentions, indicators, samples; no image stage ran."""
    study = make_study([laion_path])
    caps = _caption_rows(laion_path, 5)
    for i, (row, text) in enumerate(caps):
        study.con.execute(
            "INSERT INTO captions (caption_id, text, url, source_file, "
            "row_in_file) VALUES (?, ?, NULL, 'l', ?)",
            [row, text, row],
        )
        study.con.execute(
            "INSERT INTO mentions (caption_id, occupation, matched_form) "
            "VALUES (?, 'teacher', 'teacher')",
            [row],
        )
        study.con.execute(
            "INSERT INTO indicators (caption_id, label, triggers) VALUES (?, ?, '')",
            [row, "male" if i == 0 else "none"],
        )
        study.con.execute(
            "INSERT INTO samples (strategy, occupation, prompt_id, caption_id, "
            "rank) VALUES ('keyword', 'teacher', NULL, ?, ?)",
            [row, i + 1],
        )
    run = analyze(study, progress=False)
    assert study.count("amplification") == 0 and study.count("amplification_summary") == 0
    assert any("no perceived-gender labels" in m for m in run.messages)
    assert run.summary == [
        {
            "occupation": "teacher",
            "captions": 5,
            "pct_any": 20.0,
            "pct_male": 20.0,
            "pct_female": 0.0,
            "pct_both": 0.0,
        }
    ]
    corr = study.con.execute("SELECT n_occupations, r FROM indicator_correlation").fetchone()
    assert corr == (0, None)


def test_analyze_needs_a_selection(make_study, laion_path):
    study = make_study([laion_path])
    with pytest.raises(StageOrderError, match="corpus-audit select"):
        analyze(study, progress=False)


# -- the misclassification correction (corpus_audit/stages/analyze/correction.py) -------------
def _human(study, image_id, *labels):
    for i, label in enumerate(labels):
        study.con.execute(
            "INSERT INTO human_labels (image_id, annotator, label, source_file) VALUES (?, ?, ?, 'sheet.csv')",
            [image_id, f"a{i}", label],
        )


def test_analyze_without_validation_labels_says_no_correction(small_study):
    run = analyze(small_study, progress=False)
    assert "misclassification correction: no correction (no validation labels)" in run.messages
    errors = _rows(small_study, "SELECT * FROM classifier_errors ORDER BY source")
    assert [(r["source"], r["applied"], r["reason"]) for r in errors] == [
        ("m1", False, "no validation labels"),
        ("training", False, "no validation labels"),
    ]
    pf = _rows(small_study, "SELECT * FROM percent_female_corrected")
    assert len(pf) == small_study.count("percent_female")
    assert {r["note"] for r in pf} == {"no correction (no validation labels)"}
    assert all(r["corrected_pf"] is None for r in pf)
    summ = _rows(small_study, "SELECT * FROM amplification_summary_corrected")
    assert summ and {r["note"] for r in summ} == {
        "no correction (training: no validation labels; m1: no validation labels)"
    }
    amp = _rows(small_study, "SELECT * FROM amplification_corrected")
    assert {r["exclude_reason"] for r in amp} == {"no_correction", "no_generated_labels"}


def test_analyze_corrects_with_validation_labels(small_study):
    analyze(small_study, progress=False)
    before = _rows(small_study, "SELECT * FROM amplification ORDER BY ALL")
    con = small_study.con
    # training: labels f f f m f f m ambiguous; the human majority: F F M M F F M F
    train_ids = [r[0] for r in con.execute(
        "SELECT image_id FROM images WHERE source = 'training' ORDER BY caption_id"
    ).fetchall()]  # fmt: skip
    for image_id, truth in zip(train_ids, "FFMMFFMF", strict=True):
        _human(small_study, image_id, *(["female", "female"] if truth == "F" else ["male"] * 2))
    # generated: every label right but two 'female' images of men, and one tie (left out)
    gen = con.execute(
        "SELECT i.image_id, l.label FROM images i JOIN labels l USING (image_id) "
        "JOIN face_filter f USING (image_id) WHERE i.source = 'generated' AND f.kept"
    ).fetchall()
    men = {"gen:m1:paper:1:teacher:1", "gen:m1:paper:1:teacher:2"}
    for image_id, label in gen:
        if image_id == "gen:m1:paper:1:teacher:0":
            _human(small_study, image_id, "female", "male")
        else:
            _human(small_study, image_id, "male" if image_id in men else label)
    small_study.config.analysis.correction_min_validated = 5
    run = analyze(small_study, progress=False)
    assert not run.skipped  # human_labels are part of the input fingerprint
    assert _rows(small_study, "SELECT * FROM amplification ORDER BY ALL") == before

    errors = {r["source"]: r for r in _rows(small_study, "SELECT * FROM classifier_errors")}
    tr = errors["training"]
    assert (tr["n_validated"], tr["n_female"], tr["n_male"], tr["applied"]) == (8, 5, 3, True)
    assert tr["sensitivity"] == pytest.approx(80.0) and tr["specificity"] == pytest.approx(200 / 3)
    assert tr["ambiguous_female"] == pytest.approx(20.0) and tr["ambiguous_male"] == 0.0
    assert tr["sensitivity_low"] < 80.0 < tr["sensitivity_high"]
    # generated: the 'female' stratum has 16 analysed images, 15 validated (one tie): weight
    # 16/15; the 'male' stratum 14 of 14
    m1 = errors["m1"]
    assert (m1["n_validated"], m1["n_female"], m1["n_male"]) == (29, 13, 16)
    b_m = 2 * 16 / 15 / (2 * 16 / 15 + 14)
    assert m1["specificity"] == pytest.approx(100 * (1 - b_m))
    assert m1["sensitivity"] == pytest.approx(100.0)

    # corrected T (teacher, q = 0.75) and G (teacher #1, q = 0.9) by the formula
    t_pf = 100 * (0.75 - 1 / 3) / (0.8 - 1 / 3 + 0.75 * 0.2)
    g_pf = 100 * (0.9 - b_m) / (1 - b_m)
    pf = {
        (r["side"], r["occupation"], r["template_id"]): r
        for r in _rows(small_study, "SELECT * FROM percent_female_corrected")
    }
    assert pf[("training", "teacher", None)]["corrected_pf"] == pytest.approx(t_pf)
    assert pf[("training", "teacher", None)]["error_source"] == "training"
    assert pf[("generated", "teacher", 1)]["corrected_pf"] == pytest.approx(g_pf)
    lo, hi = pf[("generated", "teacher", 1)]["ci_low"], pf[("generated", "teacher", 1)]["ci_high"]
    assert lo < g_pf < hi
    assert pf[("generated", "nurse", 2)]["note"] == "no labelled images"

    amp = {
        (r["occupation"], r["template_id"]): r
        for r in _rows(
            small_study, "SELECT * FROM amplification_corrected WHERE strategy = 'keyword'"
        )
    }
    teacher = amp[("teacher", 1)]
    assert teacher["amplification"] == pytest.approx(abs(g_pf - 50) - abs(t_pf - 50))
    assert teacher["uncorrected_amplification"] == pytest.approx(15.0)
    assert amp[("nurse", 2)]["exclude_reason"] == "no_generated_labels"
    summ = {
        (r["strategy"], r["template_id"]): r
        for r in _rows(small_study, "SELECT * FROM amplification_summary_corrected")
    }
    cell = summ[("keyword", 1)]
    assert cell["note"] is None and cell["mean_amplification"] == pytest.approx(
        teacher["amplification"]
    )
    assert cell["ci_low"] is not None and cell["ci_low"] < cell["ci_high"]
    assert "changes" in run.provenance["correction"]
    assert run.provenance["correction"]["sources"] == {"m1": "applied", "training": "applied"}
    again = analyze(small_study, progress=False)  # a skipped rerun keeps what the report reads
    assert again.skipped and again.provenance["correction"] == run.provenance["correction"]

    # pooled: one set of rates for every source; a high minimum: no correction, and why
    small_study.config.analysis.correction = "pooled"
    analyze(small_study, progress=False)
    errors = _rows(small_study, "SELECT * FROM classifier_errors")
    assert [(r["source"], r["n_validated"]) for r in errors] == [("pooled", 37)]
    small_study.config.analysis.correction_min_validated = 100
    analyze(small_study, progress=False)
    summ = _rows(small_study, "SELECT DISTINCT note FROM amplification_summary_corrected")
    assert summ == [{"note": "no correction (37 validated images, fewer than 100)"}]
