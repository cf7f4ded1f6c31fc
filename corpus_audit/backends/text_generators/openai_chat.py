"""``openai:<model>``: any OpenAI-compatible chat-completions endpoint.

vLLM (``vllm serve MODEL`` -> ``http://HOST:8000/v1``), Ollama (``http://HOST:11434/v1``),
llama.cpp's ``llama-server`` (``http://HOST:8080/v1``) and hosted APIs
(``https://api.openai.com/v1``) all take ``POST {api_base}/chat/completions`` with one user
message. Standard library only (``urllib``, threads), so no client package is needed.

- **key**: read from the environment variable whose *name* is configured
  (``llm.api_key_env``), sent as ``Authorization: Bearer``; never stored, logged, printed,
  put in an error message or in :meth:`OpenAIChat.describe`. No variable (or an empty one):
  no header (local servers need none).
- **n per request**: a request for ``n`` texts is sent as ``ceil(n / n_per_request)`` HTTP
  requests of at most ``n_per_request`` choices (``1`` for servers that ignore ``n``); a
  server that returns fewer choices than asked is asked again for the rest.
- **concurrency**: ``concurrency`` HTTP requests in flight (threads).
- **retries**: HTTP 408, 409, 429 and 5xx, connection errors and timeouts are retried up to
  ``max_retries`` times; the wait is the server's ``Retry-After`` (seconds or an HTTP date)
  when it sends one, else ``backoff_s * 2**attempt`` capped at ``max_backoff_s`` with jitter
  (a uniform factor in [0.5, 1]). Any other status fails at once with the server's message.
- **timeouts**: ``timeout_s`` per HTTP request (connect and each read).
- **refusals**: ``message.refusal`` (OpenAI's structured refusal) or a ``content_filter``
  finish reason is recorded as the text's ``refusal``; its text is what the server sent
  (often empty).
"""

from __future__ import annotations

import http.client
import json
import math
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from corpus_audit.backends.api_client import (
    RETRY_STATUSES,
    error_fields,
    opener,
    parse_retry_after,
)
from corpus_audit.backends.text_generators.base import (
    REFUSAL_FINISH_REASONS,
    Completion,
    SamplingSettings,
    TextRequest,
    known_options,
)
from corpus_audit.core.errors import ModelError, printable

DEFAULT_API_BASE = "https://api.openai.com/v1"


def split_tokens(total: int | None, texts: Sequence[str]) -> list[int | None]:
    """A request's completion tokens shared by its texts in proportion to their length
    (largest remainders), so the shares are integers that sum to ``total``."""
    if total is None:
        return [None] * len(texts)
    if not texts:
        return []
    weights = [max(len(t), 1) for t in texts]
    whole = sum(weights)
    raw = [total * w / whole for w in weights]
    shares = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (shares[i] - raw[i], i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


class OpenAIChat:
    """A chat-completions client (module docstring). ``model`` is the server's model name."""

    backend = "openai"

    def __init__(
        self,
        model: str,
        settings: SamplingSettings,
        *,
        api_base: str = DEFAULT_API_BASE,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        n_per_request: int = 100,
        timeout_s: float = 120.0,
        max_retries: int = 6,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        environ: Any = None,
    ) -> None:
        if concurrency < 1 or n_per_request < 1 or max_retries < 0:
            raise ValueError("concurrency and n_per_request must be >= 1, max_retries >= 0")
        if timeout_s <= 0 or backoff_s < 0 or max_backoff_s < 0:
            raise ValueError("timeout_s must be > 0, backoff_s and max_backoff_s >= 0")
        self.model = model
        self.name = f"{self.backend}:{model}"
        self.settings = settings
        self.api_base = api_base.rstrip("/")
        self.url = f"{self.api_base}/chat/completions"
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.n_per_request = n_per_request
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        env = os.environ if environ is None else environ
        key = env.get(api_key_env, "") if api_key_env else ""
        # kept only in the header dict, never in an attribute that describe() or repr shows
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._jitter = random.Random()
        # redirects are not followed (they would carry the key elsewhere); a loopback server is
        # reached directly, whatever proxy the environment names
        self._opener = opener(self.api_base)
        self._lock = threading.Lock()
        self.stats = {"http_requests": 0, "retries": 0, "retry_after_waits": 0}

    def __repr__(self) -> str:
        return f"OpenAIChat({self.name!r}, api_base={self.api_base!r})"

    # -- one HTTP request -----------------------------------------------------------------
    def _body(self, prompt: str, n: int, seed: int) -> dict[str, Any]:
        s = self.settings
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "n": n,
            "max_tokens": s.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
        }
        if s.send_seed:
            body["seed"] = seed
        return body

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt + 1``: the server's ``Retry-After`` when
        given, else exponential backoff capped at ``max_backoff_s`` with jitter."""
        if retry_after is not None:
            return retry_after
        base = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        with self._lock:
            return base * (0.5 + 0.5 * self._jitter.random())

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one chat-completions body, retried as the module docstring says."""
        data = json.dumps(body).encode("utf-8")
        for attempt in range(self.max_retries + 1):
            retry_after = None
            request = urllib.request.Request(self.url, data=data, headers=self._headers)
            with self._lock:
                self.stats["http_requests"] += 1
            try:
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    payload = response.read()
                try:
                    return json.loads(payload)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    reason = "the server's answer is not JSON"
            except urllib.error.HTTPError as exc:
                reason = f"HTTP {exc.code}: {_server_message(exc)}"
                if exc.code not in RETRY_STATUSES:
                    raise ModelError(f"{self.name} at {printable(self.url)}: {reason}") from None
                retry_after = parse_retry_after(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except http.client.HTTPException as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if attempt == self.max_retries:
                raise ModelError(
                    f"{self.name} at {printable(self.url)}: gave up after "
                    f"{self.max_retries + 1} attempts ({printable(reason)})"
                )
            delay = self.backoff(attempt, retry_after)
            with self._lock:
                self.stats["retries"] += 1
                self.stats["retry_after_waits"] += retry_after is not None
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _part(self, prompt: str, n: int, seed: int) -> list[Completion]:
        """``n`` completions of ``prompt`` in one HTTP request or more (a server may return
        fewer choices than asked; at most ``n`` requests)."""
        out: list[Completion] = []
        for _ in range(n):
            want = n - len(out)
            if want <= 0:
                break
            answer = self.post(self._body(prompt, want, seed))
            got = self._completions(answer, seed)[:want]
            if not got:
                raise ModelError(f"{self.name} at {printable(self.url)}: an answer without choices")
            out.extend(got)
        return out

    def _completions(self, answer: dict[str, Any], seed: int) -> list[Completion]:
        choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
        usage = answer.get("usage") or {}
        texts = []
        for choice in choices:
            message = choice.get("message") or {}
            texts.append(message.get("content") or "")
        shares = split_tokens(usage.get("completion_tokens"), texts)
        out = []
        for i, (choice, text, tokens) in enumerate(zip(choices, texts, shares, strict=True)):
            message = choice.get("message") or {}
            finish = str(choice.get("finish_reason") or "unknown")
            refusal = message.get("refusal") or (
                finish if finish in REFUSAL_FINISH_REASONS else None
            )
            out.append(
                Completion(
                    text=text,
                    finish_reason=finish,
                    completion_tokens=tokens,
                    prompt_tokens=usage.get("prompt_tokens") if i == 0 else 0,
                    refusal=refusal,
                    seed=seed if self.settings.send_seed else None,
                )
            )
        return out

    # -- the protocol ---------------------------------------------------------------------
    def stream(self, requests: Sequence[TextRequest]) -> Iterator[tuple[int, list[Completion]]]:
        """Every request's completions as it finishes; ``concurrency`` HTTP requests in flight.
        A request that fails for good raises :class:`ModelError`, after the requests in
        flight are cancelled (the finished ones were already yielded)."""
        parts: list[tuple[int, int, int]] = []  # (request, part, n)
        for index, req in enumerate(requests):
            pieces = math.ceil(req.n / self.n_per_request)
            for k in range(pieces):
                parts.append((index, k, min(self.n_per_request, req.n - k * self.n_per_request)))
        left = {i: math.ceil(r.n / self.n_per_request) for i, r in enumerate(requests)}
        results: dict[int, dict[int, list[Completion]]] = {i: {} for i in left}
        for i, req in enumerate(requests):
            if req.n == 0:
                yield i, []
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="llm")
        pending: dict[Future, tuple[int, int]] = {}
        queue = iter(parts)
        try:
            self._fill(pool, pending, queue, requests)
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index, k = pending.pop(future)
                    results[index][k] = future.result()
                    left[index] -= 1
                    if left[index] == 0:
                        ordered = [c for _, got in sorted(results.pop(index).items()) for c in got]
                        yield index, ordered
                self._fill(pool, pending, queue, requests)
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)

    def _fill(
        self,
        pool: ThreadPoolExecutor,
        pending: dict[Future, tuple[int, int]],
        queue: Iterator[tuple[int, int, int]],
        requests: Sequence[TextRequest],
    ) -> None:
        """Keep ``concurrency`` parts in flight (submitting lazily keeps a failure cheap)."""
        while len(pending) < self.concurrency:
            item = next(queue, None)
            if item is None:
                return
            index, k, n = item
            seed = (requests[index].seed + k) % 2**31
            pending[pool.submit(self._part, requests[index].prompt, n, seed)] = (index, k)

    def describe(self) -> dict[str, Any]:
        """Provenance (no key: only the *name* of its environment variable)."""
        return {
            "backend": self.backend,
            "model": self.model,
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "key_sent": "Authorization" in self._headers,
            "settings": self.settings.as_dict(),
            "n_per_request": self.n_per_request,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
        }

    def close(self) -> None:
        return None


def _server_message(exc: urllib.error.HTTPError) -> str:
    """The error message of a server's answer, shortened (``error.message`` when JSON)."""
    _, message = error_fields(exc)
    return printable(message.strip()[:300]) if message.strip() else str(exc.reason or "")


def factory(model: str, settings: SamplingSettings, **options: Any) -> OpenAIChat:
    """``openai:<model>``: the factory the ``TEXT_GENERATORS`` registry names lazily."""
    return OpenAIChat(model, settings, **known_options(OpenAIChat, options))
