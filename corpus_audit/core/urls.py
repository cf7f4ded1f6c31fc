"""Telling a URL (``s3://bucket/key``) from a local path; the stores themselves are read by
:mod:`corpus_audit.backends.storage`.

A URL is ``scheme://rest`` with a scheme of two characters or more (so a Windows drive letter
``C:/`` is a path). ``file://`` URLs are local paths (:func:`local_path`).
"""

from __future__ import annotations

import re

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def scheme(spec: str) -> str:
    """The lower-case scheme of ``spec`` (``s3``, ``gs``, ``hf``...), "" for a plain path."""
    m = _URL.match(str(spec))
    return m.group(1).lower() if m else ""


def is_url(spec: str) -> bool:
    """Whether ``spec`` names an object in a store (a URL whose scheme is not ``file``)."""
    return scheme(spec) not in ("", "file")


def local_path(spec: str) -> str:
    """``spec`` with a leading ``file://`` removed (``file:///data/x`` -> ``/data/x``)."""
    return str(spec)[len("file://") :] if scheme(spec) == "file" else str(spec)
