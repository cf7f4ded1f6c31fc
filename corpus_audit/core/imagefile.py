"""Safe image decoding shared by every stage: a path or bytes in, an RGB uint8 array out.

One function does the whole job, :func:`read_rgb`: it opens the image with Pillow, refuses
decompression bombs *before* decoding (``width * height > max_pixels``, from
``config.images.max_pixels``), applies the EXIF orientation, and converts every mode Pillow
knows to 8-bit RGB: alpha (RGBA, LA, palette with transparency) is composited over white,
CMYK is converted, 16-bit and 32-bit integer images are scaled (not clipped) to 0..255.

Anything that cannot be decoded raises :class:`UnreadableImage` with a short ``detail``
(``empty file (0 bytes)``, ``truncated image data``, ``too many pixels ...``, ...); stages
record it as the drop reason ``unreadable`` and go on. :func:`try_read_rgb` returns
``(array, None)`` or ``(None, detail)`` for callers that prefer no exception.

Memory. Decoding a ``W x H`` image at full size costs Pillow 4 bytes per pixel (RGB is stored
as RGBX), and turning it into a numpy array used to cost two more copies: an 88-megapixel
photo peaked at about 1.2 GB. With ``max_side`` (:func:`decode`; the ``label`` stage uses
:data:`DECODE_MAX_SIDE`) the result is at most ``max_side`` pixels on its long side and:

- a JPEG is decoded at a reduced size by the decoder itself (Pillow's ``draft``: DCT scaling
  by 1/2, 1/4 or 1/8, to the smallest size whose long side is still >= ``max_side``), so the
  full-size image never exists in memory: at most ``(2 * max_side)**2 * 4`` bytes (64 MiB at
  2048) plus the result;
- any other format is decoded at full size (4 bytes per pixel, 8 with alpha while it is
  composited) and reduced before the array is made (no full-size numpy copy);
- a :class:`DecodeBudget` shared by the threads that decode lets only so many full-size pixels
  be decoded at once (a large PNG waits for the one before it);
- inside :func:`large_pillow_blocks` the freed pixels of a large image go back to the operating
  system (glibc keeps freed blocks under 32 MiB in per-thread arenas, so without it every
  decoding thread would keep the memory of its largest decode, budget or not).

Measured peaks (``benchmarks/bench_decode.py``) are in ``docs/reliability.md``.

Pillow's own global guard (``PIL.Image.MAX_IMAGE_PIXELS``, 2x of which raises) still applies on
top of ``max_pixels``; this module never changes Pillow's global settings, except the block
size of its image allocator inside :func:`large_pillow_blocks`.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's default MAX_IMAGE_PIXELS
# Long side, in pixels, images are decoded at for the face detector and the classifiers (the
# label and pst_label stages): the detector sees 192 px and the classifiers ~224 px, and a face
# kept by the 10 % rule is still >= 136 px at this size, while an 88-megapixel JPEG decodes in
# ~50 MB instead of ~1.2 GB. Images up to this size are decoded whole.
DECODE_MAX_SIDE = 2048
ImageSource = str | os.PathLike[str] | bytes | bytearray | memoryview
_SWAPS_AXES = {5, 6, 7, 8}  # EXIF orientations that turn the image by 90 degrees
_WIDE_MODES = {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}  # > 8 bits per channel

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "DecodeBudget",
    "Decoded",
    "UnreadableImage",
    "check_whole",
    "decode",
    "image_size",
    "large_pillow_blocks",
    "read_rgb",
    "try_read_rgb",
]


class UnreadableImage(ValueError):
    """An image that cannot be decoded; ``detail`` says why in a few words."""

    reason = "unreadable"

    def __init__(self, detail: str, source: str = "") -> None:
        self.detail = detail
        self.source = source
        super().__init__(f"{source}: {detail}" if source else detail)


def _describe(source: ImageSource) -> str:
    if isinstance(source, bytes | bytearray | memoryview):
        return f"<{len(source)} bytes>"
    return str(source)


def _open(source: ImageSource, max_pixels: int):
    """Open (header only) and check the pixel count; returns a PIL image, not yet decoded."""
    name = _describe(source)
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        if not data:
            raise UnreadableImage("empty file (0 bytes)", name)
        fp: io.BytesIO | Path = io.BytesIO(data)
    else:
        path = Path(source)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise UnreadableImage("file not found", name) from None
        except OSError as exc:
            raise UnreadableImage(f"cannot stat file: {exc.strerror or exc}", name) from None
        if not path.is_file():
            raise UnreadableImage("not a regular file", name)
        if size == 0:
            raise UnreadableImage("empty file (0 bytes)", name)
        fp = path
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(fp)
    except Image.DecompressionBombError as exc:
        raise UnreadableImage(f"too many pixels (decompression bomb guard): {exc}", name) from None
    except UnidentifiedImageError:
        raise UnreadableImage("not a recognised image format", name) from None
    except Exception as exc:  # OSError, SyntaxError, struct.error ... from a bad header
        raise UnreadableImage(f"cannot open image: {exc}", name) from None
    width, height = image.size
    if width <= 0 or height <= 0:
        image.close()
        raise UnreadableImage(f"invalid size {width}x{height}", name)
    if width * height > max_pixels:
        image.close()
        raise UnreadableImage(
            f"too many pixels: {width}x{height} = {width * height} > max_pixels {max_pixels}",
            name,
        )
    return image


def image_size(source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """``(width, height)`` in pixels from the header alone (no decoding)."""
    image = _open(source, max_pixels)
    try:
        return image.size
    finally:
        image.close()


def _scale_to_uint8(values: np.ndarray) -> np.ndarray:
    """Integer or float single-channel data -> uint8, scaled by the data's nominal range."""
    if values.dtype == np.uint8:
        return values
    if np.issubdtype(values.dtype, np.floating):
        finite = np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        top = 1.0 if finite.size and finite.max() <= 1.0 else 255.0
        return np.clip(finite / top * 255.0 + 0.5, 0, 255).astype(np.uint8)
    wide = values.astype(np.int64)
    top = int(wide.max()) if wide.size else 0
    if top <= 255:
        return np.clip(wide, 0, 255).astype(np.uint8)
    scale = 65535 if top <= 65535 else int(np.iinfo(np.int32).max)
    return np.clip((wide * 255 + scale // 2) // scale, 0, 255).astype(np.uint8)


def _to_rgb(image) -> np.ndarray:
    """A decoded PIL image of any mode -> contiguous HxWx3 uint8 (alpha over white)."""
    mode = image.mode
    if mode in _WIDE_MODES:
        gray = _scale_to_uint8(np.asarray(image))
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    has_alpha = mode in {"RGBA", "LA", "La", "RGBa", "PA"} or (
        mode in {"P", "L", "RGB"} and "transparency" in image.info
    )
    if has_alpha:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        background.alpha_composite(rgba)
        rgb = background.convert("RGB")
    elif mode == "RGB":
        rgb = image
    else:  # 1, L, P, CMYK, YCbCr, LAB, HSV
        rgb = image.convert("RGB")
    array = np.asarray(rgb, dtype=np.uint8)
    if array.ndim != 3 or array.shape[2] != 3:
        raise UnreadableImage(f"unexpected decoded shape {array.shape} from mode {mode}")
    return np.ascontiguousarray(array)


@dataclass(frozen=True)
class Decoded:
    """An image decoded by :func:`decode`."""

    array: np.ndarray  # (h, w, 3) uint8 RGB; long side <= max_side when one was given
    width: int  # of the whole image as displayed (after EXIF orientation), pixels
    height: int

    @property
    def scale(self) -> float:
        """Array pixels per image pixel: 1.0 at full size, < 1 when reduced."""
        return self.array.shape[1] / self.width


class DecodeBudget:
    """How many pixels the threads sharing it may decode at full size at once.

    A decode holds ``min(its pixels, pixels)`` of the budget from the moment its pixel buffer
    is allocated until it is reduced, so decodes that together exceed the budget wait for each
    other (one larger than the whole budget runs alone). Memory held: about 4 bytes per
    budgeted pixel (8 for images with alpha), plus what each thread holds reduced.
    """

    def __init__(self, pixels: int) -> None:
        if pixels < 1:
            raise ValueError(f"a decode budget needs >= 1 pixel, got {pixels}")
        self.pixels = int(pixels)
        self._free = int(pixels)
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, pixels: int) -> Iterator[None]:
        want = min(int(pixels), self.pixels)
        with self._cond:
            self._cond.wait_for(lambda: self._free >= want)
            self._free -= want
        try:
            yield
        finally:
            with self._cond:
                self._free += want
                self._cond.notify_all()


LARGE_BLOCK_BYTES = 64 * 2**20  # above glibc's largest dynamic mmap threshold (32 MiB)


@contextlib.contextmanager
def large_pillow_blocks() -> Iterator[None]:
    """While the block runs, Pillow allocates image memory in blocks of up to 64 MiB (instead
    of 16 MiB): glibc serves such blocks with ``mmap`` and returns them to the operating system
    when freed, so a thread that decoded a large image does not keep its memory. Measured with
    two threads decoding 88-megapixel PNGs under one budget: peak 474-520 MB with it, 820 MB
    without (``benchmarks/bench_decode.py``)."""
    old = Image.core.get_block_size()
    Image.core.set_block_size(max(old, LARGE_BLOCK_BYTES))
    try:
        yield
    finally:
        Image.core.set_block_size(old)


def _reduced_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    scale = max_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _draft(image, max_side: int) -> None:
    """Let a JPEG decoder scale by 1/2, 1/4 or 1/8 while decoding, keeping the long side at
    least ``max_side`` (no effect on other formats)."""
    if image.format != "JPEG":
        return
    width, height = image.size
    wanted = (
        math.ceil(width * max_side / max(width, height)),
        math.ceil(height * max_side / max(width, height)),
    )
    image.draft(None, wanted)


def _shrink(image, max_side: int):
    """``image`` with its long side reduced to ``max_side`` (in its own mode where Pillow can
    resize it, so the full-size image is never converted or copied whole)."""
    if not max_side or max(image.size) <= max_side:
        return image
    size = _reduced_size(*image.size, max_side)
    if image.mode in ("P", "PA", "1"):
        image = image.convert(
            "RGBA" if "transparency" in image.info or image.mode == "PA" else "RGB"
        )
    elif image.mode in _WIDE_MODES:
        if image.mode != "F":
            image = image.convert("I")
        return image.resize(size, Image.Resampling.BOX)  # no overshoot past the value range
    return image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def decode(
    source: ImageSource,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_side: int = 0,
    budget: DecodeBudget | None = None,
) -> Decoded:
    """Decode ``source`` (a path or the file's bytes) to RGB, at most ``max_side`` pixels on
    the long side (0 = full size), with the image's own size (see the module docstring).

    ``max_pixels``: the largest ``width * height`` accepted (>= 1); larger images are refused
    from their header, before any pixel is decoded. ``budget``: shared by threads, bounds the
    full-size pixels decoded at once. Multi-frame images (GIF, TIFF) give their first frame.
    Raises :class:`UnreadableImage` for anything undecodable; never anything else for bad
    input.
    """
    image = _open(source, max_pixels)
    name = _describe(source)
    width, height = image.size
    try:
        if max_side and max(width, height) > max_side:
            _draft(image, max_side)
        held = budget.hold(image.size[0] * image.size[1]) if budget else contextlib.nullcontext()
        with held, warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            try:
                image.load()
            except OSError as exc:
                text = str(exc)
                if "truncated" in text.lower():
                    raise UnreadableImage(f"truncated image data ({text})", name) from None
                raise UnreadableImage(f"cannot decode image: {text}", name) from None
            except Image.DecompressionBombError as exc:
                raise UnreadableImage(f"too many pixels: {exc}", name) from None
            except Exception as exc:  # any decoder failure on bad bytes (struct.error, ...)
                raise UnreadableImage(f"cannot decode image: {exc!r}", name) from None
            oriented = image
            try:
                orientation = image.getexif().get(0x0112, 1)
                if orientation != 1:
                    oriented = ImageOps.exif_transpose(image)
            except Exception:  # a broken EXIF block must not cost the image
                orientation = 1
            if orientation in _SWAPS_AXES:
                width, height = height, width
            try:
                array = _to_rgb(_shrink(oriented, max_side))
            except UnreadableImage as exc:
                raise UnreadableImage(exc.detail, name) from None
            except Exception as exc:
                raise UnreadableImage(f"cannot convert image to RGB: {exc}", name) from None
            finally:  # free the full-size pixels before the budget lets the next decode in
                if oriented is not image:
                    oriented.close()
                image.close()
    finally:
        image.close()
    return Decoded(array, width, height)


def check_whole(
    source: ImageSource,
    *,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_side: int = 1024,
    budget: DecodeBudget | None = None,
) -> tuple[int, int]:
    """``(width, height)`` of ``source`` once every byte of it has been checked: a PNG's chunk
    checksums up to its end chunk (Pillow's ``verify``), then a decode of the whole image
    (:func:`decode`, at most ``max_side`` pixels on the long side, so a JPEG is decoded reduced
    and only other formats at full size, under ``budget``). A file cut short keeps a valid
    header, so :func:`image_size` passes it; this raises :class:`UnreadableImage`
    (``truncated image data ...``) for it. Costs a full decode: for ``import-images --strict``.
    """
    image = _open(source, max_pixels)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            if image.format == "PNG":
                image.verify()  # every chunk's CRC, the end chunk included; no pixel decoded
    except Exception as exc:  # OSError, SyntaxError from a cut or broken chunk
        text = str(exc)
        word = "truncated image data" if "truncated" in text.lower() else "broken image data"
        raise UnreadableImage(f"{word} ({text})", _describe(source)) from None
    finally:
        image.close()
    decoded = decode(source, max_pixels=max_pixels, max_side=max_side, budget=budget)
    return decoded.width, decoded.height


def read_rgb(
    source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS, max_side: int = 0
) -> np.ndarray:
    """Decode ``source`` (a path or the file's bytes) to an ``(H, W, 3)`` uint8 RGB array;
    :func:`decode` without the image size. ``max_side`` > 0 reduces the long side to it."""
    return decode(source, max_pixels=max_pixels, max_side=max_side).array


def try_read_rgb(
    source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS, max_side: int = 0
) -> tuple[np.ndarray | None, str | None]:
    """Like :func:`read_rgb`, but returns ``(array, None)`` or ``(None, detail)``."""
    try:
        return read_rgb(source, max_pixels=max_pixels, max_side=max_side), None
    except UnreadableImage as exc:
        return None, exc.detail


def study_image_path(study_root: Path | str, path: str) -> Path:
    """An ``images.path`` as a file path: relative paths are inside the study directory,
    ``~`` is the user's home (the one rule for the label stage, thumbnails and pages)."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else Path(study_root) / p
