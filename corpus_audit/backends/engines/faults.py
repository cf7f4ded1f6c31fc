"""Injected faults: make the first attempt of work units fail, to check that an engine
retries them and that the study gets every unit's rows exactly once.

The tests use it, and so can a user who wants to see their cluster recover before an
expensive run (a "chaos drill")::

    fn = FailFirstAttempt(scan_fn, marker_dir, how="exit", limit=2)
    list(engine.map_tasks(fn, units))   # two units kill their worker once, then succeed

A unit is recognised across attempts by a hash of its payload's ``repr`` (stable for the
dataclasses, tuples and strings the stages send); the first attempt writes a marker file in
``marker_dir`` (which every worker must see: a local or shared directory) and fails, a
later attempt finds the marker and runs normally. ``limit`` caps how many distinct units
fail (two workers racing may exceed it by one). Faults are never injected unless this
wrapper is used explicitly.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.backends.engines.base import close_worker

HOW = ("raise", "exit")


class InjectedFault(OSError):
    """The error a ``how="raise"`` fault raises: an :class:`OSError`, like a flaky network
    read, so the Ray engine's default ``retry_exceptions`` retry it."""


def marker_name(payload: Any) -> str:
    """The marker file name of a unit: 16 hex digits of SHA-256 over ``repr(payload)``."""
    return hashlib.sha256(repr(payload).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _fail_once(marker_dir: Path, payload: Any, how: str, limit: int | None) -> None:
    marker = marker_dir / marker_name(payload)
    if marker.exists():
        return  # a retry: run normally
    if limit is not None and sum(1 for _ in marker_dir.iterdir()) >= limit:
        return
    marker.write_text(f"pid {os.getpid()}\n", encoding="utf-8")
    if how == "exit":
        os._exit(17)  # the worker process dies without cleanup, like a SIGKILL or an OOM kill
    raise InjectedFault(f"injected fault on the first attempt of unit {marker.name}")


@dataclass(frozen=True)
class FailFirstAttempt:
    """Wraps a task function: the first attempt of a unit fails, later attempts call ``fn``.

    ``how``: ``"raise"`` raises :class:`InjectedFault`; ``"exit"`` ends the worker process
    at once (``os._exit``). ``limit``: at most this many distinct units fail (None: all).
    """

    fn: Callable[[Any], Any]
    marker_dir: Path
    how: str = "raise"
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.how not in HOW:
            raise ValueError(f"how must be one of {HOW}, got {self.how!r}")

    def __call__(self, payload: Any) -> Any:
        _fail_once(Path(self.marker_dir), payload, self.how, self.limit)
        return self.fn(payload)


@dataclass(frozen=True)
class FailingWorkerFactory:
    """Wraps an actor factory: the workers it builds fail the first attempt of a unit."""

    factory: Callable[[], Any]
    marker_dir: Path
    how: str = "exit"
    limit: int | None = None

    def __call__(self) -> FailFirstAttempt:
        worker = self.factory()
        return _FailingWorker(worker, Path(self.marker_dir), self.how, self.limit)


@dataclass(frozen=True)
class _FailingWorker(FailFirstAttempt):
    def close(self) -> None:
        close_worker(self.fn)
