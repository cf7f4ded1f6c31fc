"""Real OpenAI-compatible servers as subprocesses on the loopback address, for
``tests/backends/test_real_servers.py``: a free port, processes started with their output in a
log file, a readiness poll with a deadline (a server that never comes up fails the test with
its log's tail, it cannot hang the suite) and a stop that ends each process by its id
(SIGTERM, then SIGKILL after a grace period)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: the environment every server process runs in: offline, no update check
SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_UPDATE_CHECK": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout_s: float = 2.0) -> Any:
    """The JSON of ``GET url`` (one try, ``timeout_s`` seconds), or None on any failure."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 - loopback
            return json.loads(answer.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None


class Servers:
    """Processes started in order, each with its output in ``log_dir/<name>.log``; a context
    manager that stops them all (in reverse order) on exit."""

    def __init__(self, log_dir: Path, *, env: dict[str, str] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, **SERVER_ENV, **(env or {})}
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start ``argv`` (no shell) with its output in ``<name>.log``."""
        with (self.log_dir / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                list(argv), stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.log_dir
            )
        self.procs.append((name, proc))
        return proc

    def wait_for(self, what: str, ready: Callable[[], bool], deadline_s: float) -> float:
        """Poll ``ready`` every 0.2 s until it is true (seconds waited), or raise
        :class:`RuntimeError` naming ``what`` with each log's tail once a process exits or
        ``deadline_s`` seconds pass."""
        start = time.monotonic()
        while time.monotonic() - start < deadline_s:
            if ready():
                return time.monotonic() - start
            dead = [name for name, proc in self.procs if proc.poll() is not None]
            if dead:
                raise RuntimeError(f"{what}: {', '.join(dead)} exited\n{self.tails()}")
            time.sleep(0.2)
        raise RuntimeError(f"{what}: not ready within {deadline_s:g} s\n{self.tails()}")

    def tails(self, chars: int = 1500) -> str:
        """The last ``chars`` characters of every process's log."""
        out = []
        for name, _ in self.procs:
            text = (self.log_dir / f"{name}.log").read_text(encoding="utf-8", errors="replace")
            out.append(f"--- {name} ---\n{text[-chars:]}")
        return "\n".join(out)

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM each process by its id (last started first), SIGKILL it after ``grace_s``."""
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(grace_s)
        self.procs.clear()

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
