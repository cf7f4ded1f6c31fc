"""Advisory locks that keep ``config set`` and the stages of one study apart.

Two :func:`fcntl.flock` locks, both released by the kernel when their holder exits, however
it exits (kill -9 included), so a lock never outlives its process and no lock file is left
behind (the study folder holds only what it held before):

- **the run lock**, on the study directory itself: every stage body holds it *shared*
  (:func:`run_lock`, taken by :meth:`corpus_audit.core.store.Study.stage`, by
  :func:`corpus_audit.core.pipeline.run_all` for a whole run and by a stage verb around its
  flags), so stages never exclude each other here (two writers of one ``study.duckdb`` are
  refused by DuckDB itself);
- **the config lock**, on ``study.toml``: ``config set`` holds it *exclusively* around
  read-validate-replace (:func:`config_lock`), so concurrent edits queue instead of losing one
  another's keys. ``study.toml`` is replaced by a rename, so the lock is taken again on the new
  file when the path no longer names the locked one.

Inside the config lock, ``config set`` also takes the run lock exclusively without waiting:
when a stage holds it, ``config set`` fails at once with one line naming the holder's pid
(read from ``/proc/locks``, Linux; "pid unknown" elsewhere) rather than changing the settings
a run is using. A stage waits up to :data:`LOCK_WAIT_S` for a ``config set`` to finish (it
holds the lock for milliseconds). Where a lock cannot be opened or taken (no such folder, a
file system without ``flock``) nothing is locked and the command goes on (to its own error,
if any).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from corpus_audit.core.errors import StudyError, printable

LOCK_WAIT_S = 30.0  # longest wait for the other side's lock, seconds
_POLL_S = 0.01  # seconds between two tries of a lock held by another process


def _open(path: Path, flags: int) -> int | None:
    """A descriptor of ``path`` to lock (not inherited by child processes), or None."""
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except OSError:
        return None


def _try(fd: int, operation: int) -> bool:
    """``flock(fd, operation | LOCK_NB)``: True when taken (or when the file system cannot
    lock at all: some network file systems refuse ``flock`` on a folder; then nothing is
    locked), False when another process holds it."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EBADF, EINVAL: no locking here, as where the lock cannot open
        return True
    return True


def holders(fd: int) -> list[int]:
    """The pids of the processes holding a ``flock`` on the file of ``fd``, from
    ``/proc/locks`` (empty where that does not exist, or a holder is in another pid
    namespace)."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    found = []
    with suppress(OSError), open("/proc/locks", encoding="ascii", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if "->" in parts or len(parts) < 6 or parts[1] != "FLOCK":
                continue  # a waiter's line, or a POSIX (fcntl) lock
            if parts[5] == inode and parts[4].isdigit() and int(parts[4]):
                found.append(int(parts[4]))
    return sorted(set(found))


def _pids(fd: int) -> str:
    pids = holders(fd)
    return f"pid {', '.join(map(str, pids))}" if pids else "pid unknown"


@contextmanager
def run_lock(root: Path | str) -> Iterator[None]:
    """Hold the run lock of the study in ``root`` shared while the block runs (a stage).

    Nests freely (shared locks do not exclude each other, even in one process). Waits up to
    :data:`LOCK_WAIT_S` while a ``config set`` holds it, then a :class:`StudyError`.
    """
    fd = _open(Path(root), os.O_RDONLY | os.O_DIRECTORY)
    if fd is None:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while not _try(fd, fcntl.LOCK_SH):
            if time.monotonic() > deadline:
                raise StudyError(
                    f"{printable(root)}: study.toml is being changed by another process "
                    f"({_pids(fd)}); try again when it ends"
                )
            time.sleep(_POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock


def _lock_config_file(path: Path) -> int | None:
    """A descriptor of ``path`` (``study.toml``) locked exclusively: waits for other editors
    (at most :data:`LOCK_WAIT_S`), and locks again when the file was replaced meanwhile."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        fd = _open(path, os.O_RDONLY)
        if fd is None:
            return None
        while not _try(fd, fcntl.LOCK_EX):
            if time.monotonic() > deadline:
                message = f"{printable(path)}: being changed by another process ({_pids(fd)})"
                os.close(fd)
                raise StudyError(f"{message}; try again when it ends")
            time.sleep(_POLL_S)
        with suppress(OSError):
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        os.close(fd)  # replaced (or removed) while this process waited: lock the new one


@contextmanager
def config_lock(root: Path | str, config_name: str = "study.toml") -> Iterator[None]:
    """Hold the config lock of the study in ``root`` and its run lock, both exclusively,
    while the block runs (``config set``: read, validate, replace ``study.toml``).

    Waits for another ``config set`` (at most :data:`LOCK_WAIT_S`); a stage of the study
    running is a :class:`StudyError` at once: "a run of this study is in progress (pid N)".
    """
    root = Path(root)
    config_fd = _lock_config_file(root / config_name)
    dir_fd = _open(root, os.O_RDONLY | os.O_DIRECTORY) if config_fd is not None else None
    try:
        if dir_fd is not None and not _try(dir_fd, fcntl.LOCK_EX):
            raise StudyError(
                f"{printable(root)}: a run of this study is in progress ({_pids(dir_fd)}); "
                "try again when it ends"
            )
        yield
    finally:
        for fd in (dir_fd, config_fd):
            if fd is not None:
                os.close(fd)
