"""Face boxes and the decisions made on them (pure): no detector, no classifier, no file.

- :class:`Face`: one detected face box in pixels with the detector's score;
  :class:`FaceResult`: the one-face filter's outcome for an image
  (:func:`corpus_audit.backends.faces.face_filter`);
- :func:`order_left_to_right`: faces by box centre x (the order the ``faces`` table stores);
- :func:`is_large`: whether a face is large enough for the one- and two-face rules to count;
  :class:`FaceRule`: what those rules count (the size fraction, small extra faces or not);
- :func:`face_crop_box`: the face box grown by :data:`FACE_CROP_MARGIN` (0.5 x its size on each
  side) and clipped to the image, the crop a classifier sees with ``label.crop_to_face``;
- :func:`decide`: a perceived-gender probability and a threshold in [0.5, 1] -> ``female`` /
  ``male`` / ``ambiguous``.

The detectors and classifiers of :mod:`corpus_audit.backends.faces` and
:mod:`corpus_audit.backends.classifiers` build and use these; the methods (the PST two-face
rule, per-person labels) take them as plain values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FACE_CROP_MARGIN = 0.5  # crop_to_face: box grown by this fraction of its size on every side


@dataclass(frozen=True)
class Face:
    """One detected face: box in pixels (``x``, ``y`` = top-left; may reach outside the image)
    and the detector's confidence ``score`` in [0, 1]."""

    x: float
    y: float
    w: float
    h: float
    score: float

    @property
    def center_x(self) -> float:
        return self.x + self.w / 2.0

    def box_ltrb(self, width: int, height: int) -> tuple[int, int, int, int]:
        """Integer ``(left, top, right, bottom)`` clipped to the image (exclusive right/bottom)."""
        left = int(max(0, min(width - 1, round(self.x))))
        top = int(max(0, min(height - 1, round(self.y))))
        right = int(max(left + 1, min(width, round(self.x + self.w))))
        bottom = int(max(top + 1, min(height, round(self.y + self.h))))
        return left, top, right, bottom


@dataclass(frozen=True)
class FaceResult:
    """Outcome of the face filter for one image.

    ``faces`` are ordered left to right; ``kept_face`` indexes the face that passed (None when
    dropped); ``reason`` is None when kept, else one of
    :data:`corpus_audit.backends.faces.DROP_REASONS`.
    """

    faces: tuple[Face, ...]
    width: int
    height: int
    kept: bool
    reason: str | None
    kept_face: int | None = None

    @property
    def face(self) -> Face | None:
        """The kept face, or None."""
        return None if self.kept_face is None else self.faces[self.kept_face]


def order_left_to_right(faces: Sequence[Face]) -> tuple[Face, ...]:
    """Faces sorted by box centre x (ties by y), leftmost first."""
    return tuple(sorted(faces, key=lambda f: (f.center_x, f.y + f.h / 2.0)))


def is_large(face: Face, width: int, height: int, min_face_fraction: float) -> bool:
    """``face.h >= fraction * height`` or ``face.w >= fraction * width`` (fraction in [0, 1]):
    a face the one- and two-face rules count."""
    return face.h >= min_face_fraction * height or face.w >= min_face_fraction * width


@dataclass(frozen=True)
class FaceRule:
    """What the one-face and two-face rules count (``label.min_face_fraction``,
    ``label.count_small_faces``): a face is large when its box is at least
    ``min_face_fraction`` (in [0, 1]) of the image height or width (:func:`is_large`); with
    ``count_small_faces`` a small face beside the large ones the rule wants makes the image
    ``many_faces``, without it (the default, METHODS' wording "exactly one face whose box is at
    least 10 %") small extra faces are ignored."""

    min_face_fraction: float = 0.10
    count_small_faces: bool = False

    @classmethod
    def of(cls, settings: Any) -> FaceRule:
        """The rule of settings holding ``min_face_fraction`` and ``count_small_faces`` (the
        ``label`` section, the label stage's filter settings)."""
        return cls(settings.min_face_fraction, settings.count_small_faces)

    def large(self, faces: Sequence[Face], width: int, height: int) -> list[int]:
        """The positions in ``faces`` of the large faces of a ``width`` x ``height`` image."""
        return [
            i for i, f in enumerate(faces) if is_large(f, width, height, self.min_face_fraction)
        ]


#: METHODS 1.4: a face is large at 10 % of the image height or width; small extra faces ignored
DEFAULT_FACE_RULE = FaceRule()


def decide(p_female: float, threshold: float) -> str:
    """``female`` if p_female >= threshold, ``male`` if 1 - p_female >= threshold, else
    ``ambiguous``. ``threshold`` in [0.5, 1]; exactly 0.5/0.5 is ``ambiguous``."""
    p = float(p_female)
    if p >= threshold and p > 0.5:
        return "female"
    if 1.0 - p >= threshold and p < 0.5:
        return "male"
    return "ambiguous"


def face_crop_box(
    face: Face, width: int, height: int, margin: float = FACE_CROP_MARGIN
) -> tuple[int, int, int, int]:
    """``(left, top, right, bottom)`` in pixels (right/bottom exclusive) of the face box grown
    by ``margin`` (>= 0) x its size on each side, clipped to a ``width`` x ``height`` image."""
    grown = Face(
        face.x - margin * face.w,
        face.y - margin * face.h,
        face.w * (1 + 2 * margin),
        face.h * (1 + 2 * margin),
        face.score,
    )
    return grown.box_ltrb(width, height)
