"""Perceived gender of each person of a PST image, by position (METHODS 2 "Labelling").

For every kept image (two persons for paired and power prompts, one for single prompts; see
:mod:`corpus_audit.methods.pst.positions`) each person is cut out with the crop box grown around the
face (:func:`corpus_audit.methods.pst.positions.crop_box`) and the crop, with the face box moved into
its coordinates, goes to a perceived-gender classifier of :mod:`corpus_audit.backends.classifiers`.
Cutting the person out first makes any classifier see one person: ``agegender`` aligns its
chip inside the face box as on the whole image, ``clip`` classifies the crop (with
``crop_to_face`` it crops the same box again, which changes nothing), and a whole-image
classifier added later cannot mix the two persons up (whole-image VQA fails on two-person
images, as the PST paper reports).

The label of a person follows :func:`corpus_audit.methods.faces.decide` at ``threshold``:
``female`` / ``male`` when the winning probability reaches it, else ``ambiguous``. Each person
row records the prompt's role for that side and the role's stereotyped gender, so the score
(:mod:`corpus_audit.methods.pst.score`) needs no join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from corpus_audit.methods.faces import FACE_CROP_MARGIN, Face, FaceResult, decide
from corpus_audit.methods.lexicon.pst import PstPrompt
from corpus_audit.methods.pst.positions import PairResult, crop_box, people_of

# Columns of classify_people(): one row per classified person (the study's PST person table).
PERSON_COLUMNS = (
    "image_id",
    "prompt_id",  # the PST prompt the image was generated from
    "kind",  # single | paired | power
    "variant",  # plain | fair
    "side",  # left | right | single
    "face_index",  # faces.face_index of this person's face (0 = leftmost detected face)
    "role",  # the role the prompt put on this side
    "stereotype",  # male | female: that role's stereotyped gender
    "occupation",  # power prompts: the shared occupation, else NULL
    "perceived",  # female | male | ambiguous (classifier's label at `threshold`)
    "p_female",  # classifier probability of a perceived woman, in [0, 1]
    "confidence",  # winning probability max(p_female, 1 - p_female), in [0.5, 1]
    "classifier",  # classifier id, e.g. 'agegender', 'clip:ViT-L-14/openai+face'
    "threshold",  # label threshold in [0.5, 1]
    "crop_left",  # crop box given to the classifier, pixels of the image;
    "crop_top",  # right and bottom exclusive
    "crop_right",
    "crop_bottom",
)


@dataclass(frozen=True)
class PstImage:
    """One decoded PST image: ``pixels`` ``(H, W, 3)`` uint8 RGB, the ``prompt`` it was made
    from, and its face rule outcome (:class:`PairResult` for two-person prompts,
    :class:`~corpus_audit.methods.faces.FaceResult` for single prompts)."""

    image_id: str
    pixels: np.ndarray
    prompt: PstPrompt
    faces: PairResult | FaceResult


def person_crop(
    pixels: np.ndarray, face: Face, margin: float = FACE_CROP_MARGIN
) -> tuple[np.ndarray, Face, tuple[int, int, int, int]]:
    """``(crop, face in crop coordinates, crop box)`` of one person of ``pixels``."""
    height, width = pixels.shape[:2]
    left, top, right, bottom = crop_box(face, width, height, margin)
    crop = np.ascontiguousarray(pixels[top:bottom, left:right])
    moved = Face(face.x - left, face.y - top, face.w, face.h, face.score)
    return crop, moved, (left, top, right, bottom)


def classify_people(
    items: Iterable[PstImage],
    classifier: Any,
    *,
    threshold: float = 0.9,
    margin: float = FACE_CROP_MARGIN,
    batch_size: int = 64,
) -> pd.DataFrame:
    """Per-person rows (:data:`PERSON_COLUMNS`) for the kept persons of ``items``.

    ``classifier``: a :class:`corpus_audit.backends.classifiers.GenderClassifier` (``p_female(images,
    faces)``); ``threshold`` in [0.5, 1]; ``margin`` >= 0 grows each face box by that
    fraction of its size on every side; ``batch_size`` >= 1 crops per classifier call.
    Dropped images give no row (their reasons are in the face rule's table). Rows come in
    input order, left before right.
    """
    if not 0.5 <= threshold <= 1.0:
        raise ValueError(f"threshold {threshold} is not in [0.5, 1]")
    if batch_size < 1:
        raise ValueError(f"batch_size {batch_size} must be >= 1")
    meta: list[tuple] = []
    crops: list[np.ndarray] = []
    boxes: list[Face] = []
    for item in items:
        for side, face_index, face in people_of(item.faces):
            role, stereotype = item.prompt.role_of(side)
            crop, moved, box = person_crop(item.pixels, face, margin)
            crops.append(crop)
            boxes.append(moved)
            meta.append((item, side, face_index, role, stereotype, box))
    probs = _p_female(classifier, crops, boxes, batch_size)
    cid = str(getattr(classifier, "id", type(classifier).__name__))
    rows = []
    for (item, side, face_index, role, stereotype, box), p in zip(meta, probs, strict=True):
        p = float(min(1.0, max(0.0, p)))
        prompt = item.prompt
        rows.append(
            (
                item.image_id, prompt.prompt_id, prompt.kind, prompt.variant, side, face_index,
                role, stereotype, prompt.occupation, decide(p, threshold), p, max(p, 1.0 - p),
                cid, float(threshold), *box,
            )
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(PERSON_COLUMNS))


def _p_female(
    classifier: Any, crops: Sequence[np.ndarray], faces: Sequence[Face], batch_size: int
) -> np.ndarray:
    parts = [
        np.asarray(
            classifier.p_female(crops[i : i + batch_size], faces[i : i + batch_size]), dtype=float
        )
        for i in range(0, len(crops), batch_size)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=float)
