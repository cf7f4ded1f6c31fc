"""File-name-safe names (slugs) of model ids, prompt keys and image ids.

One rule: every run of characters outside ``A-Z a-z 0-9 . _ -`` becomes ``sep``. The options
reproduce, exactly, the names each caller has always written (image files and cache
directories already on disk are found under the same names): do not change a caller's
options, or stored images and caches are no longer found.
"""

from __future__ import annotations

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
