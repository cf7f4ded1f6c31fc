"""Perceived age and skin tone in the `label` stage: real photos and bad files through
images -> label with the real detector, classifier, age model and skin measurement; rows for
every kept image and image_l_star rows for images dropped for their faces; reruns write
nothing twice; a study labelled before gains the rows without the classifier running again;
label.age / label.skin_tone off write nothing."""

from __future__ import annotations

import pytest
from test_label import _build, _table

import corpus_audit.stages.label as label_module
from corpus_audit.backends.attributes import age_model_id
from corpus_audit.backends.classifiers import AgeGenderClassifier
from corpus_audit.core.pipeline import stage_status
from corpus_audit.stages.label import label


@pytest.fixture
def built(make_study, laion_path, tmp_path):
    return _build(make_study, laion_path, tmp_path)


def _by_kind(study, expect, table):
    rows = _table(study, f"SELECT * FROM {table}")  # noqa: S608 (a fixed table name)
    return {expect[r["image_id"]]: r for r in rows if r["image_id"].startswith("train:")}, rows


def test_label_writes_age_and_skin_rows(built):
    study, expect = built
    study.config.label.batch_size = 4
    run = label(study, progress=False)
    kept = {
        r[0] for r in study.con.execute("SELECT image_id FROM face_filter WHERE kept").fetchall()
    }
    ages, age_rows = _by_kind(study, expect, "perceived_age")
    assert {r["image_id"] for r in age_rows} == kept  # one row per kept image, none else
    for row in age_rows:
        assert row["model"] == age_model_id()
        assert len(row["probs"]) == 81 and sum(row["probs"]) == pytest.approx(1, abs=1e-4)
        assert len(row["p_bins"]) == 7 and sum(row["p_bins"]) == pytest.approx(1)
        assert row["minor"] == (row["age_bin"] == "under_16")
        assert (row["age_group"] is None) == row["minor"]
    # the known ages (see tests/backends/test_age_estimator.py): Collins 35-38, Hopper 77
    assert 27 <= ages["astronaut"]["expected_age"] <= 46
    assert ages["grace"]["expected_age"] >= 69 and ages["grace"]["age_bin"] == "65_plus"
    gen = next(r for r in age_rows if r["image_id"] == "gen:m:p0:0")
    assert gen["expected_age"] == pytest.approx(ages["astronaut"]["expected_age"], abs=1e-6)

    skins, skin_rows = _by_kind(study, expect, "skin_tone")
    ff = {r["image_id"]: r for r in _table(study, "SELECT * FROM face_filter")}
    dropped = {i for i, r in ff.items() if r["reason"] in ("no_face", "many_faces", "small_face")}
    assert {r["image_id"] for r in skin_rows} == kept | dropped  # never an unreadable image
    assert skins["astronaut"]["status"] == "measured" and 0 < skins["astronaut"]["l_star"] < 100
    assert skins["astronaut"]["n_pixels"] >= study.config.label.skin_min_pixels
    assert skins["camera"]["status"] == "unmeasurable" and skins["camera"]["reason"] == "grayscale"
    for kind, reason in (("two_people", "many_faces"), ("small_face", "small_face")):
        row = skins[kind]
        assert row["status"] == "unmeasurable" and row["reason"] == reason
        assert row["l_star"] is None and 0 < row["image_l_star"] < 100
    assert any("perceived age of" in m for m in run.messages)

    again = label(study, progress=False)  # nothing left: nothing written twice
    assert again.skipped and again.rows_out == 0
    assert study.count("perceived_age") == len(kept)
    assert study.count("skin_tone") == len(kept | dropped)

    study.config.label.skin_min_pixels = 10**7  # more than any face has: measured again
    third = label(study, progress=False)
    assert any("skin_min_pixels 200 -> 10000000" in m for m in third.messages)
    skins, _ = _by_kind(study, expect, "skin_tone")
    assert skins["astronaut"]["status"] == "unmeasurable"
    assert skins["astronaut"]["reason"] == "too_few_pixels"
    assert skins["two_people"]["reason"] == "many_faces"  # dropped images' rows kept
    assert study.count("skin_tone") == len(kept | dropped)
    assert study.count("perceived_age") == len(kept)


def test_labelled_study_gains_attributes_without_the_classifier(built, monkeypatch):
    study, _ = built
    study.config.label.age = False
    study.config.label.skin_tone = False
    label(study, progress=False)  # a study labelled without them (or before they existed)
    assert study.count("perceived_age") == 0 and study.count("skin_tone") == 0
    labels_before = _table(study, "SELECT * FROM labels ORDER BY image_id")
    assert "lack" not in (stage_status(study, "label").note or "")

    study.config.label.age = True
    status = stage_status(study, "label").note
    assert f"{len(labels_before)} kept images lack perceived age" in status

    def no_gender(*args, **kwargs):
        raise AssertionError("the gender classifier must not run again")

    def no_detector(*args, **kwargs):
        raise AssertionError("the face detector must not run again")

    monkeypatch.setattr(AgeGenderClassifier, "p_female", no_gender)
    monkeypatch.setattr(label_module, "get_face_detector", no_detector)
    run = label(study, progress=False)
    assert not run.skipped and any("lack perceived-attribute rows" in m for m in run.messages)
    assert study.count("perceived_age") == len(labels_before)
    assert study.count("skin_tone") == 0  # label.skin_tone still off
    assert _table(study, "SELECT * FROM labels ORDER BY image_id") == labels_before

    study.config.label.skin_tone = True  # now the skin rows, dropped images included
    label(study, progress=False)
    n_dropped = study.count("face_filter", "reason IN ('no_face', 'many_faces', 'small_face')")
    assert study.count("skin_tone") == len(labels_before) + n_dropped
    assert study.count("perceived_age") == len(labels_before)
    assert "lack" not in (stage_status(study, "label").note or "")


def test_age_precision_switch_estimates_again_and_analyze_reads_the_chosen_model(built):
    """label.age_precision fp32 after int8: every kept face gets a row of the float model
    (the int8 rows stay), the run says why, and the attribute analysis reads the model the
    settings name, not the one with more rows."""
    from corpus_audit.stages.analyze.attributes import configured_age_model

    study, _ = built
    study.config.label.skin_tone = False
    label(study, progress=False)
    kept = study.count("face_filter", "kept")
    assert study.count("perceived_age", "model = ?", [age_model_id("int8")]) == kept
    study.config.label.age_precision = "fp32"
    run = label(study, progress=False)
    assert any("label.age_precision int8 -> fp32" in m for m in run.messages)
    assert study.count("perceived_age", "model = ?", [age_model_id("fp32")]) == kept
    assert study.count("perceived_age") == 2 * kept
    model = configured_age_model(study.config.label)
    assert model == age_model_id("fp32")
    chosen = study.sql("analyze/attribute_instruments", age_model=model).fetchone()[0]
    assert chosen == model  # a tie in rows: the settings decide, not the name
    study.config.label.age_precision = "int8"
    chosen = study.sql(
        "analyze/attribute_instruments", age_model=configured_age_model(study.config.label)
    ).fetchone()[0]
    assert chosen == age_model_id("int8")
