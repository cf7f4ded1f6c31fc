"""Two-person face rule of the Paired Stereotype Test: keep, drop, left and right (pure).

A PST image is kept when it holds **exactly two large faces**: a face is large when its box is
at least ``min_face_fraction`` (default 10 %, as the one-face rule of METHODS 1.4) of the image
height or width. The two are ordered by box centre x (:func:`corpus_audit.methods.faces.order_left_to_right`,
the order the ``faces`` table stores), so the first is the person on the left. Drop reasons,
named like the one-face filter's (``corpus_audit.backends.faces.DROP_REASONS``):

- ``no_face``: nothing detected;
- ``one_face``: exactly one face was detected, and it is large (one person drawn);
- ``small_face``: fewer than two large faces, and at least one detected face is small
  (a person drawn too small to classify, or a crowd in the background);
- ``many_faces``: three or more large faces; with ``count_small_faces`` also two large faces
  plus any small one (the strict reading: "exactly two faces");
- ``unreadable``: set by the caller when the image did not decode.

Small extra faces are ignored by default, as in the one-face rule. Left and right are
*relative* positions: a prompt asks for X1 on the left and X2 on the right, and the person
whose face is further left is read as X1 even when both stand in one half of the picture (the
PST paper's per-face route: "detect two faces, order by x, classify each crop").

Each kept person has a crop box for the classifier: the face box grown by
:data:`corpus_audit.methods.faces.FACE_CROP_MARGIN` (0.5 x its size on each side) and clipped to
the image, the same box ``label.crop_to_face`` uses (:func:`corpus_audit.methods.faces.face_crop_box`).
Everything here is pure: boxes in, decisions out; no model, no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from corpus_audit.methods.faces import (
    DEFAULT_FACE_RULE,
    FACE_CROP_MARGIN,
    Face,
    FaceResult,
    FaceRule,
    face_crop_box,
    order_left_to_right,
)

DROP_REASONS = ("no_face", "one_face", "small_face", "many_faces", "unreadable")
SIDES = ("left", "right")

# Columns of pair_table(): one row per image (the PST face filter's table).
PAIR_COLUMNS = (
    "image_id",
    "n_faces",  # faces detected (score >= the detector's minimum confidence); NULL if unreadable
    "n_large",  # of which large (>= min_face_fraction of the image height or width)
    "kept",  # exactly two large faces (see the module docstring)
    "reason",  # NULL when kept; no_face | one_face | small_face | many_faces | unreadable
    "left_face",  # faces.face_index of the left person (NULL when dropped)
    "right_face",  # faces.face_index of the right person (NULL when dropped)
)


@dataclass(frozen=True)
class PairResult:
    """The two-face rule's outcome for one image.

    ``faces``: every detected face, left to right; ``left_face`` / ``right_face`` index
    ``faces`` (None when dropped); ``reason`` None when kept, else one of
    :data:`DROP_REASONS`.
    """

    faces: tuple[Face, ...]
    width: int
    height: int
    kept: bool
    reason: str | None
    n_large: int
    left_face: int | None = None
    right_face: int | None = None

    def people(self) -> list[tuple[str, int, Face]]:
        """``[(side, face index, face)]`` of the kept persons, left first ([] when dropped)."""
        if not self.kept or self.left_face is None or self.right_face is None:
            return []
        return [
            ("left", self.left_face, self.faces[self.left_face]),
            ("right", self.right_face, self.faces[self.right_face]),
        ]


def pair_filter(
    faces: Sequence[Face], width: int, height: int, rule: FaceRule = DEFAULT_FACE_RULE
) -> PairResult:
    """Apply the two-face rule (module docstring) to the detected ``faces`` of an image of
    ``width`` x ``height`` pixels (``rule``: what counts, :class:`FaceRule`)."""
    ordered = order_left_to_right(faces)
    large = rule.large(ordered, width, height)
    n = len(ordered)

    def drop(reason: str) -> PairResult:
        return PairResult(ordered, width, height, False, reason, len(large))

    if n == 0:
        return drop("no_face")
    if len(large) > 2 or (len(large) == 2 and rule.count_small_faces and n > 2):
        return drop("many_faces")
    if len(large) == 2:
        return PairResult(ordered, width, height, True, None, 2, large[0], large[1])
    if n == 1 and large:
        return drop("one_face")
    return drop("small_face")


def people_of(result: PairResult | FaceResult) -> list[tuple[str, int, Face]]:
    """The persons to classify: two (``left``, ``right``) for a kept :class:`PairResult`, one
    (``single``) for a kept one-face :class:`~corpus_audit.methods.faces.FaceResult`, else none."""
    if isinstance(result, PairResult):
        return result.people()
    face = result.face
    if not result.kept or face is None or result.kept_face is None:
        return []
    return [("single", result.kept_face, face)]


def crop_box(
    face: Face, width: int, height: int, margin: float = FACE_CROP_MARGIN
) -> tuple[int, int, int, int]:
    """The classifier's crop of one person: ``(left, top, right, bottom)`` pixels, right and
    bottom exclusive (see the module docstring)."""
    return face_crop_box(face, width, height, margin)


def pair_table(
    images: pd.DataFrame, faces: pd.DataFrame, rule: FaceRule = DEFAULT_FACE_RULE
) -> pd.DataFrame:
    """The two-face rule (``rule``: what counts) over stored detections, without running a
    detector again.

    ``images``: ``image_id``, ``image_width``, ``image_height`` (pixels; NULL = unreadable),
    as in the ``face_filter`` table. ``faces``: ``image_id``, ``face_index``, ``x``, ``y``,
    ``w``, ``h``, ``score``, as in the ``faces`` table (images with no face have no row).
    Returns one row per image with the columns :data:`PAIR_COLUMNS`, in ``images`` order;
    ``left_face``/``right_face`` are ``face_index`` values.
    """
    missing = [c for c in ("image_id", "image_width", "image_height") if c not in images]
    missing += [
        c for c in ("image_id", "face_index", "x", "y", "w", "h", "score") if c not in faces
    ]
    if missing:
        raise ValueError(f"pair_table: missing column(s) {', '.join(missing)}")
    by_image: dict[str, list[tuple[int, Face]]] = {}
    for row in faces.sort_values(["image_id", "face_index"]).itertuples(index=False):
        face = Face(float(row.x), float(row.y), float(row.w), float(row.h), float(row.score))
        by_image.setdefault(str(row.image_id), []).append((int(row.face_index), face))
    rows = []
    for image_id, width, height in images[["image_id", "image_width", "image_height"]].itertuples(
        index=False
    ):
        found = by_image.get(str(image_id), [])
        if pd.isna(width) or pd.isna(height):
            rows.append((image_id, None, None, False, "unreadable", None, None))
            continue
        result = pair_filter([f for _, f in found], int(width), int(height), rule)
        stored = {id(f): i for i, f in found}  # the filter reorders the same Face objects
        index = [stored[id(f)] for f in result.faces]
        rows.append(
            (
                image_id,
                len(found),
                result.n_large,
                result.kept,
                result.reason,
                None if result.left_face is None else index[result.left_face],
                None if result.right_face is None else index[result.right_face],
            )
        )
    out = pd.DataFrame(rows, columns=list(PAIR_COLUMNS))
    for col in ("n_faces", "n_large", "left_face", "right_face"):
        out[col] = out[col].astype("Int64")
    return out
