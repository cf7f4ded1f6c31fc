"""A real GCS-compatible server for the tests: ``gcp-storage-emulator`` (pure Python, the JSON
API gcsfs speaks: buckets, listing, media download with ``Range``, multipart and resumable
uploads, generations) in its own process on 127.0.0.1 (a free port), objects in memory,
started and stopped by the test with bounded waits. Nothing here talks to another address."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from s3_server import HOST, TIMEOUT_S, free_port


class GcsEmulator:
    """``python -m gcp_storage_emulator start`` on 127.0.0.1; ``url`` is what a study's
    ``storage.endpoint_url`` names. Its stdout and stderr go to ``log`` (a file path), shown
    when it does not start."""

    def __init__(self, log: str) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> GcsEmulator:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gcp_storage_emulator",
                    "start",
                    "--host",
                    HOST,
                    "--port",
                    str(self.port),
                    "--no-store-on-disk",
                    "--quiet",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection((HOST, self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        with open(self.log, encoding="utf-8", errors="replace") as fh:
            tail = fh.read()[-2000:]
        raise RuntimeError(f"gcp-storage-emulator on port {self.port} did not start: {tail}")

    def __exit__(self, *exc: object) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=TIMEOUT_S)
