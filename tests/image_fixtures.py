"""Test images: real photos shipped in PyPI packages, and hand-built bad files.

Photos are loaded at test time from scikit-image and matplotlib (never copied into the repo):
``astronaut`` (Eileen Collins, a woman), ``camera`` (the cameraman, a man), ``grace``
(Grace Hopper, a woman) and ``lfw_subset`` face crops. Bad files are built byte by byte so each
test says exactly what is wrong with them.
"""

from __future__ import annotations

import io
import json
import struct
import tarfile
import zlib
from functools import cache
from pathlib import Path

import numpy as np


@cache
def photo(name: str) -> np.ndarray:
    """A real photo as ``(H, W, 3)`` uint8: astronaut, camera or grace."""
    import skimage.data

    if name == "astronaut":
        return np.ascontiguousarray(skimage.data.astronaut())
    if name == "camera":
        gray = skimage.data.camera()
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if name == "grace":
        from matplotlib import cbook
        from PIL import Image

        with Image.open(cbook.get_sample_data("grace_hopper.jpg")) as im:
            return np.ascontiguousarray(np.asarray(im.convert("RGB")))
    raise KeyError(name)


def lfw(kind: str = "faces", size: int = 128) -> list[np.ndarray]:
    """skimage's LFW subset: its first 100 crops are faces, the last 100 are not.

    Each 25x25 grey crop is put on a grey 50x50 canvas (some context around the face, as in
    a photo) and scaled to ``size`` px, RGB.
    """
    import skimage.data
    from PIL import Image

    crops = skimage.data.lfw_subset()
    crops = crops[:100] if kind == "faces" else crops[100:]
    out = []
    for crop in crops:
        face = (np.clip(crop, 0, 1) * 255).astype(np.uint8)
        canvas = np.full((50, 50), 128, dtype=np.uint8)
        canvas[12:37, 12:37] = face
        big = Image.fromarray(canvas).resize((size, size), Image.BICUBIC)
        out.append(np.ascontiguousarray(np.repeat(np.asarray(big)[:, :, None], 3, axis=2)))
    return out


def small_face(canvas_side: int = 800, photo_side: int = 240) -> np.ndarray:
    """Grace Hopper scaled to ``photo_side`` px on a plain canvas: a face below 10 %."""
    from PIL import Image

    small = np.asarray(Image.fromarray(photo("grace")).resize((photo_side, photo_side)))
    canvas = np.full((canvas_side, canvas_side, 3), 200, np.uint8)
    canvas[300 : 300 + photo_side, 300 : 300 + photo_side] = small
    return canvas


@cache
def shared_detector():
    """One MediaPipe full-range detector for the whole test session."""
    from corpus_audit.backends.faces import MediaPipeFaceDetector

    return MediaPipeFaceDetector("full_range", 0.5)


@cache
def shared_agegender():
    """One age-and-gender classifier for the whole test session."""
    from corpus_audit.backends.classifiers import AgeGenderClassifier

    return AgeGenderClassifier()


TINY_CLIP_CFG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


def tiny_clip_dir(folder: Path, *, with_weights_from=None) -> Path:
    """An open_clip ``local-dir:`` folder holding a tiny architecture's config (ViT, 2 layers,
    64 px, the real 49408-token BPE vocabulary) and, optionally, weights saved from a
    classifier (``open_clip_pytorch_model.bin``)."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "open_clip_config.json").write_text(
        json.dumps({"model_cfg": TINY_CLIP_CFG, "preprocess_cfg": {}})
    )
    if with_weights_from is not None:
        torch.save(with_weights_from.state_dict(), folder / "open_clip_pytorch_model.bin")
    return folder


def two_people() -> np.ndarray:
    """Astronaut (left) and cameraman (right): 300 x 300 crops around the faces, side by side."""
    left = photo("astronaut")[0:300, 100:400]
    right = photo("camera")[20:320, 90:390]
    return np.ascontiguousarray(np.concatenate([left, right], axis=1))


def encode(array: np.ndarray, fmt: str = "JPEG", **kwargs) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_raw(width: int, height: int, bit_depth: int, color_type: int, rows) -> bytes:
    """A PNG from an iterable of raw scanlines (filter byte 0 is prepended here)."""
    comp = zlib.compressobj(9)
    body = bytearray()
    for row in rows:
        body += comp.compress(b"\x00" + row)
    body += comp.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", bytes(body))
        + _png_chunk(b"IEND", b"")
    )


def png16_rgb(array8: np.ndarray) -> bytes:
    """A 16-bit-per-channel RGB PNG of an 8-bit image (value v -> v * 257)."""
    wide = array8.astype(">u2") * 257
    return png_raw(
        array8.shape[1], array8.shape[0], 16, 2, (r.tobytes() for r in wide.astype(">u2"))
    )


def png16_gray(array8: np.ndarray) -> bytes:
    """A 16-bit greyscale PNG (mean of channels, v -> v * 257)."""
    gray = array8.mean(axis=2).round().astype(np.uint16) * 257
    return png_raw(gray.shape[1], gray.shape[0], 16, 0, (r.tobytes() for r in gray.astype(">u2")))


def bomb_png(side: int = 20000) -> bytes:
    """A valid ``side x side`` 1-bit PNG of zeros: ~50 kB on disk, 400 M pixels decoded."""
    row = bytes((side + 7) // 8)
    return png_raw(side, side, 1, 0, (row for _ in range(side)))


def bad_files() -> dict[str, bytes]:
    """Name -> bytes of each bad or awkward file of the issue's list."""
    from PIL import Image

    astro = photo("astronaut")
    jpeg = encode(astro, "JPEG", quality=90)
    rgba = np.dstack([astro, np.full(astro.shape[:2], 255, np.uint8)])
    rgba[:, :256, 3] = 0  # left half fully transparent
    cmyk = io.BytesIO()
    Image.fromarray(astro).convert("CMYK").save(cmyk, format="JPEG", quality=90)
    return {
        "zero_byte.jpg": b"",
        "truncated.jpg": jpeg[: len(jpeg) // 2],
        "alpha.png": encode(rgba, "PNG"),
        "cmyk.jpg": cmyk.getvalue(),
        "rgb16.png": png16_rgb(astro),
        "gray16.png": png16_gray(astro),
        "bomb.png": bomb_png(),
        "not_an_image.jpg": b"<html>404 not found</html>",
    }


def tar_with_traversal(path: Path, members: dict[str, bytes]) -> Path:
    """A tar whose member names are used as given (``../../x.jpg`` included)."""
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


OCCUPATION_RE = r"\b(nurse|teacher|doctor|chef|pilot|photographer|designer|artist)\b"


def seed_captions(study, laion_path: Path, n: int = 12) -> list[tuple[int, str, str]]:
    """Fill ``captions``/``mentions``/``samples`` with ``n`` real LAION captions that name an
    occupation (what `select` would write), so the image stages can run without it.

    Returns ``[(caption_id, url, occupation)]`` in caption_id order.
    """
    import duckdb

    con = study.con
    reader = duckdb.connect()  # the study's connection has no file access (store.LOCKED_SETTINGS)
    rows = reader.execute(
        "SELECT (row_number() OVER () - 1) AS row_in_file, TEXT, URL FROM read_parquet(?)",
        [str(laion_path)],
    ).fetchall()
    reader.close()
    import re

    pattern = re.compile(OCCUPATION_RE)
    picked = []
    for row, text, url in rows:
        m = pattern.search((text or "").lower())
        if m and url:
            picked.append((int(row), text, url, m.group(1)))
        if len(picked) == n:
            break
    out = []
    for rank, (row, text, url, occ) in enumerate(picked, start=1):
        cid = (0 << 40) | row
        con.execute(
            "INSERT INTO captions VALUES (?, ?, ?, ?, ?)", [cid, text, url, str(laion_path), row]
        )
        con.execute("INSERT INTO mentions VALUES (?, ?, ?)", [cid, occ, occ])
        con.execute("INSERT INTO samples VALUES ('keyword', ?, NULL, ?, ?, NULL)", [occ, cid, rank])
        out.append((cid, url, occ))
    return sorted(out)
