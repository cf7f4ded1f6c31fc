"""The `label` stage end to end: real photos and bad files through images -> label, with the
real MediaPipe detector and the real agegender classifier; resumability; a second classifier."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import pytest
from image_fixtures import (
    bad_files,
    encode,
    photo,
    seed_captions,
    small_face,
    tiny_clip_dir,
    two_people,
)

import corpus_audit.stages.label as label_module
from corpus_audit.backends.classifiers import decide
from corpus_audit.core.errors import ModelError
from corpus_audit.stages.images import images
from corpus_audit.stages.label import label, pending_images

pytestmark = pytest.mark.filterwarnings("ignore:clip classifier .*random:UserWarning")

PHOTOS = {
    "astronaut": photo("astronaut"),
    "camera": photo("camera"),
    "grace": photo("grace"),
    "two_people": two_people(),
    "small_face": small_face(),
}


def _build(make_study, laion_path, tmp_path, name="study"):
    """A study whose 13 sampled captions have: 5 photos (PNG, lossless), the 8 bad files, and a
    webdataset shard with one good image and a `../../x.jpg` member; plus one generated image."""
    # The full-range model: it finds the small face of `small_face` (drop reason small_face);
    # the short-range default misses faces that small altogether (no_face; see
    # test_face_keep_rate.py).
    study = make_study([laion_path], name=name, label={"face_model": "full_range"})
    seeded = seed_captions(study, laion_path, n=14)
    folder = tmp_path / f"{name}_photos"
    folder.mkdir()
    expect: dict[str, str] = {}
    ids = iter(seeded)
    for key, array in PHOTOS.items():
        cid = next(ids)[0]
        (folder / f"{cid}.png").write_bytes(encode(array, "PNG"))
        expect[f"train:{cid}"] = key
    for file_name, data in bad_files().items():
        cid = next(ids)[0]
        (folder / f"{cid}{Path(file_name).suffix}").write_bytes(data)
        expect[f"train:{cid}"] = file_name
    cid, url, _ = next(ids)
    shard = tmp_path / f"{name}_shard.tar"
    with tarfile.open(shard, "w") as tar:
        for member, blob in (
            ("../../x.jpg", encode(photo("camera"))),
            ("000000001.png", encode(photo("camera"), "PNG")),
            ("000000001.json", f'{{"url": "{url}"}}'.encode()),
        ):
            info = tarfile.TarInfo(member)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    expect[f"train:{cid}"] = "camera"
    study.config.images.sources = [
        {"kind": "dir", "path": str(folder)},
        {"kind": "webdataset", "path": str(shard)},
    ]
    images(study, progress=False)
    # a generated image, as the generate stage registers it (path relative to the study)
    gen = study.path("images", "generated", "m", "p0.png")
    gen.write_bytes(encode(photo("astronaut"), "PNG"))
    study.con.execute(
        "INSERT INTO images (image_id, source, prompt_id, occupation, path, model_id, seed) "
        "VALUES ('gen:m:p0:0', 'generated', 'direct:1:nurse', 'nurse', 'images/generated/m/p0.png', 'm', 0)"
    )
    expect["gen:m:p0:0"] = "astronaut"
    return study, expect


@pytest.fixture
def built(make_study, laion_path, tmp_path):
    return _build(make_study, laion_path, tmp_path)


def _table(study, sql, params=None):
    cur = study.con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def test_label_end_to_end_with_real_models(built, tmp_path):
    study, expect = built
    assert study.count("images") == 15
    study.config.label.batch_size = 4
    run = label(study, progress=False)
    assert run.rows_in == 15 and not run.skipped
    ff = {r["image_id"]: r for r in _table(study, "SELECT * FROM face_filter")}
    assert set(ff) == set(expect)  # every image has its outcome, none crashed the run
    by_kind = {kind: ff[i] for i, kind in expect.items() if i.startswith("train:")}
    for kind in ("astronaut", "camera", "grace"):
        assert by_kind[kind]["kept"] and by_kind[kind]["n_faces"] == 1
    assert by_kind["two_people"]["reason"] == "many_faces" and by_kind["two_people"]["n_faces"] == 2
    assert by_kind["small_face"]["reason"] == "small_face"
    for bad, detail in {
        "zero_byte.jpg": "empty file",
        "truncated.jpg": "truncated",
        "bomb.png": "too many pixels",
        "not_an_image.jpg": "not a recognised image format",
    }.items():
        assert by_kind[bad]["reason"] == "unreadable" and by_kind[bad]["detail"].startswith(detail)
        assert by_kind[bad]["n_faces"] is None
    for fine in ("alpha.png", "cmyk.jpg", "rgb16.png", "gray16.png"):
        assert by_kind[fine]["reason"] != "unreadable"  # decoded; the face rule decides
    assert run.dropped["unreadable"] == 4 and run.dropped["many_faces"] == 1

    # faces of the two-person image, left to right
    two = next(i for i, k in expect.items() if k == "two_people")
    faces = _table(study, "SELECT * FROM faces WHERE image_id = ? ORDER BY face_index", [two])
    assert [f["face_index"] for f in faces] == [0, 1] and faces[0]["x"] < faces[1]["x"]
    assert faces[0]["x"] + faces[0]["w"] / 2 < 300 < faces[1]["x"] + faces[1]["w"] / 2

    labels = {r["image_id"]: r for r in _table(study, "SELECT * FROM labels")}
    kept = {i for i, r in ff.items() if r["kept"]}
    assert set(labels) == kept  # labels exactly for the images that passed
    for row in labels.values():
        assert row["classifier"] == "agegender" and row["threshold"] == 0.9
        assert 0 <= row["p_female"] <= 1
        assert row["label"] == decide(row["p_female"], 0.9)
    p = {expect[i]: r["p_female"] for i, r in labels.items() if i.startswith("train:")}
    assert p["astronaut"] > 0.8 and p["camera"] < 0.2 and p["grace"] < 0.1  # see test_classifiers
    gen = labels["gen:m:p0:0"]  # generated images go through the same path
    assert gen["p_female"] == pytest.approx(p["astronaut"], abs=1e-9)
    assert {r["source"] for r in run.summary} == {"generated", "training"}

    # nothing was written outside the study directory by the hostile tar member
    assert not (study.root / ".." / ".." / "x.jpg").resolve().exists()
    assert not (tmp_path.parent / "x.jpg").exists()

    again = label(study, progress=False)
    assert again.skipped and again.rows_out == 0
    assert study.count("face_filter") == 15 and study.count("labels") == len(kept)


def test_label_resumes_after_a_crash_without_duplicates(built, monkeypatch):
    study, expect = built
    study.config.label.batch_size = 3
    real_write = label_module.write_batch
    calls = {"n": 0}

    def crash_on_third(study_, result):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # killed while the third batch is in flight
        real_write(study_, result)

    monkeypatch.setattr(label_module, "write_batch", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        label(study, progress=False)
    assert study.count("face_filter") == 6  # two finished batches kept
    assert study.last_run("label") is None  # an unfinished run is not recorded
    assert len(pending_images(study, "agegender")) == 15 - 6

    monkeypatch.setattr(label_module, "write_batch", real_write)
    run = label(study, progress=False)
    assert run.rows_in == 9
    assert study.count("face_filter") == 15
    dup = study.con.execute(
        "SELECT count(*) FROM (SELECT image_id, face_index FROM faces GROUP BY ALL HAVING count(*) > 1)"
    ).fetchone()[0]
    assert dup == 0
    n_faces = study.con.execute("SELECT sum(n_faces) FROM face_filter").fetchone()[0]
    assert study.count("faces") == n_faces
    kept = study.count("face_filter", "kept")
    assert study.count("labels") == kept and kept >= 5


def test_second_classifier_reuses_the_face_filter(built, tmp_path, monkeypatch):
    study, _ = built
    label(study, progress=False)
    first = study.count("labels")
    folder = tiny_clip_dir(tmp_path / "tiny")
    cfg = study.config.label
    cfg.classifier, cfg.clip_model, cfg.clip_pretrained = "clip", f"local-dir:{folder}", "random"
    cfg.threshold = 0.5

    def no_detector(*args, **kwargs):
        raise AssertionError("the face filter must not run again")

    monkeypatch.setattr(label_module, "get_face_detector", no_detector)
    run = label(study, progress=False)
    assert run.rows_in == first and run.rows_out == first
    rows = _table(study, "SELECT * FROM labels WHERE classifier LIKE 'clip:%'")
    assert len(rows) == first
    for r in rows:
        assert r["label"] == decide(r["p_female"], 0.5) and r["label"] != "ambiguous"
    assert study.count("labels", "classifier = 'agegender'") == first  # kept, not replaced
    assert run.provenance["classifier"]["clip_pretrained"] == "random"


def test_unavailable_clip_weights_stop_before_any_work(built):
    study, _ = built
    study.config.label.classifier = "clip"  # ViT-L-14 / openai: no weights on this machine
    with pytest.raises(ModelError, match="label.clip_pretrained"):
        label(study, progress=False)
    assert study.count("face_filter") == 0 and study.last_run("label") is None


def test_label_without_images_is_a_skip(make_study, laion_path):
    study = make_study([laion_path], name="noimg")
    run = label(study, progress=False)
    assert run.skipped and "images" in run.messages[0]


def test_unreadable_after_filtering_is_counted(built):
    """An image that passed the filter but whose file vanished before it was labelled."""
    study, _ = built
    study.config.label.batch_size = 32
    label(study, progress=False)
    kept = study.con.execute(
        "SELECT f.image_id, i.path FROM face_filter f JOIN images i USING (image_id) "
        "WHERE kept AND i.source = 'generated'"
    ).fetchone()
    study.con.execute("DELETE FROM labels WHERE image_id = ?", [kept[0]])
    (study.root / kept[1]).unlink()
    run = label(study, progress=False)
    assert run.rows_in == 1 and run.rows_out == 0
    assert run.dropped == {"unreadable_now": 1}


def test_a_new_threshold_relabels_from_the_stored_probabilities(built, monkeypatch):
    """`label.threshold` changed after `label`: the rerun sets every stored label again from
    its p_female (no model loads), says how many changed, and `status` keeps the counts of
    the run that labelled; a rerun with nothing left is a skip shown beside those counts."""
    from corpus_audit.core.pipeline import status

    study, _ = built
    first = label(study, progress=False)
    before = {r["image_id"]: r for r in _table(study, "SELECT * FROM labels")}
    study.config.label.threshold = 0.6
    # a stale note: the declared [label] section changed since the run
    assert "config changed since this run" in {s.stage: s for s in status(study)}["label"].note

    def no_model(*args, **kwargs):
        raise AssertionError("relabelling at a new threshold must not load a model")

    monkeypatch.setattr(label_module, "build_classifier", no_model)
    monkeypatch.setattr(label_module, "get_face_detector", no_model)
    run = label(study, progress=False)
    after = {r["image_id"]: r for r in _table(study, "SELECT * FROM labels")}
    assert set(after) == set(before) and not run.skipped
    assert all(r["threshold"] == 0.6 for r in after.values())
    assert all(r["label"] == decide(r["p_female"], 0.6) for r in after.values())
    changed = sum(after[i]["label"] != before[i]["label"] for i in after)
    assert changed >= 1  # some p_female lies in [0.6, 0.9) or (0.1, 0.4] (a real photo)
    assert run.rows_out == len(after)
    assert f"{len(after)} labels of agegender set again at threshold 0.6" in run.messages[0]
    assert f"{changed} changed label" in run.messages[0]
    by_source = {r["source"]: r for r in run.summary}
    assert sum(r["female"] + r["male"] + r["ambiguous"] for r in by_source.values()) == len(after)

    again = label(study, progress=False)  # nothing left: a skip
    assert again.skipped and again.rows_out == 0
    row = {s.stage: s for s in status(study)}["label"]
    assert row.status == "done" and row.rows_out == len(after)  # the relabelling run's counts
    assert row.note.startswith("rerun ") and "skipped" in row.note
    assert "config changed" not in row.note
    assert first.rows_out == len(before)
    assert not [m for m in run.messages if "analysis.threshold" in m]  # 0: nothing to say

    # with analysis.threshold set, a new label.threshold does not reach analyze: said so
    study.config.analysis.threshold = 0.8
    study.config.label.threshold = 0.7
    third = label(study, progress=False)
    assert not third.skipped and third.messages[1].startswith(
        "analysis.threshold = 0.8 relabels from p_female for the analysis"
    )


def test_a_face_filter_setting_filters_again(built, capfd):
    """`label.min_face_fraction` changed after `label`: the rerun filters every image again
    (the small face now counts) and says so; labels of images kept again are reused. The
    C++ runtimes under MediaPipe (LiteRT, TFLite, absl) leave nothing on stderr."""
    study, expect = built
    capfd.readouterr()
    label(study, progress=False)
    err = capfd.readouterr().err
    native = r"\.cc:\d+\]|XNNPACK|LiteRT|TensorFlow Lite|InitGoogle|absl|^[IW]\d{4} "
    assert not [line for line in err.splitlines() if re.search(native, line)], err
    small = next(i for i, k in expect.items() if k == "small_face")
    assert study.con.execute(
        "SELECT reason FROM face_filter WHERE image_id = ?", [small]
    ).fetchone() == ("small_face",)
    study.config.label.min_face_fraction = 0.0
    run = label(study, progress=False)
    assert "label.min_face_fraction 0.1 -> 0.0" in run.messages[0]
    assert "face filter runs again on all 15 images" in run.messages[0]
    assert run.rows_in == 15 and study.count("face_filter") == 15
    assert study.con.execute(
        "SELECT kept FROM face_filter WHERE image_id = ?", [small]
    ).fetchone() == (True,)
    assert study.count("labels", "image_id = ?", [small]) == 1
