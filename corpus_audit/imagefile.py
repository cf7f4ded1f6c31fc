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

Pillow's own global guard (``PIL.Image.MAX_IMAGE_PIXELS``, 2x of which raises) still applies on
top of ``max_pixels``; this module never changes Pillow's global settings.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import numpy as np

DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's default MAX_IMAGE_PIXELS
ImageSource = str | os.PathLike[str] | bytes | bytearray | memoryview

__all__ = ["DEFAULT_MAX_PIXELS", "UnreadableImage", "read_rgb", "try_read_rgb", "image_size"]


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
    from PIL import Image, UnidentifiedImageError

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
    from PIL import Image

    mode = image.mode
    if mode in {"I;16", "I;16L", "I;16B", "I;16N", "I", "F"}:
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


def read_rgb(source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode ``source`` (a path or the file's bytes) to an ``(H, W, 3)`` uint8 RGB array.

    ``max_pixels``: the largest ``width * height`` accepted (>= 1); larger images are refused
    from their header, before any pixel is decoded. Multi-frame images (GIF, TIFF) give their
    first frame. Raises :class:`UnreadableImage` for anything undecodable; never anything else
    for bad input.
    """
    from PIL import Image, ImageOps

    image = _open(source, max_pixels)
    name = _describe(source)
    try:
        with warnings.catch_warnings():
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
            try:
                oriented = ImageOps.exif_transpose(image)
            except Exception:  # a broken EXIF block must not cost the image
                oriented = image
            try:
                return _to_rgb(oriented)
            except UnreadableImage as exc:
                raise UnreadableImage(exc.detail, name) from None
            except Exception as exc:
                raise UnreadableImage(f"cannot convert image to RGB: {exc}", name) from None
    finally:
        image.close()


def try_read_rgb(
    source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS
) -> tuple[np.ndarray | None, str | None]:
    """Like :func:`read_rgb`, but returns ``(array, None)`` or ``(None, detail)``."""
    try:
        return read_rgb(source, max_pixels=max_pixels), None
    except UnreadableImage as exc:
        return None, exc.detail
