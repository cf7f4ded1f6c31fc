"""The analysis of perceived age and skin tone on the hand-made study of test_analysis.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_audit.methods.age_bins import AGE_BINS
from corpus_audit.stages.analyze import analyze
from tests.stages.test_analysis import _rows, small_study  # noqa: F401  (the fixture)

AGE_MODEL = "agegender-age:test"


def _measure(study, image_id: str, age: float, l_star: float | None) -> None:
    """A perceived_age and a skin_tone row as the label stage writes them."""
    bins = (0, 16, 25, 35, 45, 55, 65)
    k = max(i for i, start in enumerate(bins) if age >= start)
    p_bins = [1.0 if i == k else 0.0 for i in range(7)]
    group = None if k == 0 else "under_35" if age < 35 else "35_54" if age < 55 else "55_plus"
    study.con.execute(
        "INSERT INTO perceived_age VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [image_id, AGE_MODEL, age, AGE_BINS[k], group, k == 0, p_bins, [0.0] * 81],
    )
    study.con.execute(
        "INSERT INTO skin_tone VALUES (?, 'cheeks5:v1', ?, NULL, 300, ?, 10.0, 15.0, 56.3, "
        "40.0, '', 55.0)",
        [image_id, "measured" if l_star is not None else "unmeasurable", l_star],
    )


@pytest.fixture
def measured(small_study):  # noqa: F811
    """The small study with ages and L* on every kept image: training teachers are 30-year-olds
    at L* 70, generated teachers 50-year-olds at L* 40, and one generated nurse reads as 12."""
    study = small_study
    for (image_id,) in study.con.execute("SELECT image_id FROM images").fetchall():
        generated = image_id.startswith("gen:")
        age, l_star = (50.0, 40.0) if generated else (30.0, 70.0)
        if image_id == "gen:m1:paper:1:nurse:0":
            age = 12.0
        _measure(study, image_id, age, l_star)
    return study


def test_attribute_tables_on_the_hand_made_study(measured):
    analyze(measured, progress=False)
    dist = {
        (r["attribute"], r["source"], r["occupation"], r["class"]): r
        for r in _rows(measured, "SELECT * FROM attribute_distribution")
    }
    teacher_t = dist[("age_group", "training", "teacher", "under_35")]
    assert (teacher_t["n"], teacher_t["count"], teacher_t["share"]) == (4, 4, 100.0)
    assert dist[("age_group", "m1", "teacher", "35_54")]["share"] == 100.0
    assert dist[("tone_group", "m1", "teacher", "l_dark")]["calibrated"] is False
    # the 12-year-old generated nurse is left out and counted as a minor
    nurse_g = dist[("age_bin", "m1", "nurse", "45_54")]
    assert nurse_g["n"] == 9
    summ = {
        (r["attribute"], r["source"], r["occupation"]): r
        for r in _rows(measured, "SELECT * FROM attribute_summary")
    }
    assert summ[("age", "m1", "nurse")]["minors"] == 1
    assert summ[("age", "training", "teacher")]["mean"] == pytest.approx(30.0)
    assert summ[("skin_tone", "m1", "teacher")]["median"] == pytest.approx(40.0)

    change = {
        (r["attribute"], r["occupation"], r["class"]): r
        for r in _rows(measured, "SELECT * FROM attribute_change")
    }
    c = change[("age_group", "teacher", "35_54")]
    assert c["change"] == pytest.approx(100.0) and c["change_low"] < 100.0
    amp = {
        (r["attribute"], r["occupation"]): r
        for r in _rows(measured, "SELECT * FROM attribute_amplification")
    }
    # A_K at K = 2 is the binary amplification of the same sets: teacher training 3/4
    # female (75 %), generated 14/20 (70 %): |70 - 50| - |75 - 50| = -5 points
    assert amp[("gender", "teacher")]["a_k_raw"] == pytest.approx(-5.0)
    assert amp[("age_group", "*")]["mean_shift"] == pytest.approx(20.0, abs=0.5)
    cells = _rows(measured, "SELECT * FROM attribute_intersections ORDER BY change DESC")
    assert len(cells) == 18 and sum(c["worst"] for c in cells) == 1
    assert all(c["q_value"] is None or c["q_value"] >= c["p_value"] for c in cells)
    official = {
        (r["attribute"], r["source"], r["occupation"], r["class"]): r
        for r in _rows(measured, "SELECT * FROM attribute_official")
    }
    assert not any(k[2] == "teacher" for k in official)  # no single BLS row for teacher
    nurse = official[("median_age", "training", "nurse", "median_age")]
    assert nurse["official_share"] == pytest.approx(42.3)  # table 11b 2025, registered nurses
    assert nurse["gap"] == pytest.approx(30.0 - 42.3)
    assert "perceived" in nurse["caveat"]
    # aggregates only: no table of the attribute analysis has an image column
    for table in ("attribute_distribution", "attribute_change", "attribute_intersections"):
        cols = [r[0] for r in measured.con.execute(f"DESCRIBE {table}").fetchall()]
        assert "image_id" not in cols


def test_no_measurements_no_attribute_rows(small_study):  # noqa: F811
    analyze(small_study, progress=False)
    assert small_study.count("attribute_distribution") == 0


def test_report_section_shows_aggregates_only(measured):
    from corpus_audit.report import report

    analyze(measured, progress=False)
    page = Path(report(measured, progress=False).outputs["report"]).read_text(encoding="utf-8")
    assert 'id="attributes"' in page and 'id="uncalibrated"' in page
    assert 'id="attribute-amplification"' in page and "A_K" in page
    assert 'id="fig-attribute_change_' in page  # the heat-map of per-class change
    findings = page[: page.index('id="attributes"')]
    assert "perceived age group A_K" in findings  # the opening box names the result
    for (image_id,) in measured.con.execute("SELECT image_id FROM images").fetchall():
        assert image_id not in page  # no image is named on the page
    figures = measured.root / "report" / "figures"
    drawn = sorted(figures.glob("attribute_change_*.png"))
    assert len(drawn) == 1 and drawn[0].stat().st_size > 1000


def test_report_says_why_without_measurements(small_study):  # noqa: F811
    from corpus_audit.report import report

    analyze(small_study, progress=False)
    run = report(small_study, progress=False)
    page = Path(run.outputs["report"]).read_text(encoding="utf-8")
    assert 'id="attribute-amplification"' not in page
    assert "Perceived age and skin tone" in page and "label.age and label.skin_tone" in page
