"""Perceived age corrected and skin tone mapped to Monk from annotator answers, inside
`analyze`, on the hand-made study of test_analysis.py (30 kept generated faces of model m1,
8 training faces)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from corpus_audit.methods import multiclass as mk
from corpus_audit.stages.analyze import analyze
from corpus_audit.stages.analyze.attribute_errors import learn_age
from tests.stages.test_analysis import _rows, small_study  # noqa: F401  (the fixture)
from tests.stages.test_analysis_attributes import _measure

AGES = (25.0, 40.0, 60.0)  # one face in each adult age group, in turn
GROUP = {25.0: "25_34", 40.0: "35_44", 60.0: "55_64"}


def _monk_of(l_star: float) -> int:
    """The annotators' tone: darker skin (lower L*) is a higher Monk tone."""
    return int(np.clip(10 - (l_star - 20) // 7, 1, 10))


@pytest.fixture
def validated(small_study):  # noqa: F811
    """Every kept face measured (ages in turn 25 / 40 / 60, L* spread 20-78) and answered by
    two annotators who agree with the age model's band and give a Monk tone that follows L*."""
    study = small_study
    study.config.analysis.correction_min_validated = 10
    ids = study.column("SELECT image_id FROM images ORDER BY image_id")
    for i, image_id in enumerate(ids):
        age, l_star = AGES[i % 3], 20.0 + 2.0 * i
        _measure(study, image_id, age, l_star)
        for annotator in ("a", "b"):
            study.con.execute(
                "INSERT INTO human_labels (image_id, annotator, label, monk, age_bin) "
                "VALUES (?, ?, '', ?, ?)",
                [image_id, annotator, _monk_of(l_star), GROUP[age]],
            )
    return study


def test_age_corrected_and_tone_calibrated_from_annotators(validated):
    analyze(validated, progress=False)
    errors = {
        (r["attribute"], r["source"]): r for r in _rows(validated, "SELECT * FROM attribute_errors")
    }
    # generated m1: 30 validated faces, annotators agree with the model: identity matrix
    group = errors[("age_group", "m1")]
    assert group["applied"] and group["n_validated"] == 30 and group["reason"] is None
    matrix = np.array(json.loads(group["matrix_json"]), dtype=float)
    assert matrix.shape == (3, 4) and np.allclose(matrix[:, :3], np.eye(3))
    # six bands, three of which no annotator chose: not applied, and said why
    bins = errors[("age_bin", "m1")]
    assert not bins["applied"] and "16_24" in bins["reason"] and "45_54" in bins["reason"]
    # training: 8 faces, fewer than correction_min_validated
    assert not errors[("age_group", "training")]["applied"]
    assert "8 validated faces" in errors[("age_group", "training")]["reason"]
    dist = _rows(validated, "SELECT * FROM attribute_distribution")
    m1_groups = [r for r in dist if r["source"] == "m1" and r["attribute"] == "age_group"]
    assert m1_groups
    for r in m1_groups:  # an identity matrix changes nothing; the interval holds the share
        assert r["corrected_share"] == pytest.approx(r["share"], abs=1e-6)
        assert r["corrected_low"] <= r["corrected_share"] <= r["corrected_high"]
        assert r["note"] is None
    trained = [r for r in dist if r["source"] == "training" and r["attribute"] == "age_group"]
    assert all(r["corrected_share"] is None and "8 validated" in r["note"] for r in trained)

    # Monk: m1 calibrated from 30 tones, training refused (8 labels)
    assert errors[("monk", "m1")]["applied"] and errors[("monk", "m1")]["n_validated"] == 30
    assert "at least 30" in errors[("monk", "training")]["reason"]
    monk = [r for r in dist if r["attribute"] == "monk"]
    assert monk and {r["source"] for r in monk} == {"m1"}
    pooled = sorted((r for r in monk if r["occupation"] == "*"), key=lambda r: r["class_order"])
    assert len(pooled) == 10 and sum(r["share"] for r in pooled) == pytest.approx(100.0)
    assert all(r["calibrated"] and r["share_low"] <= r["share"] <= r["share_high"] for r in pooled)
    # the calibrated mean tone is near the annotators' mean tone of the same faces
    tones = validated.con.execute(
        "SELECT avg(h.monk) FROM human_labels h JOIN images i USING (image_id) "
        "WHERE i.source = 'generated' AND h.annotator = 'a' AND i.image_id IN "
        "(SELECT image_id FROM face_filter WHERE kept) AND i.image_id IN "
        "(SELECT image_id FROM perceived_age WHERE NOT minor)"
    ).fetchone()[0]
    mean_tone = sum((r["class_order"] + 1) * r["share"] / 100 for r in pooled)
    assert mean_tone == pytest.approx(tones, abs=0.5)


def _row(human: str | None, predicted: str | None, stratum: str = "female") -> dict:
    return {
        "side": "generated", "model_id": "m", "stratum_label": stratum,
        "human_age_bin": human, "predicted_age_bin": predicted,
    }  # fmt: skip


def test_age_matrix_weights_strata_and_leaves_minors_out():
    """P(model's band | annotators' band) with N_s / n_s weights: a stratum drawn at one
    image in ten counts ten times; annotators' under-16 answers are left out; the model's
    under-16 reading is the uncounted last column."""
    scale = ("under_35", "35_54", "55_plus")
    rows = [_row("25_34", "25_34", "female")] * 4 + [_row("25_34", "45_54", "male")]
    rows += [_row("35_44", "35_44"), _row("55_64", "65_plus"), _row("45_54", "under_16")]
    rows += [_row("under_16", "25_34")]
    sizes = {("generated", "m", "female"): 7, ("generated", "m", "male"): 10}
    matrix, draws, reason, n = learn_age(rows, sizes, "age_group", scale, 3, 50, 0)
    assert reason is None and n == 8 and draws.shape == (50, 3, 4)
    # true under_35: 4 faces of the female stratum right (7 of its 7 faces validated: weight
    # 1 each), 1 face of the male stratum wrong (1 of 10 validated: weight 10)
    assert matrix[0] == pytest.approx([4 / 14, 10 / 14, 0, 0])
    assert matrix[1] == pytest.approx([0, 0.5, 0, 0.5])  # one right, one read as under 16
    assert matrix[2] == pytest.approx([0, 0, 1, 0])
    q = np.array([0.5, 0.3, 0.2])
    assert mk.corrected_shares(q, matrix).sum() == pytest.approx(1.0)
    few = learn_age(rows[:2], sizes, "age_group", scale, 3, 50, 0)
    assert few[0] is None and few[2] == "2 validated faces with an age band; at least 3"


def test_report_shows_monk_tones_and_corrections(validated):
    from pathlib import Path

    from corpus_audit.report import report

    analyze(validated, progress=False)
    page = Path(report(validated, progress=False).outputs["report"]).read_text(encoding="utf-8")
    assert 'id="attribute-monk"' in page and "monk_10" in page
    assert "Monk tones from annotator labels exist for m1 only" in page
    assert 'id="attribute-errors"' in page and "8 validated faces with an age band" in page
    for image_id in validated.column("SELECT image_id FROM images"):
        assert image_id not in page  # aggregates only


def test_race_estimated_from_opt_in_answers_only(validated):
    """No classifier: the race rows are the annotators' answers on the validation sample,
    one source at a time, weighted; a study whose sheet did not ask has none."""
    from corpus_audit.stages.analyze.attribute_errors import RACE_CLASSES
    from corpus_audit.stages.validate.questions import RACE

    assert RACE_CLASSES == RACE  # the sheet's answers, in its order
    analyze(validated, progress=False)
    assert validated.count("attribute_distribution", "attribute = 'race'") == 0
    ids = validated.column(
        "SELECT image_id FROM images WHERE source = 'generated' ORDER BY image_id"
    )
    for i, image_id in enumerate(ids[:20]):  # 15 'white', 5 'black'; one annotator unsure
        answer = "white" if i < 15 else "black"
        validated.con.execute(
            "UPDATE human_labels SET race = ? WHERE image_id = ? AND annotator = 'a'",
            [answer, image_id],
        )
    analyze(validated, progress=False)
    race = {
        r["class"]: r
        for r in _rows(validated, "SELECT * FROM attribute_distribution WHERE attribute = 'race'")
    }
    assert set(race) == set(RACE) and {r["source"] for r in race.values()} == {"m1"}
    kept = validated.count(
        "human_labels h JOIN face_filter f USING (image_id)",
        "h.race IS NOT NULL AND f.kept",
    )
    assert race["white"]["n"] == kept and race["white"]["occupation"] == "*"
    # weighted N_s / n_s within the strata (the stored gender label the sheet drew from)
    answers = validated.con.execute(
        "SELECT l.label, h.race FROM human_labels h JOIN labels l USING (image_id) "
        "JOIN face_filter f USING (image_id) WHERE h.race IS NOT NULL AND f.kept"
    ).fetchall()
    population = dict(
        validated.con.execute(
            "SELECT l.label, count(*) FROM labels l JOIN images i USING (image_id) "
            "JOIN face_filter f USING (image_id) WHERE i.source = 'generated' AND f.kept "
            "GROUP BY 1"
        ).fetchall()
    )
    drawn = {s: sum(1 for lab, _ in answers if lab == s) for s in population}
    weight = {s: population[s] / drawn[s] for s in drawn if drawn[s]}
    white = sum(weight[lab] for lab, r in answers if r == "white")
    expected = 100.0 * white / sum(weight[lab] for lab, _ in answers)
    assert race["white"]["share"] == pytest.approx(expected)
    assert race["white"]["count"] == 15
    assert race["white"]["share_low"] <= race["white"]["share"] <= race["white"]["share_high"]
    assert race["asian"]["share"] == 0.0 and "no classifier" in race["asian"]["note"]


def test_gender_error_rates_per_tone_group(validated):
    """The Gender Shades audit: annotators call every generated face in the darkest L* group
    a woman, so there the classifier's male labels are errors; elsewhere they agree with it.
    The dark group's rate of women labelled male is its own, the other groups' are 0; a group
    with fewer than 10 validated faces is not applied and says why."""
    from corpus_audit.methods.skin_tone import tone_group_uncalibrated

    rows = validated.con.execute(
        "SELECT i.image_id, l.label, s.l_star FROM images i JOIN labels l USING (image_id) "
        "JOIN skin_tone s USING (image_id) WHERE i.source = 'generated'"
    ).fetchall()
    for image_id, label, l_star in rows:
        dark = tone_group_uncalibrated(l_star) == "l_dark"
        truth = "female" if dark else label if label in ("female", "male") else "unsure"
        validated.con.execute(
            "UPDATE human_labels SET label = ? WHERE image_id = ?", [truth, image_id]
        )
    analyze(validated, progress=False)
    groups = {
        r["tone_group"]: r
        for r in _rows(
            validated,
            "SELECT * FROM attribute_errors WHERE attribute = 'gender' AND source = 'm1' "
            "AND tone_group IS NOT NULL",
        )
    }
    assert set(groups) == {"l_dark", "l_mid", "l_light"}
    dark = np.array(json.loads(groups["l_dark"]["matrix_json"]), dtype=float)
    kept_dark = [r for r in rows if tone_group_uncalibrated(r[2]) == "l_dark"]
    men_labels = sum(r[1] == "male" for r in kept_dark)
    assert men_labels > 0 and dark[0, 1] > 0  # women the classifier called men
    for name, row in groups.items():
        if name == "l_dark":
            continue
        matrix = np.array(json.loads(row["matrix_json"]), dtype=float)
        assert np.nan_to_num(matrix[0, 1]) == 0 and np.nan_to_num(matrix[1, 0]) == 0
        if row["n_validated"] < 10:
            assert not row["applied"] and "at least 10" in row["reason"]


def test_independence_of_the_instruments_errors_is_tested(validated):
    """Where the gender classifier errs the age model errs too (every third generated face):
    the product model's assumption fails and the cells say so with a small p; where the
    errors are unrelated the p-value is large."""
    gen = validated.con.execute(
        "SELECT i.image_id, l.label, p.age_bin FROM images i JOIN labels l USING (image_id) "
        "JOIN perceived_age p USING (image_id) JOIN face_filter f USING (image_id) "
        "WHERE i.source = 'generated' AND f.kept AND l.label IN ('female', 'male') "
        "ORDER BY i.image_id"
    ).fetchall()
    other = {"25_34": "55_64", "35_44": "16_24", "55_64": "25_34"}

    def answer(together: bool) -> float:
        for i, (image_id, label, band) in enumerate(gen):
            gender_wrong = i % 3 == 0
            age_wrong = gender_wrong if together else i % 2 == 0
            truth = ("male" if label == "female" else "female") if gender_wrong else label
            validated.con.execute(
                "UPDATE human_labels SET label = ?, age_bin = ? WHERE image_id = ?",
                [truth, other[band] if age_wrong else band, image_id],
            )
        analyze(validated, progress=False)
        ps = validated.column("SELECT DISTINCT independence_p FROM attribute_intersections")
        assert len(ps) == 1 and ps[0] is not None
        return ps[0]

    assert answer(together=True) < 0.01
    assert answer(together=False) > 0.05


def test_cells_corrected_by_the_product_model(validated):
    """Annotators who agree with the gender classifier and the age model: both matrices are
    identities, so the product model leaves every cell's share as measured; with too few
    validated training faces the cells say which matrix is missing."""
    analyze(validated, progress=False)  # gender not answered yet: no gender matrix
    notes = validated.column("SELECT DISTINCT corrected_note FROM attribute_intersections")
    assert len(notes) == 1 and "gender of training" in notes[0]
    validated.config.analysis.correction_min_validated = 5
    validated.con.execute(
        "UPDATE human_labels SET label = l.label FROM labels l "
        "WHERE l.image_id = human_labels.image_id AND l.label IN ('female', 'male')"
    )
    analyze(validated, progress=False)
    cells = _rows(validated, "SELECT * FROM attribute_intersections")
    assert len(cells) == 18
    for c in cells:
        assert c["corrected_note"] is None
        assert c["training_corrected"] == pytest.approx(c["training_share"], abs=1e-6)
        assert c["generated_corrected"] == pytest.approx(c["generated_share"], abs=1e-6)
        assert c["change_corrected_low"] <= c["change_corrected"] + 1e-9
        assert c["change_corrected"] <= c["change_corrected_high"] + 1e-9
    assert sum(c["generated_corrected"] for c in cells) == pytest.approx(100.0)


def test_product_model_recovers_known_cells():
    """Faces labelled through known gender and age error matrices (expected counts): the
    product model gives back the true shares of every cell within each tone group."""
    from corpus_audit.stages.analyze.attribute_cells import CELL_AGES, _joint, cell_counts

    tones = ("l_dark", "l_mid", "l_light")
    gender_m = np.array([[0.85, 0.1, 0.05], [0.08, 0.9, 0.02]])  # rows: woman, man
    age_m = np.array([[0.8, 0.15, 0.0, 0.05], [0.1, 0.8, 0.1, 0.0], [0.0, 0.2, 0.8, 0.0]])
    rng = np.random.default_rng(5)
    truth = rng.dirichlet(np.ones(18)).reshape(2, 3, 3)  # gender x tone x age
    observed = []
    big = 200_000
    for t, tone in enumerate(tones):
        p = truth[:, t, :].ravel()  # (6,) gender slowest
        out = p @ np.kron(gender_m, age_m)  # (12,) predicted gender x predicted age (+minor)
        for g in range(2):
            for a in range(3):
                k = int(round(big * out[g * 4 + a]))
                observed += [(("female", "male")[g], tone, CELL_AGES[a])] * k
    got = _joint(cell_counts(observed, tones), gender_m, age_m).reshape(2, 3, 3)
    # the tone groups' shares are taken as measured: compare within each tone group
    for t in range(3):
        want = truth[:, t, :] / truth[:, t, :].sum()
        assert got[:, t, :] / got[:, t, :].sum() == pytest.approx(want, abs=2e-4)


def test_monk_change_and_amplification_when_both_sides_are_calibrated(validated, monkeypatch):
    """Training and m1 both calibrated: the pooled pair gets per-tone change rows and an
    A_K row on the Monk scale; the generated faces here are darker (lower L*, higher tone),
    so the mean tone shifts up. Without a training calibration there are none."""
    from corpus_audit.methods import monk_calibration
    from corpus_audit.stages.analyze.monk_pairs import whole_counts

    analyze(validated, progress=False)  # training: 8 labels, not calibrated
    assert validated.count("attribute_amplification", "attribute = 'monk'") == 0
    monkeypatch.setattr(monk_calibration, "MIN_LABELS", 5)
    monkeypatch.setattr(monk_calibration, "MIN_TONES", 2)
    training = validated.column(
        "SELECT image_id FROM images WHERE source = 'training' ORDER BY image_id"
    )  # L* rises with the order: lighter faces, lower tones
    for j, image_id in enumerate(training):
        validated.con.execute(
            "UPDATE human_labels SET monk = ? WHERE image_id = ?", [4 - j // 2, image_id]
        )
    analyze(validated, progress=False)
    change = _rows(
        validated,
        "SELECT * FROM attribute_change WHERE attribute = 'monk' AND occupation = '*' "
        "ORDER BY class_order",
    )
    assert [r["class"] for r in change] == [f"monk_{k}" for k in range(1, 11)]
    assert sum(r["training_share"] for r in change) == pytest.approx(100.0)
    assert sum(r["generated_share"] for r in change) == pytest.approx(100.0)
    amp = _rows(
        validated,
        "SELECT * FROM attribute_amplification WHERE attribute = 'monk' AND occupation = '*'",
    )[0]
    assert amp["calibrated"] and amp["a_k_low"] <= amp["a_k"] <= amp["a_k_high"]
    assert amp["mean_shift"] > 0 and amp["directional"] is None
    assert whole_counts(np.array([[0.5, 0.5, 0.0], [0.6, 0.3, 0.1]])).tolist() == [1, 1, 0]
