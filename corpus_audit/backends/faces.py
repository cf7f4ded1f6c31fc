"""Face detection and the one-face filter of METHODS 1.4 step 1.

A face detector is anything with a ``name`` and ``detect(image) -> list[Face]`` (see
:class:`FaceDetector`); :data:`FACE_DETECTORS` maps config names to factories
(``label.face_detector``). The default is MediaPipe's Tasks ``FaceDetector`` with the
short-range model (``face_detection_short_range.tflite``, the detector MediaPipe's Tasks page
offered when the paper was written); the full-range sparse model
(``face_detection_full_range_sparse.tflite``) is ``label.face_model = "full_range"``. Both are
read from the model folder of :mod:`corpus_audit.core.model_dir` (``label.model_dir``, else
``$CORPUS_AUDIT_MODEL_DIR``, else the user's cache; ``corpus-audit fetch-models`` writes them).

Measured keep rate on real photos of one clear face (``tests/backends/test_face_keep_rate.py``: the
100 LFW faces of scikit-image presented twice as a photo would show them, and three full
photos): short range 198 of 203 (97.5 %), full range 167 of 203 (82.3 %); the full-range
model misses many close, tightly framed faces, which is what portrait and celebrity photos
hold.

The filter (:func:`face_filter`) keeps an image when exactly one detected face has a box of at
least ``min_face_fraction`` (default 10 %) of the image height or width. Drop reasons:
``no_face`` (nothing detected), ``small_face`` (faces, but none large enough), ``many_faces``
(two or more large faces; with ``count_small_faces`` any second face counts), and
``unreadable`` (set by the caller when the image did not decode). Faces are always returned
ordered left to right (by box centre), so a two-person image gives the left person first.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from corpus_audit.core.errors import ModelError
from corpus_audit.core.model_dir import model_dir as chosen
from corpus_audit.core.native_logs import quiet_native_logs
from corpus_audit.core.registry import Registry
from corpus_audit.methods.faces import (  # noqa: F401  (re-exported)
    DEFAULT_FACE_RULE,
    Face,
    FaceResult,
    FaceRule,
    is_large,
    order_left_to_right,
)

MODEL_FILES = {
    "full_range": "face_detection_full_range_sparse.tflite",
    "short_range": "face_detection_short_range.tflite",
}
DROP_REASONS = ("no_face", "many_faces", "small_face", "unreadable")
_OPEN_DETECTORS: weakref.WeakSet[Any] = weakref.WeakSet()


@atexit.register
def _close_open_detectors() -> None:
    """Close MediaPipe graphs before interpreter teardown (their __del__ fails during it)."""
    for detector in list(_OPEN_DETECTORS):
        with contextlib.suppress(Exception):
            detector.close()


@runtime_checkable
class FaceDetector(Protocol):
    """What the label stage needs from a face detector."""

    name: str  # id its rows get: face_filter.detector, e.g. 'mediapipe:full_range'
    provenance: dict[str, Any]  # recorded in the label run: model file, settings

    def detect(self, image: np.ndarray) -> list[Face]:
        """Faces in an ``(H, W, 3)`` uint8 RGB image, any order."""
        ...

    def close(self) -> None:
        """Release the model (idempotent); ``detect`` is not called afterwards."""
        ...


def face_filter(
    faces: Sequence[Face], width: int, height: int, rule: FaceRule = DEFAULT_FACE_RULE
) -> FaceResult:
    """Apply the one-face rule to detected ``faces`` of a ``width`` x ``height`` image: kept
    when exactly one face is large (``rule``: what counts, :class:`FaceRule`); with
    ``rule.count_small_faces`` an image with one large face and any other face is
    ``many_faces``."""
    ordered = order_left_to_right(faces)
    if not ordered:
        return FaceResult(ordered, width, height, False, "no_face")
    large = rule.large(ordered, width, height)
    if len(large) >= 2 or (rule.count_small_faces and large and len(ordered) >= 2):
        return FaceResult(ordered, width, height, False, "many_faces")
    if not large:
        return FaceResult(ordered, width, height, False, "small_face")
    return FaceResult(ordered, width, height, True, None, kept_face=large[0])


def model_dir(setting: str | None = None) -> Path:
    """The model folder (:func:`corpus_audit.core.model_dir.model_dir`)."""
    return chosen(setting)


def face_model_setting(face_model: str, model_dir_setting: str = "") -> str:
    """``label.face_model`` as the detector gets it: a built-in name, or its file in
    ``label.model_dir`` when that setting is given."""
    if model_dir_setting and face_model in MODEL_FILES:
        return str(model_dir(model_dir_setting) / MODEL_FILES[face_model])
    return face_model


def resolve_face_model(face_model: str) -> Path:
    """``full_range`` / ``short_range`` (files in :func:`model_dir`) or a ``.tflite`` path."""
    if face_model in MODEL_FILES:
        path = model_dir() / MODEL_FILES[face_model]
        hint = (
            "run `corpus-audit fetch-models` to download it there (or set "
            "CORPUS_AUDIT_MODEL_DIR or label.model_dir to the folder holding it)"
        )
    else:
        path = Path(face_model).expanduser()
        hint = "label.face_model must be full_range, short_range or a .tflite file"
    if not path.is_file() or path.stat().st_size == 0:
        raise ModelError(f"{path}: MediaPipe face model not found; {hint}")
    return path


class MediaPipeFaceDetector:
    """MediaPipe Tasks ``FaceDetector`` (IMAGE mode) on a local ``.tflite`` model.

    ``face_model``: ``short_range`` (default, the paper's; METHODS 1.4), ``full_range`` or a path;
    ``min_detection_confidence`` in [0, 1] (default 0.5). ``detect`` is serialised by a lock
    (one MediaPipe graph per instance).
    """

    def __init__(self, face_model: str = "short_range", min_detection_confidence: float = 0.5):
        self.model_path = resolve_face_model(face_model)
        self.min_detection_confidence = float(min_detection_confidence)
        label = face_model if face_model in MODEL_FILES else self.model_path.name
        self.name = f"mediapipe:{label}"
        try:
            with quiet_native_logs():  # LiteRT/absl log to fd 2 as they load
                import mediapipe as mp
                from mediapipe.tasks import python as mp_tasks
                from mediapipe.tasks.python import vision
        except ImportError as exc:  # pragma: no cover - the image extra installs it
            raise ModelError(
                f"mediapipe is not installed ({exc}); pip install 'corpus_audit[image]'"
            ) from None
        self._mp = mp
        options = vision.FaceDetectorOptions(
            base_options=mp_tasks.BaseOptions(model_asset_path=str(self.model_path)),
            running_mode=vision.RunningMode.IMAGE,
            min_detection_confidence=self.min_detection_confidence,
        )
        try:
            with quiet_native_logs():
                self._detector = vision.FaceDetector.create_from_options(options)
        except Exception as exc:
            raise ModelError(
                f"{self.model_path}: MediaPipe cannot load this model: {exc}"
            ) from None
        self._lock = threading.Lock()
        self._ran = False  # the first image logs LiteRT's alignment warning
        _OPEN_DETECTORS.add(self)
        self.provenance = {
            "detector": self.name,
            "model_file": str(self.model_path),
            "min_detection_confidence": self.min_detection_confidence,
        }

    def detect(self, image: np.ndarray) -> list[Face]:
        """Faces with score >= ``min_detection_confidence``, boxes in pixels."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
        mp_image = self._mp.Image(
            image_format=self._mp.ImageFormat.SRGB, data=np.ascontiguousarray(image)
        )
        with self._lock:
            if self._detector is None:
                raise RuntimeError("detector is closed")
            if self._ran:
                result = self._detector.detect(mp_image)
            else:
                with quiet_native_logs():
                    result = self._detector.detect(mp_image)
                self._ran = True
        faces = []
        for det in result.detections:
            box = det.bounding_box
            score = max((c.score for c in det.categories), default=0.0)
            if score is None or score < self.min_detection_confidence:
                continue
            faces.append(
                Face(
                    float(box.origin_x),
                    float(box.origin_y),
                    float(box.width),
                    float(box.height),
                    float(score),
                )
            )
        return faces

    def close(self) -> None:
        """Release the MediaPipe graph (idempotent)."""
        with self._lock:
            if self._detector is not None:
                with quiet_native_logs():
                    self._detector.close()
                self._detector = None


# config name (label.face_detector) -> factory(face_model=, min_detection_confidence=);
# config validation takes its names from here
FACE_DETECTORS: Registry[Callable[..., FaceDetector]] = Registry("face detector")
FACE_DETECTORS.register("mediapipe", MediaPipeFaceDetector)


def get_face_detector(name: str, **options: Any) -> FaceDetector:
    """Build the detector registered as ``name`` (``label.face_detector``)."""
    if name not in FACE_DETECTORS:
        raise ModelError(
            f"label.face_detector: unknown detector {name!r} (known: {', '.join(FACE_DETECTORS)})"
        )
    return FACE_DETECTORS.get(name)(**options)
