"""sRGB -> CIELAB on the Monk swatches, channel order, and the 8-bit-Lab misuse (real OpenCV)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage.color import rgb2lab

from corpus_audit.methods.colour import (
    check_cielab,
    hue_deg,
    ita_deg,
    lab_to_srgb,
    srgb_to_lab,
)

# Monk Skin Tone scale, tones 1..10, the hex values Google publishes
MONK_HEX = [
    "f6ede4",
    "f3e7db",
    "f7ead0",
    "eadaba",
    "d7bd96",
    "a07e56",
    "825c43",
    "604134",
    "3a312a",
    "292420",
]
MONK = np.array([[int(h[i : i + 2], 16) for i in (0, 2, 4)] for h in MONK_HEX], dtype=np.uint8)


def test_monk_swatches_match_scikit_image():
    ours = srgb_to_lab(MONK)
    # scikit-image's rgb2lab (CIELAB D65, its own matrix rounded to 6 digits): same to 0.01
    assert np.abs(ours - rgb2lab(MONK)).max() < 0.01
    # float 0-1 input gives the same values as uint8
    assert np.allclose(srgb_to_lab(MONK / 255.0), ours)
    # a few values worked by hand from the published formulas (L* of tone 1 and tone 10)
    assert ours[0] == pytest.approx([94.21, 1.50, 5.43], abs=0.01)
    assert ours[9] == pytest.approx([14.61, 1.48, 3.53], abs=0.01)


def test_reference_points_of_bruce_lindbloom():
    lab = srgb_to_lab(np.array([[255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255]], np.uint8))
    assert lab[0] == pytest.approx([100.0, 0.0, 0.0], abs=1e-4)
    assert lab[1] == pytest.approx([53.2408, 80.0925, 67.2032], abs=1e-3)
    assert lab[2] == pytest.approx([87.7347, -86.1827, 83.1793], abs=1e-3)
    assert lab[3] == pytest.approx([32.2970, 79.1875, -107.8602], abs=1e-3)
    assert srgb_to_lab(np.zeros(3, np.uint8)) == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)


def test_monk_lightness_decreases_except_tones_2_and_3():
    lightness = srgb_to_lab(MONK)[:, 0]
    steps = np.diff(lightness)
    # the published swatches are not monotone in L*: tone 3 (#f7ead0, L* 93.1) is lighter than
    # tone 2 (#f3e7db, L* 92.3); every other step goes darker
    assert steps[1] > 0
    assert np.all(np.delete(steps, 1) < 0)


def test_lab_round_trip():
    back = np.round(lab_to_srgb(srgb_to_lab(MONK)) * 255)
    assert np.array_equal(back.astype(np.uint8), MONK)


def test_swapped_channel_order_moves_hue_and_ita():
    swatch = MONK[4]  # tone 5, #d7bd96
    right, swapped = srgb_to_lab(swatch), srgb_to_lab(swatch[::-1])  # BGR read as RGB
    assert abs(hue_deg(right) - hue_deg(swapped)) > 90  # yellow-red becomes blue
    assert abs(ita_deg(right) - ita_deg(swapped)) > 30


def test_bad_rgb_input_is_refused():
    with pytest.raises(ValueError, match="0-1"):
        srgb_to_lab(np.array([215.0, 189.0, 150.0]))
    with pytest.raises(ValueError, match="last axis"):
        srgb_to_lab(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        srgb_to_lab(np.zeros(3, np.int32))


def test_opencv_8bit_lab_is_refused():
    real = srgb_to_lab(MONK)
    assert np.array_equal(check_cielab(real), real)
    opencv = cv2.cvtColor(MONK[None], cv2.COLOR_RGB2LAB)[0]  # 8-bit: L*255/100, a+128, b+128
    with pytest.raises(ValueError, match="OpenCV 8-bit Lab"):
        check_cielab(opencv)
    with pytest.raises(ValueError, match="OpenCV 8-bit Lab"):
        check_cielab(opencv.astype(np.float64))
    # dark tones alone stay under L 100 in 8-bit Lab: the +128 offset of a and b gives them away
    dark = opencv[7:].astype(np.float64)
    assert dark[:, 0].max() < 100
    with pytest.raises(ValueError, match="a\\* and b\\* all lie"):
        check_cielab(dark)


def test_the_dalleval_v3_misuse_collapses_the_ten_tones():
    """ITA from OpenCV 8-bit Lab, each swatch then given the tone of the nearest true ITA."""
    true_ita = ita_deg(srgb_to_lab(MONK))
    opencv = cv2.cvtColor(MONK[None], cv2.COLOR_RGB2LAB)[0].astype(np.float64)
    with pytest.raises(ValueError, match="OpenCV 8-bit Lab"):
        ita_deg(opencv)  # caught where ITA is computed
    wrong_ita = ita_deg(opencv, check=False)  # what the misuse computes

    def nearest_tone(values):
        return np.argmin(np.abs(values[:, None] - true_ita[None, :]), axis=1) + 1

    assert list(nearest_tone(true_ita)) == list(range(1, 11))
    collapsed = set(nearest_tone(wrong_ita).tolist())
    assert collapsed <= {5, 6, 7} and len(collapsed) <= 3
    # the spread of ITA over the scale shrinks from ~167 to ~61 degrees
    assert np.ptp(true_ita) > 160 and np.ptp(wrong_ita) < 65
