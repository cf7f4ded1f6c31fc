"""Safe decoding: every awkward or hostile file gives RGB uint8 or a clear `unreadable` detail."""

from __future__ import annotations

import io

import numpy as np
import pytest
from image_fixtures import bad_files, encode, photo
from PIL import Image

from corpus_audit.core.imagefile import UnreadableImage, image_size, read_rgb, try_read_rgb


@pytest.fixture(scope="module")
def bad() -> dict[str, bytes]:
    return bad_files()


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("zero_byte.jpg", "empty file (0 bytes)"),
        ("truncated.jpg", "truncated image data"),
        ("not_an_image.jpg", "not a recognised image format"),
        ("bomb.png", "too many pixels"),
    ],
)
def test_unreadable_files_give_a_reason(bad, tmp_path, name, detail):
    path = tmp_path / name
    path.write_bytes(bad[name])
    for source in (path, bad[name]):
        array, why = try_read_rgb(source)
        assert array is None and why.startswith(detail)
    with pytest.raises(UnreadableImage) as info:
        read_rgb(path)
    assert info.value.reason == "unreadable" and str(path) in str(info.value)


def test_bomb_is_refused_from_the_header_before_decoding(bad):
    assert len(bad["bomb.png"]) < 100_000  # 20000 x 20000 pixels in < 100 kB
    # our own guard (config.images.max_pixels) applies below Pillow's
    small = encode(photo("camera"), "PNG")  # 512 x 512
    array, why = try_read_rgb(small, max_pixels=512 * 512 - 1)
    assert array is None
    assert why == "too many pixels: 512x512 = 262144 > max_pixels 262143"
    assert try_read_rgb(small, max_pixels=512 * 512)[0].shape == (512, 512, 3)


def test_png_alpha_is_composited_over_white(bad):
    array = read_rgb(bad["alpha.png"])
    assert array.shape == (512, 512, 3) and array.dtype == np.uint8
    assert (array[:, :256] == 255).all()  # fully transparent half
    assert np.array_equal(array[:, 256:], photo("astronaut")[:, 256:])  # opaque half untouched


def test_cmyk_jpeg_becomes_rgb(bad):
    array = read_rgb(bad["cmyk.jpg"])
    assert array.shape == (512, 512, 3)
    diff = np.abs(array.astype(int) - photo("astronaut").astype(int)).mean()
    assert diff < 6  # JPEG loss only: the channels are not inverted or swapped


def test_16_bit_pngs_are_scaled_not_clipped(bad):
    rgb = read_rgb(bad["rgb16.png"])
    assert np.array_equal(rgb, photo("astronaut"))  # v * 257 -> v exactly
    gray = read_rgb(bad["gray16.png"])
    expected = photo("astronaut").mean(axis=2).round().astype(np.uint8)
    assert np.array_equal(gray[:, :, 0], expected) and np.array_equal(gray[:, :, 1], expected)
    assert 50 < gray.mean() < 200  # clipping would have made it nearly all white


def test_palette_with_transparency_and_grey_modes():
    pal = Image.new("P", (8, 8), 1)
    pal.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    pal.putpixel((0, 0), 0)
    buf = io.BytesIO()
    pal.save(buf, format="PNG", transparency=1)
    array = read_rgb(buf.getvalue())
    assert tuple(array[0, 0]) == (255, 0, 0)  # opaque red
    assert tuple(array[4, 4]) == (255, 255, 255)  # transparent index -> white
    for mode in ("L", "1", "LA", "I", "F"):
        img = Image.new(mode, (5, 4))
        buf = io.BytesIO()
        img.save(buf, format="TIFF")
        out = read_rgb(buf.getvalue())
        assert out.shape == (4, 5, 3) and out.dtype == np.uint8


def test_exif_orientation_is_applied():
    array = np.zeros((40, 60, 3), np.uint8)
    array[:, :10] = 255  # a white stripe on the left
    img = Image.fromarray(array)
    exif = img.getexif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    buf = io.BytesIO()
    img.save(buf, format="JPEG", exif=exif, quality=95)
    out = read_rgb(buf.getvalue())
    assert out.shape == (60, 40, 3)
    assert out[:10].mean() > 200 and out[-10:].mean() < 50  # the stripe is now on top
    assert image_size(buf.getvalue()) == (60, 40)  # header size, before orientation


def test_paths_that_are_not_files(tmp_path):
    assert try_read_rgb(tmp_path / "missing.jpg") == (None, "file not found")
    assert try_read_rgb(tmp_path) == (None, "not a regular file")


def test_real_photos_decode_identically_from_path_and_bytes(tmp_path):
    for name in ("astronaut", "camera", "grace"):
        data = encode(photo(name), "PNG")
        (tmp_path / f"{name}.png").write_bytes(data)
        a = read_rgb(tmp_path / f"{name}.png")
        assert np.array_equal(a, read_rgb(data))
        assert np.array_equal(a, photo(name))
        assert a.flags["C_CONTIGUOUS"]
