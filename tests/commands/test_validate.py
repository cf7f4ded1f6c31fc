"""Human validation: stratified HTML/CSV sheet from real labels; annotator import, alpha, agreement."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from image_fixtures import encode, lfw, photo, seed_captions

from corpus_audit.commands.validate import export_sheet
from corpus_audit.core.errors import ValidationError
from corpus_audit.methods.stats import allocate
from corpus_audit.stages.images import images
from corpus_audit.stages.label import label
from corpus_audit.stages.validate import import_labels, majority, reliability, summary_dict

EVIL_ID = 'gen:m:<script>alert("x")</script>&:0'


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, laion_path):
    """A study labelled by the real models: 3 portraits + 40 LFW faces (training) and one
    generated image whose id carries HTML."""
    from corpus_audit.core.pipeline import init_study

    root = tmp_path_factory.mktemp("validate")
    study = init_study(root / "study", [str(laion_path)])
    seeded = seed_captions(study, laion_path, n=43)
    folder = root / "photos"
    folder.mkdir()
    arrays = [photo("astronaut"), photo("camera"), photo("grace"), *lfw("faces")[:40]]
    for (cid, _, _), array in zip(seeded, arrays, strict=True):
        (folder / f"{cid}.png").write_bytes(encode(array, "PNG"))
    study.config.images.sources = [{"kind": "dir", "path": str(folder)}]
    images(study, progress=False)
    gen = study.path("images", "generated", "evil.png")
    gen.write_bytes(encode(photo("astronaut"), "PNG"))
    study.con.execute(
        "INSERT INTO images (image_id, source, path) VALUES (?, 'generated', ?)",
        [EVIL_ID, "images/generated/evil.png"],
    )
    label(study, progress=False)
    yield study
    study.close()


def _labels(study):
    return dict(
        study.con.execute(
            "SELECT image_id, label FROM labels WHERE classifier = 'agegender'"
        ).fetchall()
    )


def test_allocate_equal_shares_with_leftovers():
    assert allocate({"a": 100, "b": 100}, 10) == {"a": 5, "b": 5}
    assert allocate({"a": 2, "b": 100, "c": 100}, 12) == {"a": 2, "b": 5, "c": 5}
    assert allocate({"a": 1, "b": 2}, 10) == {"a": 1, "b": 2}
    assert sum(allocate({"a": 7, "b": 3, "c": 9}, 11).values()) == 11


def test_export_sheet_is_stratified_self_contained_and_escaped(labelled, tmp_path):
    study = labelled
    labels = _labels(study)
    strata = {label for label in labels.values()}
    assert {"female", "male"} <= strata  # the real labels give at least these strata
    run = export_sheet(study, n=12, out_dir=tmp_path / "sheet")
    assert run.rows_out == 12
    items = study.con.execute(
        "SELECT item, image_id, stratum FROM validation_items ORDER BY item"
    ).fetchall()
    assert [i for i, _, _ in items] == list(range(1, 13))
    counts = {s["stratum"]: s["images"] for s in run.summary}
    assert sum(counts.values()) == 12 and "generated/" + labels[EVIL_ID] in counts
    available = {}
    for image_id, lab in labels.items():
        source = "generated" if image_id.startswith("gen:") else "training"
        available[f"{source}/{lab}"] = available.get(f"{source}/{lab}", 0) + 1
    assert counts == {k: v for k, v in allocate(available, 12).items() if v}

    page = (tmp_path / "sheet" / "sheet.html").read_text(encoding="utf-8")
    assert page.count("<figure") == 12
    assert page.count('src="data:image/jpeg;base64,') == 12
    assert not re.search(r"(src|href)=\"(https?:|//)", page)  # nothing fetched from outside
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in page
    assert "agegender" not in page and "p_female" not in page  # blind: no classifier labels
    with open(tmp_path / "sheet" / "sheet.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["image_id"] for r in rows] == [i for _, i, _ in items]

    again = export_sheet(study, n=12, out_dir=tmp_path / "sheet2")  # reproducible
    assert (tmp_path / "sheet2" / "sheet.csv").read_text() == (
        tmp_path / "sheet" / "sheet.csv"
    ).read_text()
    assert again.rows_out == 12


def _write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_import_reports_alpha_and_agreement(labelled, tmp_path):
    study = labelled
    export_sheet(study, n=12, out_dir=tmp_path / "s")
    items = study.con.execute(
        "SELECT item, image_id FROM validation_items ORDER BY item"
    ).fetchall()
    labels = _labels(study)
    as_human = {"female": "female", "male": "male", "ambiguous": "unsure"}
    flip = {"female": "male", "male": "female", "unsure": "unsure"}
    truth = {i: as_human[labels[i]] for _, i in items}
    a = _write(tmp_path / "ann_a.csv", ["image_id", "label"], [(i, truth[i]) for i in truth])
    b = _write(tmp_path / "ann_b.csv", ["item", "label"], [(n, truth[i][0]) for n, i in items])
    c_rows = [(i, flip[truth[i]], "carol") for i in truth]
    c_rows[0] = (c_rows[0][0], "", "carol")  # one left blank: not annotated
    c = _write(tmp_path / "whatever.csv", ["image_id", "label", "annotator"], c_rows)

    run = import_labels(study, [a, b, c])
    got = summary_dict(run)
    assert got["annotators"] == 3 and run.rows_out == 12 + 12 + 11
    assert set(study.con.execute("SELECT DISTINCT annotator FROM human_labels").fetchall()) == {
        ("ann_a",),
        ("ann_b",),
        ("carol",),
    }
    # two annotators agree with the classifier, one contradicts it: majority = classifier
    decided = [i for i in truth if truth[i] != "unsure"]
    assert got["images compared (majority and classifier male/female)"] == len(decided)
    assert got["agreement of agegender with majority vote"] == 1.0
    alpha = got["krippendorff_alpha (male/female/unsure)"]
    assert alpha is not None and -1 <= alpha < 0.5  # one annotator flipped everything

    # re-import: carol now agrees; her old labels are replaced, not added
    c2 = _write(
        tmp_path / "carol2.csv",
        ["image_id", "label", "annotator"],
        [(i, truth[i], "carol") for i in truth],
    )
    run2 = import_labels(study, [c2])
    assert study.count("human_labels", "annotator = 'carol'") == 12
    got2 = summary_dict(run2)
    assert got2["krippendorff_alpha (male/female/unsure)"] == pytest.approx(1.0)
    assert got2["agreement of agegender with majority vote"] == 1.0


@pytest.mark.parametrize(
    ("header", "row", "match"),
    [
        (["image_id", "label"], ["train:1", "female"], "unknown image_id"),
        (["item", "label"], ["999", "male"], "not on the sheet"),
        (["image_id", "verdict"], ["x", "male"], "needs a 'label' column"),
        (["image_id", "label"], ["{known}", "maybe"], "is not male, female or unsure"),
    ],
)
def test_import_errors_name_file_and_line(labelled, tmp_path, header, row, match):
    known = next(iter(_labels(labelled)))
    path = _write(tmp_path / "bad.csv", header, [[c.format(known=known) for c in row]])
    before = labelled.count("human_labels")
    with pytest.raises(ValidationError, match=match) as info:
        import_labels(labelled, [path])
    assert str(path) in str(info.value)
    assert labelled.count("human_labels") == before  # nothing half-imported


def test_import_rejects_a_double_label(labelled, tmp_path):
    known = next(iter(_labels(labelled)))
    path = _write(tmp_path / "dup.csv", ["image_id", "label"], [[known, "male"], [known, "f"]])
    with pytest.raises(ValidationError, match=r"dup.csv:3: .* twice"):
        import_labels(labelled, [path])


def test_alpha_by_hand_and_majority():
    # 2 coders, units (a,a) (a,b) (b,b) (b,b): D_o = 2/8, D_e = 2*3*5/(8*7) -> alpha = 8/15
    votes = {
        "1": {"x": "male", "y": "male"},
        "2": {"x": "male", "y": "female"},
        "3": {"x": "female", "y": "female"},
        "4": {"x": "female", "y": "female"},
    }
    assert reliability(votes) == pytest.approx(8 / 15)
    assert reliability({"1": {"x": "male"}}) is None  # one annotator: undefined
    with_unsure = {**votes, "5": {"x": "unsure", "y": "male"}}
    assert reliability(with_unsure, drop_unsure=True) == pytest.approx(8 / 15)
    assert majority(["male", "male", "female"]) == "male"
    assert majority(["male", "female"]) is None
    assert majority(["unsure", "unsure", "male"]) == "unsure"


def test_sheet_asks_skin_tone_age_and_quality_and_race_only_on_request(labelled, tmp_path):
    run = export_sheet(labelled, n=4, out_dir=tmp_path / "plain")
    page = Path(run.outputs["sheet"]).read_text(encoding="utf-8")
    assert page.count('title="Monk ') == 4 * 10 and "#292420" in page  # the ten swatches
    assert "Math.random" in page and "swatch_order" in page  # shuffled per annotator, recorded
    assert 'value="under_16"' in page and 'value="poor"' in page
    assert "perceived race" not in page and 'name="r1"' not in page
    header = Path(run.outputs["csv"]).read_text(encoding="utf-8").splitlines()[0]
    assert header == "item,image_id,label,monk,age_bin,quality"
    opted = export_sheet(labelled, n=4, out_dir=tmp_path / "race", race=True)
    page = Path(opted.outputs["sheet"]).read_text(encoding="utf-8")
    assert "perceived race or ethnicity" in page and "No model estimates it" in page
    assert Path(opted.outputs["csv"]).read_text(encoding="utf-8").splitlines()[0].endswith(",race")


def test_import_further_answers_and_ordinal_alpha(labelled, tmp_path):
    import krippendorff
    import numpy as np

    export_sheet(labelled, n=6, out_dir=tmp_path / "s")
    ids = [r[0] for r in labelled.con.execute("SELECT image_id FROM validation_items").fetchall()]
    tones_x, tones_y = [2, 3, 5, 6, 8, 9], [2, 4, 5, 7, 8, 10]
    header = ["image_id", "label", "monk", "age_bin", "quality", "annotator"]
    x = _write(tmp_path / "x.csv", header,
               [(i, "", t, "25-34", "ok", "x") for i, t in zip(ids, tones_x, strict=True)])  # fmt: skip
    y_rows = [(i, "", t, "25_34", "poor", "y") for i, t in zip(ids, tones_y, strict=True)]
    y_rows[0] = (ids[0], "", "can't tell", "can't tell", "poor", "y")
    y = _write(tmp_path / "y.csv", header, y_rows)
    run = import_labels(labelled, [x, y])
    stored = labelled.con.execute(
        "SELECT monk, age_bin, quality, label FROM human_labels WHERE annotator = 'y' "
        "AND image_id = ?", [ids[0]]
    ).fetchone()  # fmt: skip
    assert stored == (None, None, "poor", "")  # can't tell is no answer
    alpha = labelled.con.execute(
        "SELECT alpha, alpha_kind, n_items FROM validation_agreement "
        "WHERE attribute = 'skin_tone' AND source = 'pooled'"
    ).fetchone()
    data = np.array([tones_x, [np.nan, *tones_y[1:]]], dtype=float)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert alpha[1] == "ordinal" and alpha[2] == 5 and alpha[0] == pytest.approx(expected)
    assert any("skin_tone (ordinal" in str(r["metric"]) for r in run.summary)
    bad = _write(tmp_path / "bad.csv", header, [(ids[0], "", "11", "", "", "z")])
    with pytest.raises(ValidationError, match=r"bad.csv:2: monk '11' is not 1-10"):
        import_labels(labelled, [bad])
    bad_age = _write(tmp_path / "bad2.csv", header, [(ids[0], "", "", "elderly", "", "z")])
    with pytest.raises(ValidationError, match=r"bad2.csv:2: age_bin 'elderly'"):
        import_labels(labelled, [bad_age])


def test_quotas_per_tone_and_age_group(labelled, tmp_path):
    """--by-attributes: strata split by the perceived tone and age group of each image, and
    every such group of each source and label gets an equal quota (a small group is taken
    whole); the analysis then weighs by those strata."""
    from collections import Counter

    from corpus_audit.methods.stats import allocate
    from corpus_audit.stages.analyze.strata import prepare_strata

    export_sheet(labelled, n=12, out_dir=tmp_path / "plain")
    plain = Counter(labelled.column("SELECT stratum FROM validation_items"))
    assert prepare_strata(labelled) is False
    run = export_sheet(labelled, n=12, out_dir=tmp_path / "groups", by_attributes=True)
    assert run.provenance["by_attributes"] is True
    drawn = Counter(labelled.column("SELECT stratum FROM validation_items"))
    assert all(len(s.split("/")) == 4 for s in drawn)
    available = Counter(
        labelled.column(
            "SELECT i.source || '/' || l.label || '/' || g.tone_group || '/' || g.age_group "
            "FROM labels l JOIN images i USING (image_id) "
            "JOIN validation_groups g USING (image_id)"
        )
    )
    assert len(available) > len(plain)  # finer strata than (source, label)
    want = {s: k for s, k in allocate(dict(available), 12).items() if k}
    assert dict(drawn) == want
    assert prepare_strata(labelled) is True
