"""The two-face rule and per-person labels: pure cases with hand-made boxes, then real photos
of a woman and a man composed side by side, through the real MediaPipe detector and the real
agegender classifier, in both orders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import skimage.data
from image_fixtures import photo, shared_agegender, shared_detector, small_face
from pst_fixtures import LABEL_THRESHOLD, person, side_by_side

from corpus_audit.backends.faces import Face, FaceRule, face_filter
from corpus_audit.methods.lexicon.pst import load_prompts
from corpus_audit.methods.pst.persons import PERSON_COLUMNS, PstImage, classify_people, person_crop
from corpus_audit.methods.pst.positions import PAIR_COLUMNS, crop_box, pair_filter, pair_table


def box(x: float, w: float, y: float = 10.0, score: float = 0.9) -> Face:
    return Face(x, y, w, w, score)


# -- the rule on hand-made boxes (a 1000 x 500 image: large means w or h >= 50 px) ------------
def test_two_large_faces_are_kept_left_to_right_whatever_the_input_order():
    right, left = box(700, 120), box(100, 60)
    result = pair_filter([right, left], 1000, 500)
    assert result.kept and result.reason is None and result.n_large == 2
    assert result.faces == (left, right)
    assert result.people() == [("left", 0, left), ("right", 1, right)]


@pytest.mark.parametrize(
    ("faces", "reason"),
    [
        ([], "no_face"),
        ([box(100, 80)], "one_face"),
        ([box(100, 30)], "small_face"),  # one face, too small
        ([box(100, 80), box(600, 30)], "small_face"),  # the second person is too small
        ([box(100, 30), box(600, 30)], "small_face"),
        ([box(100, 80), box(400, 80), box(700, 80)], "many_faces"),
    ],
)
def test_drop_reasons(faces, reason):
    result = pair_filter(faces, 1000, 500)
    assert not result.kept and result.reason == reason and result.people() == []
    assert result.left_face is None and result.right_face is None


def test_small_extra_faces_are_ignored_unless_counted():
    faces = [box(100, 80), box(450, 20), box(700, 80)]
    loose = pair_filter(faces, 1000, 500)
    assert loose.kept and (loose.left_face, loose.right_face) == (0, 2)
    strict = pair_filter(faces, 1000, 500, FaceRule(count_small_faces=True))
    assert strict.reason == "many_faces"


def test_large_is_measured_on_height_or_width():
    tall = Face(100, 0, 20, 60, 0.9)  # 20 px wide (< 10 % of 1000) but 60 px high (>= 50)
    assert pair_filter([tall, box(500, 80)], 1000, 500).kept
    assert pair_filter([tall, box(500, 80)], 1000, 500, FaceRule(0.2)).reason == "small_face"


def test_crop_box_is_the_face_grown_by_half_its_size_and_clipped():
    # face 40 x 40 at (100, 10): grown by 20 px on every side -> (80, -10, 160, 70), top clipped
    assert crop_box(Face(100, 10, 40, 40, 0.9), 1000, 500) == (80, 0, 160, 70)
    assert crop_box(Face(980, 480, 40, 40, 0.9), 1000, 500) == (960, 460, 1000, 500)
    assert crop_box(Face(100, 100, 40, 40, 0.9), 1000, 500, margin=0.0) == (100, 100, 140, 140)


def test_pair_table_from_stored_rows():
    images = pd.DataFrame(
        {
            "image_id": ["a", "b", "c", "d"],
            "image_width": [1000, 1000, None, 1000],
            "image_height": [500, 500, None, 500],
        }
    )
    # image a: stored face_index order is left to right, as the label stage writes it
    faces = pd.DataFrame(
        [
            ("a", 0, 100, 10, 80, 80, 0.9),
            ("a", 1, 700, 10, 80, 80, 0.8),
            ("b", 0, 300, 10, 90, 90, 0.9),
        ],
        columns=["image_id", "face_index", "x", "y", "w", "h", "score"],
    )
    out = pair_table(images, faces)
    assert list(out.columns) == list(PAIR_COLUMNS)
    rows = {r.image_id: r for r in out.itertuples(index=False)}
    assert rows["a"].kept and (rows["a"].left_face, rows["a"].right_face) == (0, 1)
    assert (rows["b"].reason, rows["b"].n_faces, rows["b"].n_large) == ("one_face", 1, 1)
    assert rows["c"].reason == "unreadable" and pd.isna(rows["c"].n_faces)
    assert (rows["d"].reason, rows["d"].n_faces) == ("no_face", 0)
    with pytest.raises(ValueError, match="missing column"):
        pair_table(images.drop(columns=["image_width"]), faces)


# -- real photos ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def detector():
    return shared_detector()


@pytest.fixture(scope="module")
def agegender():
    return shared_agegender()


@pytest.fixture(scope="module")
def prompts():
    return {p.prompt_id: p for p in load_prompts(kinds=("single", "paired"), fair=False)}


def detect(detector, image):
    return pair_filter(detector.detect(image), image.shape[1], image.shape[0])


@pytest.mark.parametrize("order", [("woman", "man"), ("man", "woman")])
def test_positions_and_labels_of_a_woman_and_a_man_in_both_orders(
    detector, agegender, prompts, order
):
    image = side_by_side(*order)
    result = detect(detector, image)
    assert result.kept and len(result.faces) == 2
    left, right = result.faces
    assert left.center_x < 300 < right.center_x  # each face in its own photo
    prompt = prompts["pst:paired:plain:editor:carpenter"]  # editor (female) left
    people = classify_people(
        [PstImage("img", image, prompt, result)], agegender, threshold=LABEL_THRESHOLD
    )
    assert list(people.columns) == list(PERSON_COLUMNS)
    assert list(people["side"]) == ["left", "right"]
    assert list(people["role"]) == ["editor", "carpenter"]
    assert list(people["stereotype"]) == ["female", "male"]
    assert list(people["perceived"]) == ["female" if n == "woman" else "male" for n in order]
    assert list(people["face_index"]) == [0, 1]
    for row, name in zip(people.itertuples(index=False), order, strict=True):
        assert row.confidence == pytest.approx(max(row.p_female, 1 - row.p_female))
        assert row.classifier == "agegender" and row.threshold == LABEL_THRESHOLD
        assert (row.p_female > 0.8) if name == "woman" else (row.p_female < 0.1)
        # the crop is the face grown by half its size, inside the person's own photo
        face = result.faces[row.face_index]
        half = 0 if row.side == "left" else 300
        expected = (
            max(0, round(face.x - 0.5 * face.w)),
            max(0, round(face.y - 0.5 * face.h)),
            min(600, round(face.x + 1.5 * face.w)),
            min(300, round(face.y + 1.5 * face.h)),
        )
        got = (row.crop_left, row.crop_top, row.crop_right, row.crop_bottom)
        assert got == expected
        assert half <= (row.crop_left + row.crop_right) / 2 < half + 300


def test_the_crop_gives_the_label_of_the_whole_image(detector, agegender):
    """agegender aligns its chip inside the face box, so classifying the grown crop (face box
    moved into it) equals classifying the face on the whole composite."""
    image = side_by_side("woman", "man")
    result = detect(detector, image)
    whole = agegender.p_female([image, image], list(result.faces))
    crops = [person_crop(image, f) for f in result.faces]
    cropped = agegender.p_female([c for c, _, _ in crops], [f for _, f, _ in crops])
    np.testing.assert_allclose(cropped, whole, atol=1e-3)
    crop, moved, (left, top, _, _) = crops[0]
    np.testing.assert_array_equal(crop[0, 0], image[top, left])
    assert (moved.x + left, moved.y + top) == (result.faces[0].x, result.faces[0].y)


def test_images_with_another_count_of_faces_are_dropped_with_their_reason(
    detector, agegender, prompts
):
    cases = {
        "one": (person("woman"), "one_face"),
        "three": (side_by_side("woman", "man", "woman"), "many_faces"),
        "small": (small_face(), "small_face"),
        "none": (skimage.data.coffee(), "no_face"),
    }
    prompt = prompts["pst:paired:plain:carpenter:nurse"]
    items = []
    for image_id, (image, reason) in cases.items():
        result = detect(detector, image)
        assert result.reason == reason, image_id
        items.append(PstImage(image_id, image, prompt, result))
    items.append(
        PstImage(
            "pair",
            side_by_side("man", "woman"),
            prompt,
            detect(detector, side_by_side("man", "woman")),
        )
    )
    people = classify_people(items, agegender, threshold=LABEL_THRESHOLD)
    assert set(people["image_id"]) == {"pair"}  # dropped images give no person
    assert list(people["perceived"]) == ["male", "female"]  # carpenter man, nurse woman


def test_single_prompts_use_the_one_face_rule(detector, agegender, prompts):
    image = photo("camera")
    result = face_filter(detector.detect(image), image.shape[1], image.shape[0])
    prompt = prompts["pst:single:plain:nurse"]
    people = classify_people([PstImage("s", image, prompt, result)], agegender, threshold=0.8)
    assert list(
        people[["side", "role", "stereotype", "perceived"]].itertuples(index=False, name=None)
    ) == [("single", "nurse", "female", "male")]
    empty = classify_people([], agegender)
    assert list(empty.columns) == list(PERSON_COLUMNS) and empty.empty


def test_bad_arguments(agegender):
    with pytest.raises(ValueError, match="threshold"):
        classify_people([], agegender, threshold=0.3)
    with pytest.raises(ValueError, match="batch_size"):
        classify_people([], agegender, batch_size=0)
    prompt = load_prompts(kinds=("single",))[0]
    with pytest.raises(ValueError, match="no person on side 'right'"):
        prompt.role_of("right")
