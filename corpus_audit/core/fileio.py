"""Atomic file writes: a file is either its old content or its complete new content, never half.

Every file the tool writes outside DuckDB (study.toml, reports, CSV tables, PNG images, FAISS
indexes, manifests) goes through :func:`atomic_path`: the content is written to a temporary
file in the same directory (so the rename never crosses a file system) and renamed over the
target with :func:`os.replace`, which is atomic on POSIX and Windows. A write that fails or
is interrupted (Ctrl-C, SIGTERM) removes its temporary file and leaves the target as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on a clean exit it replaces ``path``.

    The temporary name keeps the target's suffix (``.report.html.<pid>.tmp.html``), so
    writers that pick a format from the suffix or append one (``np.save``) keep working.
    The parent directory is created when missing.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp{target.suffix}")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: Path | str, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically and return the path."""
    return write_bytes_atomic(path, text.encode("utf-8"))
