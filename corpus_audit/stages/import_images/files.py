"""Every file an import names, checked: hashed (streaming, SHA-256) and opened (the header, or
with ``--strict`` a decode of the whole image), on the run's engine (``map_tasks``)."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from corpus_audit.backends.engines import stage_engine
from corpus_audit.backends.engines.base import Progress, Resources
from corpus_audit.core import interrupts
from corpus_audit.core.imagefile import DecodeBudget, UnreadableImage, check_whole, image_size
from corpus_audit.core.store import StageRun, Study


class Stop(Protocol):
    """What a hashing thread asks between blocks: whether the command is stopping."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class Checked:
    """A file read and hashed: ``reason`` is None when it is a usable image."""

    sha256: str | None
    n_bytes: int
    width: int | None
    height: int | None
    reason: str | None  # missing_file | unreadable | not_an_image
    detail: str | None


def check_file(
    path: Path,
    max_pixels: int,
    *,
    whole: bool = False,
    budget: DecodeBudget | None = None,
    stop: Stop | None = None,
) -> Checked:
    """Hash (streaming) and open (header only) one image file. Anything but a regular file (a
    FIFO, a device, a socket, a folder) is refused by its type before a byte is read: it is
    opened without blocking and checked with ``fstat`` (a FIFO would block a read forever). The
    file is hashed in blocks of :data:`_BLOCK` bytes, so a 1 GB file costs one block of memory
    per hashing thread, not 1 GB.

    ``whole`` (``--strict``): every byte is checked too, by a decode of the whole image
    (:func:`~corpus_audit.core.imagefile.check_whole`, full-size pixels bounded by ``budget``):
    a file cut short keeps a valid header and passes the header check alone.

    ``stop``: once set, the hashing ends at the next block (:class:`_Stopped`), so that Ctrl-C
    or SIGTERM does not wait for a huge file to be read to its end."""
    size = functools.partial(check_whole, budget=budget) if whole else image_size
    try:
        sha, n_bytes, head, same = _hash_regular(path, stop, _header_verdict)
    except _NotAnImage as exc:  # told by its first block: the rest is never read
        return Checked(None, exc.size, None, None, "not_an_image", exc.detail)
    except _NotRegular as exc:
        return Checked(None, 0, None, None, "unreadable", f"not a regular file ({exc})")
    except FileNotFoundError:
        return Checked(None, 0, None, None, "missing_file", "no such file")
    except OSError as exc:
        return Checked(None, 0, None, None, "unreadable", f"cannot read: {exc.strerror or exc}")
    try:
        if n_bytes <= len(head):  # the whole file was kept: the header of exactly these bytes
            width, height = size(head, max_pixels=max_pixels)
        elif same():  # a larger file: its header read again, from the file just hashed
            width, height = size(path, max_pixels=max_pixels)
        else:
            return Checked(sha, n_bytes, None, None, "unreadable", "changed while it was read")
    except UnreadableImage as exc:
        reason = "not_an_image" if "not a recognised image" in exc.detail else "unreadable"
        return Checked(sha, n_bytes, None, None, reason, exc.detail)
    return Checked(sha, n_bytes, width, height, None, None)


_BLOCK = 1 << 20  # bytes hashed at a time; files up to 4 blocks are also kept for their header
_KEEP = 4 * _BLOCK


class _NotRegular(Exception):
    pass


class _NotAnImage(Exception):
    """A file whose first block is no image format Pillow knows (:func:`_header_verdict`)."""

    def __init__(self, detail: str, size: int) -> None:
        super().__init__(detail)
        self.detail, self.size = detail, size


def _header_verdict(first: bytes) -> str | None:
    """Why a file beginning with ``first`` (its first block, :data:`_BLOCK` bytes) is not an
    image, or None when it may be one (a header Pillow recognises, or one it cannot tell from
    these bytes alone). Checked before the rest of a larger file is read, so a 1 GB file that
    is no image costs one block, not a full read (issue 33, M10)."""
    try:
        image_size(first)
    except UnreadableImage as exc:
        if "not a recognised image" in exc.detail:
            return exc.detail
    return None


class _Stopped(Exception):
    """The command is unwinding (Ctrl-C, SIGTERM, an error): a hashing thread stops."""


class Signalled:
    """:class:`Stop` set once a signal asked the command to stop (Ctrl-C, SIGTERM) since it was
    made (:func:`corpus_audit.core.interrupts.requested`): set in the signal handler, before
    the main thread unwinds, so a hashing thread ends at its next block while the engine's pool
    waits for it."""

    def __init__(self) -> None:
        self.before = interrupts.requested()

    def is_set(self) -> bool:
        # in another process (a Ray worker) nothing is requested: the hashing runs on
        now = interrupts.requested()
        return now is not None and now is not self.before


#: one file's check: it waits on the disk and releases the GIL while hashing, so four run per
#: CPU (the local engine's default 2 threads: 8 files at once, the pool this replaced)
HASH_RESOURCES = Resources(num_cpus=0.25)


@functools.lru_cache(maxsize=8)
def shared_budget(pixels: int) -> DecodeBudget:
    """The one :class:`DecodeBudget` of ``pixels`` of this process, shared by the threads that
    decode whole images (``--strict``); made where the check runs, so the units stay picklable."""
    return DecodeBudget(pixels)


def _check(path: Path, *, max_pixels: int, whole: bool, stop: Stop) -> Checked:
    """One unit of :func:`check_all`: :func:`check_file` with the shared budget when ``whole``."""
    budget = shared_budget(max_pixels) if whole else None
    return check_file(path, max_pixels, whole=whole, budget=budget, stop=stop)


def check_all(
    study: Study,
    run: StageRun,
    paths: Sequence[Path],
    *,
    whole: bool = False,
    progress: bool = False,
) -> list[Checked]:
    """:func:`check_file` of every path (``max_pixels``: ``images.max_pixels``; ``whole``: a
    decode of every file, the decodes of one process sharing one budget of full-size pixels)
    on the run's engine (``map_tasks``, :data:`HASH_RESOURCES`), in order. When the command is
    stopped (Ctrl-C, SIGTERM), the files not started are cancelled and the ones being hashed
    stop at their next block (:class:`Signalled`): the command ends in well under a second,
    not when every file has been read (issue 33, High 3). ``progress``: a bar of the files."""
    check = functools.partial(
        _check, max_pixels=study.config.images.max_pixels, whole=whole, stop=Signalled()
    )
    engine = stage_engine(study.config.engine, run)
    bar = Progress("import-images", "file", total=len(paths), enabled=progress)
    with interrupts.noting_signals():  # the API: a Ctrl-C is recorded as it is raised
        results = engine.map_tasks(check, enumerate(paths), resources=HASH_RESOURCES, progress=bar)
        return [checked for _, checked in results]


def _hash_regular(
    path: Path,
    stop: Stop | None = None,
    verdict: Callable[[bytes], str | None] | None = None,
) -> tuple[str, int, bytes, Any]:
    """(sha256, size, the first :data:`_KEEP` bytes, ``same()``) of ``path`` if it is a
    regular file (symlinks followed), else :class:`_NotRegular` naming its type. Opened with
    ``O_NONBLOCK`` so that opening a FIFO does not wait for a writer; ``same()`` says whether
    ``path`` is still the file that was hashed (same device and inode). ``verdict`` sees the
    first block of a file longer than one block: a reason it returns ends the read there
    (:class:`_NotAnImage`)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO" if stat.S_ISFIFO(mode)
                else "a folder" if stat.S_ISDIR(mode)
                else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a file"
            )  # fmt: skip
            raise _NotRegular(kind)
        digest = hashlib.sha256()
        head = bytearray()
        total = 0
        with os.fdopen(fd, "rb", closefd=False) as fh:
            while block := fh.read(_BLOCK):
                if stop is not None and stop.is_set():
                    raise _Stopped
                if total == 0 and verdict is not None and len(block) < st.st_size:
                    reason = verdict(block)
                    if reason is not None:
                        raise _NotAnImage(reason, st.st_size)
                digest.update(block)
                total += len(block)
                if len(head) < _KEEP:
                    head += block[: _KEEP - len(head)]
    finally:
        os.close(fd)

    def same() -> bool:
        try:
            now = os.stat(path)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) and stat.S_ISREG(now.st_mode)

    return digest.hexdigest(), total, bytes(head), same
