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
import shutil
from collections.abc import Iterator
from pathlib import Path

from corpus_audit.core.errors import StudyError, printable


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


def entries_now(folder: Path) -> set[Path] | None:
    """The entries of ``folder`` (None when it is not a folder yet): what
    :func:`remove_new` leaves alone."""
    return set(folder.iterdir()) if folder.is_dir() else None


def remove_new(folder: Path, before: set[Path] | None) -> None:
    """Undo what a failed first write created in ``folder``: the folder itself when it did not
    exist (``before`` None), else the entries not in ``before`` (:func:`entries_now`); what the
    folder held before is left alone, and a link is removed, never followed."""
    if before is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for path in set(folder.iterdir()) - before:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def link_in(root: Path | str, path: Path | str) -> Path | None:
    """The first symbolic link among ``path`` and its folders below ``root`` (``root`` itself
    not counted: where a study lies is its owner's choice), or None. ``path`` must lie under
    ``root`` lexically (it is never resolved: resolving is what a link would abuse)."""
    base = Path(os.path.abspath(root))
    target = Path(os.path.abspath(path))
    try:
        parts = target.relative_to(base).parts
    except ValueError:
        return None
    here = base
    for part in parts:
        here = here / part
        if os.path.islink(here):
            return here
        if not os.path.lexists(here):
            return None
    return None


def refuse_links(root: Path | str, path: Path | str, *, tree: bool = False) -> Path:
    """``path`` when neither it nor a folder between ``root`` and it is a symbolic link (and,
    with ``tree``, nothing inside the folder ``path`` is one); else a
    :class:`~corpus_audit.core.errors.StudyError` naming the link and where it points. Every
    delete and replace under a study goes through here first, so a study received from someone
    else cannot make the tool remove or write files outside it."""
    found = link_in(root, path)
    if found is None and tree and os.path.isdir(path) and not os.path.islink(path):
        for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
            for name in (*dirnames, *filenames):
                if os.path.islink(os.path.join(dirpath, name)):
                    found = Path(dirpath) / name
                    break
            if found is not None:
                break
    if found is None:
        return Path(path)
    try:
        where = os.readlink(found)
    except OSError:
        where = "?"
    raise StudyError(
        f"{printable(found)}: is a symbolic link (to {printable(where)}); refused: files under a "
        "study are never written or removed through a link (remove the link, or copy what it "
        "points to into its place)"
    )


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # renameat2(2) flag: swap two paths atomically (Linux >= 3.15)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` in one atomic step (Linux ``renameat2`` with
    ``RENAME_EXCHANGE``); False where the system or file system cannot."""
    import ctypes
    import errno
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_dir(new: Path | str, target: Path | str) -> Path | None:
    """Put the folder ``new`` in the place of ``target`` (same parent folder). Where there is
    no ``target``, one rename; else the two are swapped in one atomic step where the system
    can (Linux), so ``target`` is at every instant either the old folder or the new one, and
    the old one is then at ``new``'s path, returned for the caller to remove. Elsewhere the
    old folder is renamed aside first (a kill between the two renames leaves no ``target``,
    the old folder beside it). Returns where the old folder now is, or None."""
    new, target = Path(new), Path(target)
    if not os.path.lexists(target):
        os.rename(new, target)
        return None
    if _exchange(new, target):
        return new
    aside = new.with_name(new.name + ".old")
    os.rename(target, aside)
    os.rename(new, target)
    return aside
