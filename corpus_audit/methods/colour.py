"""sRGB <-> CIELAB (D65) with the standard formulas, hue angle, ITA, and a guard on Lab input.

- :func:`srgb_to_lab`: sRGB (``uint8`` 0-255 or float 0-1, last axis R, G, B) -> CIELAB D65:
  the IEC 61966-2-1 transfer curve to linear light, the sRGB -> XYZ matrix (D65 white), and the
  CIE 1976 L*a*b* formulas (epsilon 216/24389, kappa 24389/27). L* in 0-100, a*/b* roughly
  -128..128. :func:`lab_to_srgb` is the exact inverse (float 0-1, clipped to the gamut).
- :func:`hue_deg`: hue angle h* = atan2(b*, a*) in degrees, -180..180 (skin: about 30-80).
- :func:`ita_deg`: individual typology angle ITA = atan2(L* - 50, b*) in degrees, -90..90
  (the usual arctan((L* - 50) / b*) for b* > 0), kept for comparison with published work.
- :func:`check_cielab`: refuses arrays that look like OpenCV's 8-bit Lab (L* scaled to 0-255,
  a*/b* offset by 128), the mistake that collapses skin tones when fed to ITA as if CIELAB.
"""

from __future__ import annotations

import numpy as np

# sRGB (linear) -> XYZ, D65 white (IEC 61966-2-1; Bruce Lindbloom's matrix)
SRGB_TO_XYZ = np.array(
    [
        [0.4124564, 0.3575761, 0.1804375],
        [0.2126729, 0.7151522, 0.0721750],
        [0.0193339, 0.1191920, 0.9503041],
    ]
)
XYZ_TO_SRGB = np.linalg.inv(SRGB_TO_XYZ)
D65_WHITE = SRGB_TO_XYZ.sum(axis=1)  # X, Y, Z of sRGB white: (0.95047, 1.0, 1.08883)
EPSILON = 216.0 / 24389.0  # CIE: (6/29)^3
KAPPA = 24389.0 / 27.0  # CIE: (29/3)^3
# check_cielab: 8-bit OpenCV Lab stores a*+128 and b*+128; real colours with both a* and b*
# inside this window around +128 do not exist in CIELAB (a*, b* of sRGB stay within -128..128)
OFFSET_LAB_WINDOW = (64.0, 192.0)
L_MAX_TOLERANCE = 100.5  # CIELAB L* never exceeds 100 (tolerance for rounding)


def _as_unit_rgb(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` as float64 in 0-1: uint8 is divided by 255, floats must already be in 0-1."""
    arr = np.asarray(rgb)
    if arr.shape[-1:] != (3,):
        raise ValueError(f"expected RGB values on the last axis (..., 3), got shape {arr.shape}")
    if arr.dtype == np.uint8:
        return arr.astype(np.float64) / 255.0
    if not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"expected uint8 (0-255) or float (0-1) RGB, got {arr.dtype}")
    values = arr.astype(np.float64)
    if values.size and (np.nanmin(values) < -1e-6 or np.nanmax(values) > 1.0 + 1e-6):
        raise ValueError("float RGB must be in 0-1 (pass uint8 for 0-255 values)")
    return np.clip(values, 0.0, 1.0)


def srgb_to_linear(unit_rgb: np.ndarray) -> np.ndarray:
    """IEC 61966-2-1 decoding: sRGB in 0-1 -> linear light in 0-1."""
    c = np.asarray(unit_rgb, dtype=np.float64)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


_LINEAR_OF_UINT8 = srgb_to_linear(np.arange(256) / 255.0)


def linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    """IEC 61966-2-1 encoding: linear light in 0-1 -> sRGB in 0-1 (clipped)."""
    c = np.clip(np.asarray(linear, dtype=np.float64), 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1.0 / 2.4) - 0.055)


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB (uint8 0-255 or float 0-1, shape (..., 3), R, G, B) -> CIELAB D65, shape (..., 3).

    L* in 0-100; a*, b* within about -128..128. uint8 input is decoded through a 256-entry
    table of the same transfer curve (identical values, faster).
    """
    arr = np.asarray(rgb)
    if arr.dtype == np.uint8 and arr.shape[-1:] == (3,):
        linear = _LINEAR_OF_UINT8[arr]
    else:
        linear = srgb_to_linear(_as_unit_rgb(arr))
    xyz = linear @ SRGB_TO_XYZ.T
    t = xyz / D65_WHITE
    f = np.where(t > EPSILON, np.cbrt(t), (KAPPA * t + 16.0) / 116.0)
    lab = np.empty_like(f)
    lab[..., 0] = 116.0 * f[..., 1] - 16.0
    lab[..., 1] = 500.0 * (f[..., 0] - f[..., 1])
    lab[..., 2] = 200.0 * (f[..., 1] - f[..., 2])
    return lab


def lab_to_srgb(lab: np.ndarray) -> np.ndarray:
    """CIELAB D65 (..., 3) -> sRGB float in 0-1 (out-of-gamut values clipped)."""
    lab = np.asarray(lab, dtype=np.float64)
    fy = (lab[..., 0] + 16.0) / 116.0
    f = np.stack([fy + lab[..., 1] / 500.0, fy, fy - lab[..., 2] / 200.0], axis=-1)
    t = np.where(f**3 > EPSILON, f**3, (116.0 * f - 16.0) / KAPPA)
    return linear_to_srgb((t * D65_WHITE) @ XYZ_TO_SRGB.T)


def hue_deg(lab: np.ndarray, *, check: bool = True) -> np.ndarray:
    """Hue angle h* = atan2(b*, a*) in degrees (-180..180) of CIELAB values (..., 3).

    ``check``: refuse 8-bit-Lab-looking input first (:func:`check_cielab`)."""
    lab = check_cielab(lab) if check else np.asarray(lab, dtype=np.float64)
    return np.degrees(np.arctan2(lab[..., 2], lab[..., 1]))


def ita_deg(lab: np.ndarray, *, check: bool = True) -> np.ndarray:
    """Individual typology angle atan2(L* - 50, b*) in degrees (-90..90 for b* > 0) of CIELAB
    values (..., 3). ``check``: refuse 8-bit-Lab-looking input first (:func:`check_cielab`)."""
    lab = check_cielab(lab) if check else np.asarray(lab, dtype=np.float64)
    return np.degrees(np.arctan2(lab[..., 0] - 50.0, lab[..., 2]))


def check_cielab(lab: np.ndarray) -> np.ndarray:
    """Return ``lab`` as float64 if it looks like CIELAB (L* 0-100), else raise ValueError.

    Refused: uint8 arrays, any L* above 100, and arrays whose a* and b* all lie in
    64..192, i.e. OpenCV's 8-bit Lab (``cv2.COLOR_RGB2LAB`` on uint8: L* x 255/100,
    a* + 128, b* + 128). Fed to ITA as if CIELAB, such values collapse distinct skin tones.
    """
    arr = np.asarray(lab)
    hint = (
        "this looks like OpenCV 8-bit Lab (L scaled to 0-255, a/b offset by 128), not CIELAB; "
        "convert float sRGB in 0-1 with srgb_to_lab instead"
    )
    if arr.dtype == np.uint8:
        raise ValueError(f"Lab values are uint8: {hint}")
    if arr.shape[-1:] != (3,):
        raise ValueError(f"expected Lab values on the last axis (..., 3), got shape {arr.shape}")
    values = arr.astype(np.float64)
    if values.size == 0:
        return values
    if np.nanmax(values[..., 0]) > L_MAX_TOLERANCE or np.nanmin(values[..., 0]) < -0.5:
        raise ValueError(f"L* outside 0-100 (max {np.nanmax(values[..., 0]):.1f}): {hint}")
    low, high = OFFSET_LAB_WINDOW
    ab = values[..., 1:]
    if np.all((ab >= low) & (ab <= high)):
        raise ValueError(f"a* and b* all lie in {low:.0f}..{high:.0f}: {hint}")
    return values
