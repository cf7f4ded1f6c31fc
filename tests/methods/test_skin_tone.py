"""Skin tone method pieces on constructed images: bands, hygiene, flags, region geometry."""

from __future__ import annotations

import numpy as np
import pytest

from corpus_audit.methods.colour import srgb_to_lab
from corpus_audit.methods.skin_tone import (
    L_BANDS,
    image_lightness,
    l_band,
    measure_skin,
    skin_region,
    tone_group_uncalibrated,
    unmeasured_image,
)

# a frontal face in a 200 x 200 image: eyes at y = 80, nose base at y = 110
POINTS = np.array([[130.0, 80], [112, 80], [70, 80], [88, 80], [100, 110]])
BOX = (50.0, 40.0, 100.0, 110.0)


def test_bands_and_groups():
    assert [b[0] for b in L_BANDS] == ["l_lt_45", "l_45_60", "l_60_75", "l_ge_75"]
    assert [l_band(v) for v in (0, 44.99, 45, 59.9, 60, 74.9, 75, 100)] == [
        "l_lt_45", "l_lt_45", "l_45_60", "l_45_60", "l_60_75", "l_60_75", "l_ge_75", "l_ge_75",
    ]  # fmt: skip
    assert [tone_group_uncalibrated(v) for v in (10, 49.9, 50, 64.9, 65, 99)] == [
        "l_dark", "l_dark", "l_mid", "l_mid", "l_light", "l_light",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        l_band(float("nan"))


def test_region_avoids_eyes_and_mouth():
    mask = skin_region((200, 200, 3), POINTS)
    assert mask.sum() > 400
    for x, y in POINTS[:4]:  # eye corners
        assert not mask[int(y), int(x)]
    assert not mask[135, 100]  # the mouth, below the nose base
    rows = np.nonzero(mask)[0]
    assert rows.min() > 80 and rows.max() < 125  # between eye line and upper lip


def test_median_of_a_flat_swatch_with_highlights_and_shadows():
    swatch = np.array([160, 126, 86], np.uint8)  # Monk 6, #a07e56
    image = np.tile(swatch, (200, 200, 1))
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 4, (200, 200))
    image[noise == 0] = 252  # clipped highlights on a quarter of the pixels: dropped
    image[noise == 1] = 3  # clipped shadows: dropped
    m = measure_skin(image, BOX, POINTS)
    expected = srgb_to_lab(swatch)
    assert m.status == "measured" and "overexposed" in m.flags.split(",")
    assert m.l_star == pytest.approx(expected[0], abs=0.01)
    assert m.b_star == pytest.approx(expected[2], abs=0.01)


def test_min_pixels_and_flags():
    swatch = np.tile(np.array([58, 49, 42], np.uint8), (200, 200, 1))  # Monk 9
    # a flat, dark image: flagged dark and without contrast, still measured
    dark = measure_skin(swatch, BOX, POINTS)
    assert dark.status == "measured" and set(dark.flags.split(",")) == {"dark", "low_contrast"}
    # the same dark skin in a lit scene: no lighting flag (flags read the image, not the skin)
    lit = swatch.copy()
    lit[:, :40] = 235
    lit[:, 160:] = 20
    in_scene = measure_skin(lit, BOX, POINTS)
    assert in_scene.flags == "" and in_scene.l_star == pytest.approx(dark.l_star)
    assert in_scene.l_star < 25
    bigger = measure_skin(swatch, BOX, POINTS, min_pixels=10_000)
    assert bigger.status == "unmeasurable" and bigger.reason == "too_few_pixels"
    assert image_lightness(swatch) == pytest.approx(srgb_to_lab(swatch[0, 0])[0])
    with pytest.raises(ValueError, match="min_pixels"):
        measure_skin(swatch, BOX, POINTS, min_pixels=0)


def test_unmeasured_image_keeps_the_lightness_proxy():
    image = np.tile(np.array([200, 180, 160], np.uint8), (120, 90, 1))
    image[:, :30] = 40
    row = unmeasured_image(image, "no_face")
    assert row.status == "unmeasurable" and row.reason == "no_face" and row.n_pixels == 0
    assert row.l_star is None and row.hue_deg is None and row.method == "cheeks5:v1"
    expected = (2 * srgb_to_lab(image[0, 60])[0] + srgb_to_lab(image[0, 0])[0]) / 3
    assert row.image_l_star == pytest.approx(expected, abs=0.5)
    assert "small_face" not in row.flags
    gray = unmeasured_image(np.full((50, 50, 3), 90, np.uint8), "many_faces")
    assert set(gray.flags.split(",")) == {"low_contrast", "grayscale"}
    with pytest.raises(ValueError, match="reason"):
        unmeasured_image(image, "")
