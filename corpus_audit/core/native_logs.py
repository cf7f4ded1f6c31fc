"""Silence the log lines C++ libraries write straight to file descriptor 2.

MediaPipe's LiteRT/TFLite runtime and absl log ``INFO: [environment.cc:36] ...``,
``W0000 00:00:... inference_runner_litert.cc:1433] ...`` and the like to the process's
stderr when a model loads, runs its first image and closes; no environment variable
(``GLOG_minloglevel``, ``TF_CPP_MIN_LOG_LEVEL``) reaches them. :func:`quiet_native_logs`
points fd 2 at a temporary file for the block and afterwards writes back every line that is
not such an informational or warning log line (errors, Python's own output, progress bars),
so nothing a user needs is lost.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

# An INFO or WARNING line of LiteRT/TFLite (`INFO: [file.cc:12] ...`, `INFO: Created
# TensorFlow Lite XNNPACK delegate for CPU.`, `WARNING: Logging before InitGoogle() ...`) or
# of absl/glog (`I0000 00:00:1795882814.993664 4042 file.cc:1433] ...`, `W...`). Error
# lines (`ERROR:`, `E0000`, `F0000`) are kept.
NATIVE_LOG_LINE = re.compile(
    r"^(?:(?:INFO|WARNING): (?:\[[\w.\-]+:\d+\]|Created TensorFlow Lite|Logging before InitGoogle"
    r"|Initialized TensorFlow Lite)"
    r"|[IW]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [\w.\-]+:\d+\]"
    r"|All log messages before absl::InitializeLog\(\))"
)

_lock = threading.RLock()
_depth = 0


def is_native_log(line: str) -> bool:
    """Whether ``line`` is an informational or warning line of LiteRT/TFLite or absl."""
    return NATIVE_LOG_LINE.match(line) is not None


@contextmanager
def quiet_native_logs() -> Iterator[None]:
    """Run the block with fd 2 captured; then write back what it held, less the native log
    lines (:func:`is_native_log`). Reentrant; one block at a time per process (fd 2 is
    shared by every thread). Where fd 2 cannot be duplicated the block runs as is."""
    global _depth
    with _lock:
        if _depth:
            _depth += 1
            try:
                yield
            finally:
                _depth -= 1
            return
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield
            return
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), 2)
            _depth = 1
            try:
                yield
            finally:
                _depth = 0
                with suppress(OSError, ValueError):
                    sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                capture.seek(0)
                _write_back(capture.read().decode("utf-8", errors="replace"))


def _write_back(text: str) -> None:
    """``text`` (what fd 2 received in the block) to stderr, less the native log lines."""
    kept = [line for line in text.splitlines(keepends=True) if not is_native_log(line)]
    if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()
