"""File-name-safe names (slugs) of model ids, prompt keys and image ids.

One rule: every run of characters outside ``A-Z a-z 0-9 . _ -`` becomes ``sep``. The options
reproduce, exactly, the names each caller has always written (image files and cache
directories already on disk are found under the same names): do not change a caller's
options, or stored images and caches are no longer found.

File systems bound a name in *bytes* (255 on Linux and macOS), not characters: a name cut to
80 characters is 320 bytes of astral-plane letters. :func:`cut_bytes` cuts a name to a number
of UTF-8 bytes, with a hash of the whole name, so two long names stay two names.
"""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(
    text: str,
    *,
    sep: str = "_",
    lower: bool = False,
    strip: str | None = None,
    max_len: int | None = None,
    empty: str = "_",
) -> str:
    """``text`` with unsafe runs replaced by ``sep``, then ``strip`` characters (default
    ``sep``) removed from both ends, cut to ``max_len`` characters; ``empty`` if nothing is
    left. ``lower`` lower-cases first."""
    out = _UNSAFE.sub(sep, text.lower() if lower else text)
    out = out.strip(sep if strip is None else strip)
    if max_len is not None:
        out = out[:max_len]
    return out or empty


#: hex digits of the SHA-256 of the whole name that :func:`cut_bytes` adds to a cut name
HASH_DIGITS = 10


def cut_bytes(name: str, max_bytes: int, *, whole: str | None = None) -> str:
    """``name`` if its UTF-8 form is at most ``max_bytes`` (>= 16) bytes, else its longest
    prefix (whole characters) that leaves room for ``-`` and :data:`HASH_DIGITS` hex digits of
    the SHA-256 of ``whole`` (default ``name``: give the unslugged text, so that two texts with
    one slug are told apart). Stable across runs; short names are unchanged."""
    if max_bytes < HASH_DIGITS + 6:
        raise ValueError(f"cut_bytes: max_bytes {max_bytes} < {HASH_DIGITS + 6}")
    if len(name.encode("utf-8")) <= max_bytes:
        return name
    digest = hashlib.sha256((name if whole is None else whole).encode("utf-8", "surrogatepass"))
    room = max_bytes - HASH_DIGITS - 1
    head = name.encode("utf-8")[:room].decode("utf-8", "ignore")  # no half character
    return f"{head}-{digest.hexdigest()[:HASH_DIGITS]}"
