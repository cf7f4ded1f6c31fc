"""A chat-completions server on the loopback address, for tests and benchmarks of the
``openai:`` text generator. Nothing here is used by a stage.

:class:`ChatServer` binds ``127.0.0.1`` on an ephemeral port, in a thread, and answers
``POST /v1/chat/completions`` the way an OpenAI-compatible server does (``choices`` with
``message.content``, ``finish_reason``; ``usage``). What it says is the test's:

- ``respond(prompt, n, seed, model) -> list[str]``: the texts of one request (``n`` of them, or fewer
  to act like a server that ignores ``n``); a text starting with ``REFUSE:`` is sent as a
  refusal (``message.refusal``, empty content, ``finish_reason`` ``content_filter``);
- ``fail(request_number, body) -> (status, headers) | None``: an error answer instead (e.g.
  ``(429, {"Retry-After": "0.05"})`` or ``(500, {})``), before anything is generated;
- ``delay_s``: seconds each answer takes (concurrency benchmarks);
- ``raw(request_number, handler) -> bool``: a hostile server (issue 33): the hook writes
  whatever it likes on ``handler.wfile`` (a body one byte a second, an endless chunked answer,
  a JSON list) and returns True, or returns False to answer normally.

Every request is logged (:attr:`ChatServer.log`: arrival time, status, body, whether an
``Authorization`` header came and its value) and counted; :meth:`ChatServer.wait_for`
polls the count with a deadline. Use it as a context manager: it is always shut down.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Respond = Callable[[str, int, int | None, str], list[str]]  # (prompt, n, seed, model)
Fail = Callable[[int, dict[str, Any]], tuple[int, dict[str, str]] | None]
Raw = Callable[[int, BaseHTTPRequestHandler], bool]


@dataclass
class Logged:
    """One request the server received."""

    number: int  # 0-based, in arrival order
    at: float  # time.monotonic() on arrival
    status: int
    body: dict[str, Any]
    authorization: str | None


class ChatServer:
    """The loopback server (module docstring)."""

    def __init__(
        self,
        respond: Respond,
        *,
        fail: Fail | None = None,
        delay_s: float = 0.0,
        max_requests: int = 100_000,
        raw: Raw | None = None,
    ) -> None:
        self.respond = respond
        self.raw = raw
        self.fail = fail
        self.delay_s = delay_s
        self.max_requests = max_requests  # a runaway client is answered 503 past this
        self.log: list[Logged] = []
        self._lock = threading.Lock()
        self._count = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                server._answer(self, raw)

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # a client with many requests in flight is not refused

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The ``api_base``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return self._count

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def wait_for(self, requests: int, timeout_s: float) -> bool:
        """True once ``requests`` requests have arrived; False at the deadline."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.count >= requests:
                return True
            time.sleep(0.01)
        return self.count >= requests

    # -- one request ------------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        arrived = time.monotonic()
        with self._lock:
            number = self._count
            self._count += 1
        auth = handler.headers.get("Authorization")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {}
        if self.raw is not None:
            try:
                wrote = self.raw(number, handler)
            except OSError:  # the client went away mid-answer: what a hostile test expects
                wrote = True
            if wrote:
                with self._lock:
                    self.log.append(Logged(number, arrived, 0, body, auth))
                handler.close_connection = True
                return
        status, headers, payload = 200, {}, None
        if handler.path.rstrip("/") != "/v1/chat/completions":
            status, payload = 404, {"error": {"message": f"no route {handler.path}"}}
        elif number >= self.max_requests:
            status, payload = 503, {"error": {"message": "test server request limit"}}
        elif self.fail is not None and (failure := self.fail(number, body)) is not None:
            status, headers = failure
            payload = {"error": {"message": f"test failure {status}"}}
        else:
            if self.delay_s:
                time.sleep(self.delay_s)
            try:
                payload = self._completion(body)
            except Exception as exc:  # noqa: BLE001  (a test's responder failed: say so)
                status, payload = 500, {"error": {"message": f"responder: {exc!r}"}}
        with self._lock:
            self.log.append(Logged(number, arrived, status, body, auth))
        data = json.dumps(payload).encode("utf-8")
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or [{}]
        prompt = str(messages[-1].get("content", ""))
        n = int(body.get("n") or 1)
        texts = self.respond(prompt, n, body.get("seed"), str(body.get("model", "")))
        choices = []
        for i, text in enumerate(texts):
            if text.startswith("REFUSE:"):
                message = {"role": "assistant", "content": "", "refusal": text[7:].strip()}
                finish = "content_filter"
            else:
                message = {"role": "assistant", "content": text}
                finish = "stop"
            choices.append({"index": i, "message": message, "finish_reason": finish})
        words = sum(len(t.split()) for t in texts)
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body.get("model", ""),
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": words,
                "total_tokens": len(prompt.split()) + words,
            },
        }
