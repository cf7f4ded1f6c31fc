"""A loopback HTTP server that speaks the OpenAI images endpoint, for tests (no network).

:class:`ImagesServer` binds ``127.0.0.1`` on a free port and answers ``POST
<anything>/images/generations`` the way the API does: ``{"created", "data": [{"b64_json",
"revised_prompt"}], "usage"?}``. What each request gets is scripted per prompt text, in order
(``plan={"A photo of a nurse.": ["429", "ok", "500"]}``; after the list, ``"ok"``):

- ``"ok"``: the image ``image_for(prompt)`` returns (PNG bytes), the revised prompt
  ``revise(prompt)``;
- ``"429"``: ``429`` with ``Retry-After: <retry_after>`` and the API's rate-limit error body;
- ``"500"``: ``500`` with a server-error body;
- ``"refuse"``: ``400`` with ``{"error": {"code": "content_policy_violation", ...}}``;
- ``"slow"``: waits ``slow_seconds`` (longer than the client's timeout) before answering
  ``"ok"`` (the client has given up by then and asks again);
- ``"redirect"``: ``307`` to ``http://127.0.0.1:9/elsewhere`` (a client must not follow it
  with its key; nothing listens there).

Every request is recorded (:attr:`ImagesServer.requests`: prompt, outcome, whether the
``Authorization`` header carried ``expected_key``, time). A request without the expected key is
answered ``401``. ``max_requests`` bounds the work: beyond it every answer is ``503`` (a client
with a bounded number of attempts then gives up), so no test can loop for ever.

Use it as a context manager; :meth:`stop` shuts it down and joins its thread::

    with ImagesServer(image_for=lambda p: png_bytes) as server:
        config.generate.api_base = server.base_url
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OUTCOMES = ("ok", "429", "500", "refuse", "slow", "redirect")


@dataclass
class Recorded:
    """One request the server saw."""

    prompt: str
    outcome: str
    authorized: bool
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class ImagesServer:
    """The scripted images endpoint (see the module docstring)."""

    image_for: Callable[[str], bytes]
    _: KW_ONLY
    plan: dict[str, list[str]] | None = None
    revise: Callable[[str], str] | None = None
    expected_key: str | None = None
    retry_after: str = "0"
    slow_seconds: float = 1.5
    max_requests: int = 1000
    usage: dict[str, Any] | None = None
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        for prompt, steps in (self.plan or {}).items():
            bad = [s for s in steps if s not in OUTCOMES]
            if bad:
                raise ValueError(f"plan for {prompt!r}: unknown outcomes {bad} ({OUTCOMES})")
        self.plan = {k: list(v) for k, v in (self.plan or {}).items()}
        self.revise = self.revise or (lambda p: f"{p} Revised by the test server.")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ImagesServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> ImagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def outcomes(self, prompt: str | None = None) -> list[str]:
        with self._lock:
            return [r.outcome for r in self.requests if prompt is None or r.prompt == prompt]

    def _next(self, prompt: str, authorized: bool, body: dict[str, Any]) -> str:
        with self._lock:
            if len(self.requests) >= self.max_requests:
                outcome = "over_limit"
            elif not authorized:
                outcome = "unauthorized"
            else:
                steps = self.plan.get(prompt)
                outcome = steps.pop(0) if steps else "ok"
            self.requests.append(Recorded(prompt, outcome, authorized, body))
            return outcome

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return

            def _send(
                self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (
                    BrokenPipeError,
                    ConnectionResetError,
                ):  # the client gave up (timeout, kill)
                    pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    self._send(400, {"error": {"code": "invalid_json", "message": "bad JSON"}})
                    return
                if not self.path.rstrip("/").endswith("/images/generations"):
                    self._send(404, {"error": {"code": "not_found", "message": self.path}})
                    return
                prompt = str(body.get("prompt", ""))
                auth = self.headers.get("Authorization", "")
                ok = server.expected_key is None or auth == f"Bearer {server.expected_key}"
                outcome = server._next(prompt, ok, body)
                if server.delay:
                    server._stop.wait(server.delay)
                if outcome == "over_limit":
                    self._send(503, {"error": {"code": "over_limit", "message": "test limit"}})
                elif outcome == "unauthorized":
                    self._send(401, {"error": {"code": "invalid_api_key", "message": "bad key"}})
                elif outcome == "429":
                    self._send(
                        429,
                        {"error": {"code": "rate_limit_exceeded", "message": "Rate limit reached"}},
                        {"Retry-After": server.retry_after},
                    )
                elif outcome == "500":
                    self._send(
                        500,
                        {"error": {"code": "server_error", "message": "The server had an error"}},
                    )
                elif outcome == "redirect":
                    self._send(
                        307,
                        {"error": {"code": "moved", "message": "elsewhere"}},
                        {"Location": "http://127.0.0.1:9/elsewhere"},
                    )
                elif outcome == "refuse":
                    self._send(
                        400,
                        {"error": {"code": "content_policy_violation", "type": "invalid_request_error",
                                   "message": "Your request was rejected as a result of our safety system."}},
                    )  # fmt: skip
                else:
                    if outcome == "slow":
                        server._stop.wait(server.slow_seconds)
                    answer: dict[str, Any] = {
                        "created": int(time.time()),
                        "data": [{"b64_json": base64.b64encode(server.image_for(prompt)).decode(),
                                  "revised_prompt": server.revise(prompt)}],
                    }  # fmt: skip
                    if server.usage is not None:
                        answer["usage"] = server.usage
                    self._send(200, answer)

        return Handler
