"""A real S3-compatible server for the tests: moto's server mode on 127.0.0.1 (a free port),
and a small fault-injecting HTTP proxy in front of it (503 SlowDown, 403 AccessDenied, 400;
also used in front of the GCS emulator of ``gcs_server``), both started and stopped by the
test. Nothing here ever talks to another address."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST = "127.0.0.1"
TIMEOUT_S = 30  # every proxied request is bounded


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class MotoServer:
    """moto's S3 server in this process (``ThreadedMotoServer``) on 127.0.0.1."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address=HOST, port=self.port, verbose=False)
        self.url = f"http://{HOST}:{self.port}"

    def __enter__(self) -> MotoServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


@dataclass
class Faults:
    """What the proxy does: answer 503 SlowDown to the next ``slow_down`` GET requests, 403
    AccessDenied to every request whose path contains ``deny`` (when set), 400 BadRequest to
    every request whose path contains ``reject`` (when set), and hold every GET ``delay_s``
    seconds before forwarding it (a slow store). ``gets`` counts GETs."""

    slow_down: int = 0
    deny: str = ""
    reject: str = ""
    delay_s: float = 0.0
    served_503: int = 0
    requests: int = 0
    gets: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
_BAD_REQUEST = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadRequest</Code>'
    b"<Message>The request cannot be served.</Message></Error>"
)
_DENIED = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
    b"<Message>Access Denied</Message></Error>"
)


class _QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that says nothing when a client hangs up before its answer
    is written (gcsfs cancels the losing one of two concurrent lookups)."""

    def handle_error(self, request: object, client_address: object) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 forwarding to ``target`` (moto, or the GCS emulator) with
    :class:`Faults` injected; used as the study's ``storage.endpoint_url``."""

    def __init__(self, target_port: int) -> None:
        self.faults = Faults()
        faults = self.faults

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _forward(self) -> None:
                with faults.lock:
                    faults.requests += 1
                    if faults.deny and faults.deny in self.path:
                        return self._answer(403, _DENIED)
                    if faults.reject and faults.reject in self.path:
                        return self._answer(400, _BAD_REQUEST)
                    if faults.slow_down and self.command == "GET":
                        faults.slow_down -= 1
                        faults.served_503 += 1
                        return self._answer(503, _SLOW_DOWN)
                    if self.command == "GET":
                        faults.gets += 1
                    delay = faults.delay_s if self.command == "GET" else 0.0
                if delay:
                    time.sleep(delay)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(HOST, target_port, timeout=TIMEOUT_S)
                try:
                    conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status)
                    for k, v in resp.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection", "server", "date"):
                            self.send_header(k, v)
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self.server = _QuietServer((HOST, free_port()), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class MotoProcess:
    """moto's S3 server in its own process on 127.0.0.1: its objects are its own (every
    :class:`MotoServer` of one process shares moto's in-process backend)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.proc: object = None

    def __enter__(self) -> MotoProcess:
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((HOST, self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"moto server on port {self.port} did not start")

    def __exit__(self, *exc: object) -> None:
        proc = self.proc
        if proc is not None:
            proc.terminate()  # type: ignore[attr-defined]
            proc.wait(timeout=TIMEOUT_S)  # type: ignore[attr-defined]
