"""Stopping a run on Ctrl-C or SIGTERM: unwind, roll back the batch in flight, never cut a COMMIT.

SIGTERM is what ``timeout``, batch schedulers and container stops send; it is handled like
Ctrl-C (SIGINT): the handler raises :class:`KeyboardInterrupt` (:class:`Terminated` for
SIGTERM) in the main thread, the open transaction rolls back, stages stop their worker
processes, and the CLI exits 130 or 143 with one line. Two refinements:

- inside :func:`shielded` (the ``COMMIT`` of :meth:`corpus_audit.core.store.Study.transaction` and
  the bookkeeping right after it) the stop is deferred to the end of the block, so a batch is
  either committed and counted, or not committed;
- a signal that arrives while DuckDB runs a query comes back from DuckDB as
  ``RuntimeError('Query interrupted')``; :func:`requested` tells the CLI that it was a stop.

A second SIGTERM while the first one is being handled kills the process at once (the default
action); whatever was committed stays, and worker processes exit with their parent.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM, so the run unwinds like Ctrl-C."""


class _State:
    shield = 0  # nesting of shielded() blocks
    pending: KeyboardInterrupt | None = None  # a stop deferred to the end of the shield
    requested: KeyboardInterrupt | None = None  # the stop asked for, if any


_state = _State()


def _handler(signum: int, frame: Any) -> None:
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        exc: KeyboardInterrupt = Terminated()
    else:
        exc = KeyboardInterrupt()
    _state.requested = exc
    if _state.shield:
        _state.pending = exc
        return
    raise exc


def install() -> Callable[[], None]:
    """Handle SIGINT and SIGTERM as above (main thread only); returns a function that puts the
    previous handlers back."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _handler)
    _state.requested = _state.pending = None

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def requested() -> KeyboardInterrupt | None:
    """The stop a signal asked for since :func:`install`, or None."""
    return _state.requested


@contextmanager
def shielded() -> Iterator[None]:
    """Run the block whole: a stop signalled inside it is raised when it ends."""
    _state.shield += 1
    try:
        yield
    finally:
        _state.shield -= 1
        if not _state.shield and _state.pending is not None:
            exc, _state.pending = _state.pending, None
            raise exc


def _noting(signum: int, frame: Any) -> None:
    """Python's own SIGINT behaviour (raise KeyboardInterrupt), the stop recorded."""
    exc = KeyboardInterrupt()
    _state.requested = exc
    raise exc


@contextmanager
def noting_signals() -> Iterator[None]:
    """Inside the block, a Ctrl-C is recorded as it is raised (where Python's default SIGINT
    handler is in place: the API), so :func:`is_signal` can tell it from a
    ``KeyboardInterrupt`` code raised itself. Main thread only; elsewhere nothing changes."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    signal.signal(signal.SIGINT, _noting)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def is_signal(exc: BaseException) -> bool:
    """Whether ``exc`` (a :class:`KeyboardInterrupt` caught somewhere) is a stop a signal
    asked for, rather than one code raised itself (a plugin's ``raise KeyboardInterrupt``
    on import). Exact under :func:`install` (the CLI) and :func:`noting_signals`; a signal
    only ever interrupts the main thread, so in another thread it never is one; where SIGINT
    is ignored (a process started in the background: ``cmd &`` in a script) or ends the
    process, no signal raises one, so it never is one either; under a handler someone else
    installed, every KeyboardInterrupt counts as a signal."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handler = signal.getsignal(signal.SIGINT)
    if handler in (signal.SIG_IGN, signal.SIG_DFL, None):
        return False
    if handler not in (_handler, _noting):
        return True
    return exc is _state.requested or exc is _state.pending
