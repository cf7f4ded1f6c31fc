"""Face filter through the real MediaPipe full-range model on real photos."""

from __future__ import annotations

import numpy as np
import pytest
import skimage.data
from image_fixtures import lfw, photo, shared_detector, small_face, two_people

from corpus_audit.backends.faces import (
    Face,
    FaceRule,
    MediaPipeFaceDetector,
    face_filter,
    get_face_detector,
    resolve_face_model,
)
from corpus_audit.core.errors import ModelError


@pytest.fixture(scope="module")
def detector():
    return shared_detector()


def run_filter(detector, image, **kwargs):
    return face_filter(detector.detect(image), image.shape[1], image.shape[0], **kwargs)


@pytest.mark.parametrize("name", ["astronaut", "camera", "grace"])
def test_one_face_in_each_portrait(detector, name):
    image = photo(name)
    result = run_filter(detector, image)
    assert result.kept and result.reason is None and len(result.faces) == 1
    face = result.face
    assert face.score >= 0.5
    height, width = image.shape[:2]
    assert face.h >= 0.1 * height
    # the box lies on the head: inside the image, in its upper two thirds
    assert face.x >= 0 and face.x + face.w <= width and 0 <= face.y < 2 * height / 3
    assert detector.name == "mediapipe:full_range"


def test_two_people_are_many_faces_ordered_left_to_right(detector):
    image = two_people()  # astronaut left, cameraman right
    result = run_filter(detector, image)
    assert result.reason == "many_faces" and not result.kept and result.kept_face is None
    assert len(result.faces) == 2
    left, right = result.faces
    assert left.center_x < image.shape[1] / 2 < right.center_x
    # the detector's raw order does not matter: the filter orders them
    flipped = face_filter(list(reversed(result.faces)), image.shape[1], image.shape[0])
    assert flipped.faces == result.faces


def test_small_face_and_no_face(detector):
    small = run_filter(detector, small_face())
    assert small.reason == "small_face" and len(small.faces) == 1
    assert small.faces[0].h < 0.1 * 800 and small.faces[0].w < 0.1 * 800
    for image in (skimage.data.coffee(), skimage.data.chelsea(), skimage.data.rocket()):
        assert run_filter(detector, image).reason == "no_face"


def test_lfw_faces_and_non_faces(detector):
    """skimage's LFW subset: 100 face crops and 100 non-face patches (measured: 69 and 0)."""
    faces = [run_filter(detector, im) for im in lfw("faces")]
    non_faces = [run_filter(detector, im) for im in lfw("non_faces")]
    assert sum(r.kept for r in faces) >= 60
    assert sum(r.kept for r in non_faces) <= 2
    assert {r.reason for r in non_faces if not r.kept} <= {"no_face", "small_face", "many_faces"}


def test_min_detection_confidence_is_applied():
    strict = MediaPipeFaceDetector("full_range", min_detection_confidence=0.95)
    try:
        assert strict.detect(photo("camera")) == []  # its score is ~0.87
    finally:
        strict.close()


def test_short_range_model_and_registry():
    short = get_face_detector("mediapipe", face_model="short_range")
    try:
        assert short.name == "mediapipe:short_range"
        assert run_filter(short, photo("astronaut")).kept
    finally:
        short.close()
    with pytest.raises(ModelError, match="unknown detector"):
        get_face_detector("dlib")


def test_rule_on_plain_boxes():
    big = Face(10, 10, 30, 30, 0.9)  # 30 % of 100 px
    tiny = Face(80, 80, 5, 5, 0.9)
    assert face_filter([], 100, 100).reason == "no_face"
    one_big_one_tiny = face_filter([tiny, big], 100, 100)
    assert one_big_one_tiny.kept and one_big_one_tiny.face == big
    assert one_big_one_tiny.faces == (big, tiny)  # left to right
    assert (
        face_filter([tiny, big], 100, 100, FaceRule(count_small_faces=True)).reason == "many_faces"
    )
    assert face_filter([tiny], 100, 100).reason == "small_face"
    # 10 % of the width is enough even when the height is less than 10 %
    wide = Face(0, 0, 20, 5, 0.9)
    assert face_filter([wide], 200, 400).kept
    assert not face_filter([wide], 201, 400).kept


def test_missing_model_says_how_to_fetch_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CORPUS_AUDIT_MODEL_DIR", str(tmp_path))
    with pytest.raises(ModelError, match="run `corpus-audit fetch-models`"):
        resolve_face_model("full_range")
    with pytest.raises(ModelError, match=r"\.tflite"):
        resolve_face_model(str(tmp_path / "nope.tflite"))


def test_detect_rejects_non_rgb(detector):
    with pytest.raises(ValueError, match="uint8"):
        detector.detect(np.zeros((10, 10), np.float32))
