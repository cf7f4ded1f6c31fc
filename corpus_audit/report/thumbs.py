"""Downscaled image thumbnails as ``data:`` URIs, for inlining into the report."""

from __future__ import annotations

import base64
import io
from pathlib import Path

from PIL import Image

from corpus_audit.core.imagefile import study_image_path as resolve  # noqa: F401
from corpus_audit.core.imagefile import try_read_rgb

THUMB_PX = 96  # longest side, pixels


def thumbnail_uri(
    path: Path, *, size: int = THUMB_PX, max_pixels: int = 89_478_485, quality: int = 70
) -> str | None:
    """A JPEG ``data:`` URI (``quality`` 1-95) of ``path`` downscaled to ``size`` px (longest
    side), or None when the file cannot be decoded (missing, corrupt, over ``max_pixels``:
    see ``imagefile``)."""
    # decoded at a few times the thumbnail size (a large JPEG is scaled by its decoder), so a
    # report of large photos does not decode each one at full size
    array, _detail = try_read_rgb(path, max_pixels=max_pixels, max_side=max(4 * size, 512))
    if array is None:
        return None
    thumb = Image.fromarray(array)
    thumb.thumbnail((size, size))
    buf = io.BytesIO()
    thumb.save(buf, format="JPEG", quality=quality, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
