"""Perceived skin tone of one detected face: apparent colour of facial skin in CIELAB (pure).

:func:`measure_skin` takes an ``(H, W, 3)`` uint8 RGB image, the detected face box and its 5
dlib landmarks (:mod:`corpus_audit.backends.landmarks`) and returns a :class:`SkinMeasurement`:

1. **Skin region from landmarks** (method ``cheeks5:v1``): two round cheek patches below the
   eye centres at the height of the nose base, pushed outward by 0.12 of the eye distance
   (away from the nostrils), radius :data:`CHEEK_RADIUS` x the eye distance, and one nose
   bridge patch between the eyes and the nose base. Eyes, brows, lips, nostrils and the beard
   area lie outside these patches; the forehead is left out (hair and hats cover it). No colour
   threshold decides what is skin, and no nearest-swatch assignment is made.
2. **Pixel hygiene**: pixels with any channel <= :data:`CLIPPED_LOW` or >=
   :data:`CLIPPED_HIGH` out; then the brightest :data:`HIGHLIGHT_FRACTION` (specular
   highlights) and the darkest :data:`SHADOW_FRACTION` (shadow, stray hair) of L* out.
3. Fewer kept pixels than ``min_pixels`` (default 200) -> status ``unmeasurable``,
   reason ``too_few_pixels``; no landmarks -> ``no_landmarks``; a grayscale image ->
   ``grayscale``.
4. L*, a*, b*: medians of the kept pixels (CIELAB D65; L* 0-100); hue angle h* and ITA
   (degrees) from those medians (:mod:`corpus_audit.methods.colour`).
5. Quality flags (comma list): ``dark``, ``overexposed``, ``low_contrast``, ``small_face``,
   ``colour_cast``, ``grayscale``; thresholds are the constants below.

:func:`unmeasured_image` makes the row of an image the face filter dropped (its reason, the
image-level flags and :func:`image_lightness`), for the dropout-by-lightness view.

The values are the apparent colour in this image, not anyone's skin: light, camera and
processing move them (a gamma of 0.7 or 1.4 on the whole image moves L* by the tolerance in
docs/skin_tone.md), and generated images have no physical illuminant. Monk tones come only
from a mapping fitted on human labels per source (:mod:`corpus_audit.methods.monk_calibration`);
before that, :func:`l_band` and :func:`tone_group_uncalibrated` give fixed, uncalibrated bands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from corpus_audit.methods.colour import hue_deg, ita_deg, srgb_to_lab

METHOD = "cheeks5:v1"  # regions from the 5 dlib points
MESH_METHOD = "mesh468:v1"  # regions from the 468-point face mesh
# mesh468: round patches centred on mesh points (cheeks 50, 205 and 280, 425; forehead 151),
# radius MESH_RADIUS x the distance between the outer eye corners (points 33 and 263)
MESH_CENTRES = (50, 205, 280, 425, 151)
MESH_RADIUS = 0.10
MIN_PIXELS = 200  # default label.skin_min_pixels
# region geometry, in units of the distance between the eye centres
CHEEK_RADIUS = 0.22
CHEEK_OUTWARD = 0.12  # cheek centre pushed away from the nose
CHEEK_DOWN = 0.80  # cheek centre: this fraction of the eye-line -> nose-base distance down
BRIDGE_RADIUS = 0.12
BRIDGE_DOWN = 0.45
# pixel hygiene
CLIPPED_LOW = 5  # any channel <= this: clipped shadow
CLIPPED_HIGH = 250  # any channel >= this: clipped highlight
HIGHLIGHT_FRACTION = 0.05  # brightest share of L* dropped (specular highlights)
SHADOW_FRACTION = 0.15  # darkest share of L* dropped (shadow, stray hair)
# quality flags
DARK_IMAGE_L = 25.0  # image mean L* below this: 'dark' (underexposed photo)
OVEREXPOSED_FRACTION = 0.20  # share of region pixels clipped high above this: 'overexposed'
LOW_CONTRAST_STD = 10.0  # standard deviation of the image's L* below this: 'low_contrast'
SMALL_FACE_PX = 64  # face box shorter side below this (pixels): 'small_face'
COLOUR_CAST_CHROMA = 20.0  # |mean (a*, b*)| of the whole image above this: 'colour_cast'
GRAYSCALE_SPREAD = 3  # max-min channel difference <= this on 99 % of pixels: 'grayscale'
STATS_MAX_SIDE = 96  # image-level statistics on a strided copy at most this long

L_BANDS: tuple[tuple[str, float, float], ...] = (
    ("l_lt_45", 0.0, 45.0),
    ("l_45_60", 45.0, 60.0),
    ("l_60_75", 60.0, 75.0),
    ("l_ge_75", 75.0, 100.0),
)  # (class, lower bound inclusive, upper bound exclusive; the last includes 100)
TONE_GROUPS_UNCALIBRATED = ("l_dark", "l_mid", "l_light")  # < 50, 50-65, >= 65
FLAGS = ("dark", "overexposed", "low_contrast", "small_face", "colour_cast", "grayscale")


@dataclass(frozen=True)
class SkinMeasurement:
    """One face's skin measurement: the ``skin_tone`` table's columns but the image id.

    ``status`` is ``measured`` or ``unmeasurable`` (``reason`` says why); ``n_pixels`` the
    skin pixels kept after hygiene; ``l_star`` 0-100, ``a_star``/``b_star`` about -128..128,
    ``hue_deg`` and ``ita_deg`` in degrees (None when unmeasurable); ``flags`` a comma list
    of :data:`FLAGS` ('' when none); ``image_l_star`` the mean L* of the whole image (0-100).
    """

    method: str
    status: str
    reason: str | None
    n_pixels: int
    l_star: float | None
    a_star: float | None
    b_star: float | None
    hue_deg: float | None
    ita_deg: float | None
    flags: str
    image_l_star: float


def l_band(l_star: float) -> str:
    """The uncalibrated L* band of ``l_star`` (0-100): one of the classes of :data:`L_BANDS`."""
    value = float(l_star)
    if not np.isfinite(value):
        raise ValueError(f"L* must be a number, got {l_star!r}")
    for name, _low, high in L_BANDS[:-1]:
        if value < high:
            return name
    return L_BANDS[-1][0]


def tone_group_uncalibrated(l_star: float) -> str:
    """``l_dark`` (L* < 50), ``l_mid`` (50 <= L* < 65) or ``l_light`` (L* >= 65)."""
    value = float(l_star)
    if not np.isfinite(value):
        raise ValueError(f"L* must be a number, got {l_star!r}")
    return "l_dark" if value < 50.0 else "l_mid" if value < 65.0 else "l_light"


def _strided(image: np.ndarray) -> np.ndarray:
    step = max(1, int(np.ceil(max(image.shape[:2]) / STATS_MAX_SIDE)))
    return image[::step, ::step]


def image_lightness(image: np.ndarray) -> float:
    """Mean CIELAB L* (0-100) of the whole ``(H, W, 3)`` uint8 RGB image (strided copy)."""
    _check_image(image)
    return float(srgb_to_lab(_strided(image))[..., 0].mean())


def is_grayscale(image: np.ndarray) -> bool:
    """True when 99 % of pixels have channels within :data:`GRAYSCALE_SPREAD` of each other."""
    _check_image(image)
    return _grayscale(_strided(image))


def _grayscale(small: np.ndarray) -> bool:
    spread = small.max(axis=2) - small.min(axis=2)  # uint8, no overflow: max >= min
    return float(np.mean(spread > GRAYSCALE_SPREAD)) <= 0.01


def _check_image(image: np.ndarray) -> None:
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.ndim != 3:
        raise ValueError("expected an (H, W, 3) uint8 RGB image")
    if image.shape[2] != 3 or image.shape[0] == 0 or image.shape[1] == 0:
        raise ValueError(f"expected an (H, W, 3) uint8 RGB image, got shape {image.shape}")


def _box(face: Any) -> tuple[float, float, float, float]:
    """``(x, y, w, h)`` pixels of a Face-like object or a 4-sequence."""
    if hasattr(face, "w") and hasattr(face, "h"):
        return float(face.x), float(face.y), float(face.w), float(face.h)
    x, y, w, h = (float(v) for v in face)
    return x, y, w, h


def _paint(mask: np.ndarray, patches: list[tuple[np.ndarray, float]]) -> np.ndarray:
    """Set the round ``(centre (x, y), radius px)`` patches in ``mask`` (in place)."""
    for centre, r in patches:
        top, left = max(0, int(centre[1] - r)), max(0, int(centre[0] - r))
        bottom = min(mask.shape[0], int(centre[1] + r) + 2)
        right = min(mask.shape[1], int(centre[0] + r) + 2)
        if top >= bottom or left >= right:
            continue
        rows, cols = np.ogrid[top:bottom, left:right]
        mask[top:bottom, left:right] |= (cols - centre[0]) ** 2 + (rows - centre[1]) ** 2 <= r * r
    return mask


def region_method(landmarks: np.ndarray) -> str:
    """The method id of the region these landmarks give: 5 points -> :data:`METHOD`, 468 ->
    :data:`MESH_METHOD`; any other shape raises ValueError."""
    shape = np.shape(landmarks)
    if shape == (5, 2):
        return METHOD
    if shape == (468, 2):
        return MESH_METHOD
    raise ValueError(f"expected (5, 2) or (468, 2) landmarks, got shape {shape}")


def skin_region(shape: tuple[int, ...], landmarks: np.ndarray) -> np.ndarray:
    """Boolean ``(H, W)`` mask of skin patches placed from landmarks (pixels, ``(x, y)``).

    ``(5, 2)`` dlib points (two per eye, then the nose base): cheek and nose-bridge patches;
    ``(468, 2)`` face mesh: patches around :data:`MESH_CENTRES`. All-False when the eyes
    coincide.
    """
    points = np.asarray(landmarks, dtype=np.float64)
    method = region_method(points)
    if not np.all(np.isfinite(points)):
        raise ValueError("landmarks must be finite numbers")
    mask = np.zeros(shape[:2], dtype=bool)
    if method == MESH_METHOD:
        dist = float(np.hypot(*(points[33] - points[263])))
        return _paint(mask, [(points[i], MESH_RADIUS * dist) for i in MESH_CENTRES])
    eye_a, eye_b, nose = points[0:2].mean(axis=0), points[2:4].mean(axis=0), points[4]
    dist = float(np.hypot(*(eye_a - eye_b)))
    if dist < 1.0:
        return mask
    across = (eye_a - eye_b) / dist
    mid = (eye_a + eye_b) / 2.0
    down = np.array([-across[1], across[0]])
    drop = float(np.dot(nose - mid, down))
    if drop < 0:  # face upside down in the frame: point "down" at the nose
        down, drop = -down, -drop
    drop = max(drop, 0.5 * dist)
    patches = [
        (eye_a + CHEEK_OUTWARD * dist * across + CHEEK_DOWN * drop * down, CHEEK_RADIUS * dist),
        (eye_b - CHEEK_OUTWARD * dist * across + CHEEK_DOWN * drop * down, CHEEK_RADIUS * dist),
        (mid + BRIDGE_DOWN * drop * down, BRIDGE_RADIUS * dist),
    ]
    return _paint(mask, patches)


def _hygiene(pixels: np.ndarray) -> tuple[np.ndarray, float]:
    """Kept CIELAB values of region ``pixels`` (n, 3) uint8, and the share clipped high."""
    if len(pixels) == 0:
        return np.zeros((0, 3)), 0.0
    high = (pixels >= CLIPPED_HIGH).any(axis=1)
    clipped = high | (pixels <= CLIPPED_LOW).any(axis=1)
    lab = srgb_to_lab(pixels[~clipped])
    if len(lab):
        low_cut, high_cut = np.quantile(lab[:, 0], [SHADOW_FRACTION, 1.0 - HIGHLIGHT_FRACTION])
        lab = lab[(lab[:, 0] >= low_cut) & (lab[:, 0] <= high_cut)]
    return lab, float(high.mean())


def _image_flags(lab: np.ndarray, box: tuple[float, float, float, float] | None) -> list[str]:
    """Flags that depend on the whole image (``lab``: its strided CIELAB pixels, (n, 3)) and
    the face size (no ``small_face`` without a box)."""
    flags = []
    if lab[:, 0].mean() < DARK_IMAGE_L:
        flags.append("dark")
    if lab[:, 0].std() < LOW_CONTRAST_STD:
        flags.append("low_contrast")
    if box is not None and min(box[2], box[3]) < SMALL_FACE_PX:
        flags.append("small_face")
    if float(np.hypot(lab[:, 1].mean(), lab[:, 2].mean())) > COLOUR_CAST_CHROMA:
        flags.append("colour_cast")
    return flags


def _unmeasurable(
    method: str, reason: str, flags: list[str], image_l: float, n: int = 0
) -> SkinMeasurement:
    return SkinMeasurement(method, "unmeasurable", reason, n, None, None, None, None, None,
                           ",".join(flags), image_l)  # fmt: skip


def unmeasured_image(image: np.ndarray, reason: str, *, method: str = METHOD) -> SkinMeasurement:
    """The row of an image whose face is not measured (e.g. dropped by the face filter:
    ``reason`` = ``no_face``, ``many_faces``, ``small_face``): status ``unmeasurable``, no
    colour values, the image-level flags, and ``image_l_star`` (mean L*, 0-100) so that
    detector dropout can be read against image lightness."""
    _check_image(image)
    if not reason:
        raise ValueError("an unmeasured image needs a reason")
    small = _strided(image)
    lab_small = srgb_to_lab(small).reshape(-1, 3)
    flags = _image_flags(lab_small, None) + (["grayscale"] if _grayscale(small) else [])
    return _unmeasurable(method, reason, flags, float(lab_small[:, 0].mean()))


def measure_skin(
    image: np.ndarray,
    face: Any,
    landmarks: np.ndarray | None,
    *,
    min_pixels: int = MIN_PIXELS,
    method: str = METHOD,
) -> SkinMeasurement:
    """Measure the apparent skin colour of ``face`` (a Face or ``(x, y, w, h)`` pixels).

    ``image``: ``(H, W, 3)`` uint8 RGB; ``landmarks``: ``(5, 2)`` dlib points in pixels or
    None; ``min_pixels`` >= 1: fewer kept skin pixels -> ``unmeasurable``. The result's
    ``method`` follows the landmarks' shape (:func:`region_method`); ``method`` names it for a
    row without landmarks.
    """
    _check_image(image)
    if landmarks is not None:
        method = region_method(landmarks)
    if min_pixels < 1:
        raise ValueError(f"min_pixels must be >= 1, got {min_pixels}")
    box = _box(face)
    small = _strided(image)
    lab_small = srgb_to_lab(small).reshape(-1, 3)
    image_l = float(lab_small[:, 0].mean())
    flags = _image_flags(lab_small, box)
    if _grayscale(small):
        return _unmeasurable(method, "grayscale", [*flags, "grayscale"], image_l)
    if landmarks is None:
        return _unmeasurable(method, "no_landmarks", flags, image_l)
    mask = skin_region(image.shape, landmarks)
    lab, clipped_high = _hygiene(image[mask])
    if clipped_high > OVEREXPOSED_FRACTION:
        flags.append("overexposed")
    if len(lab) < min_pixels:
        return _unmeasurable(method, "too_few_pixels", flags, image_l, len(lab))
    median = np.median(lab, axis=0)
    return SkinMeasurement(
        method=method,
        status="measured",
        reason=None,
        n_pixels=len(lab),
        l_star=float(median[0]),
        a_star=float(median[1]),
        b_star=float(median[2]),
        hue_deg=float(hue_deg(median)),
        ita_deg=float(ita_deg(median)),
        flags=",".join(flags),
        image_l_star=image_l,
    )
