"""A small JSON-over-HTTP client for OpenAI-compatible APIs, endpoint-agnostic (stdlib only).

What every API backend needs and nothing more: POST a JSON body to ``<base_url>/<path>`` with
a bearer key, up to N requests in flight (:meth:`ApiClient.map`), retries of 429 and 5xx
answers and of network errors and timeouts with exponential backoff and full jitter, honouring
``Retry-After`` (seconds or an HTTP date; capped at ``max_backoff``), a per-request timeout,
and a bounded number of attempts. Redirects are not followed (urllib would forward the
``Authorization`` header to the new host); a loopback base URL never goes through a proxy. A 4xx other than 429 is final: :class:`ApiRefusal` carries
the status, the API's error code and message (a content-policy refusal is one).

The key is read from the environment variable the config names (``key_env``) when the client
is made; it is kept only in the request header. It never appears in ``repr``, in a message, in
provenance (:meth:`ApiClient.describe` names the variable, never its value) or in the study.

Why the standard library (``urllib.request`` in threads) and not ``httpx`` or ``openai``:
``openai`` is not installed here and would be a new dependency for one POST; ``httpx`` is only
present as a dependency of other packages. The requests are few and long (seconds each), so
one blocking connection per worker thread costs nothing, and the retry, backoff and timeout
rules stay in this one file where tests can drive them (``sleep`` and ``rng`` are injectable).
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from corpus_audit.core.errors import ApiError

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
T = TypeVar("T")
R = TypeVar("R")


class ApiRefusal(Exception):
    """A final (non-retryable) answer: a 4xx other than 408/409/429. ``code`` is the API's
    error code (``content_policy_violation``), ``message`` its text."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        super().__init__(f"HTTP {status} {code}: {message}")


@dataclass
class ApiResponse:
    """A successful answer: the parsed JSON body, the attempts it took and the time spent."""

    body: dict[str, Any]
    attempts: int
    seconds: float
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and backoff: delay before attempt ``k+1`` is ``Retry-After`` when the server
    sent one, else uniform(0, min(max_backoff, backoff * 2**(k-1))) (full jitter)."""

    max_attempts: int = 6
    backoff: float = 1.0  # seconds, the first delay's upper bound
    max_backoff: float = 60.0  # seconds, the cap of any delay (Retry-After included)

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return max(0.0, min(self.max_backoff, retry_after))
        return rng.uniform(0.0, min(self.max_backoff, self.backoff * 2 ** (attempt - 1)))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (now if now is not None else time.time())
    if not math.isfinite(seconds):  # "inf", "nan": not a wait anyone meant
        return None
    return max(0.0, seconds)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would send the Authorization header to wherever a
    3xx points. The 3xx comes back as an HTTPError instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def opener(base_url: str) -> urllib.request.OpenerDirector:
    """No redirects; the environment's proxies (HTTPS_PROXY ...) except for a loopback host,
    which is always reached directly."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    proxies = urllib.request.ProxyHandler({} if loopback else None)
    return urllib.request.build_opener(proxies, _NoRedirect())


class ApiClient:
    """POST JSON to an OpenAI-compatible API with retries (see the module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        key_env: str,
        timeout: float = 120.0,
        policy: RetryPolicy | None = None,
        concurrency: int = 4,
        seed: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        require_key: bool = True,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ApiError(f"api base URL {base_url!r} must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.key_env = key_env
        self._key = os.environ.get(key_env, "") if key_env else ""
        if require_key and not self._key:
            raise ApiError(
                f"the API key is read from the environment variable {key_env!r} "
                "(generate.api_key_env), which is not set: export it and run again"
            )
        self.timeout = float(timeout)
        self.policy = policy or RetryPolicy()
        self.concurrency = max(1, int(concurrency))
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._sleep = sleep
        self._open = opener(self.base_url).open
        self.stats = {"requests": 0, "retries": 0}
        self._stats_lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"ApiClient({self.base_url!r}, key_env={self.key_env!r})"

    def describe(self) -> dict[str, Any]:
        """Provenance: where requests go and how they are retried (the key's variable name,
        never its value)."""
        return {
            "base_url": self.base_url,
            "key_env": self.key_env,
            "timeout_s": self.timeout,
            "max_attempts": self.policy.max_attempts,
            "backoff_s": self.policy.backoff,
            "max_backoff_s": self.policy.max_backoff,
            "concurrency": self.concurrency,
            "client": "urllib",
        }

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        with self._rng_lock:
            return self.policy.delay(attempt, retry_after, self._rng)

    def post_json(self, path: str, payload: dict[str, Any]) -> ApiResponse:
        """POST ``payload`` to ``<base_url>/<path>``; retried as the policy says. Raises
        :class:`ApiRefusal` for a final 4xx, :class:`ApiError` when the attempts run out."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        data = json.dumps(payload).encode("utf-8")
        start = time.monotonic()
        last = ""
        for attempt in range(1, self.policy.max_attempts + 1):
            self._count("requests")
            retry_after: float | None = None
            request = urllib.request.Request(url, data=data, method="POST")
            request.add_header("Content-Type", "application/json")
            if self._key:
                request.add_header("Authorization", f"Bearer {self._key}")
            try:
                with self._open(request, timeout=self.timeout) as answer:
                    raw = answer.read()
                    headers = {k.lower(): v for k, v in answer.headers.items()}
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    last = "the answer is not JSON"
                else:
                    return ApiResponse(body, attempt, time.monotonic() - start, headers)
            except urllib.error.HTTPError as exc:
                status = exc.code
                text = _read_error(exc)
                code, message = _error_fields(text)
                if 300 <= status < 400:
                    raise ApiError(
                        f"{url}: HTTP {status} redirect to {exc.headers.get('Location', '?')!r} "
                        "not followed (it would carry the key): give the final URL as api_base"
                    ) from None
                if status not in RETRY_STATUSES and status < 500:
                    raise ApiRefusal(status, code or f"http_{status}", message or text) from None
                retry_after = parse_retry_after(
                    exc.headers.get("Retry-After") if exc.headers else None
                )
                last = f"HTTP {status} {code or ''} {message or ''}".strip()
            except TimeoutError:
                last = f"no answer within {self.timeout:g} s (generate.api_timeout)"
            except (urllib.error.URLError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"connection failed: {reason}"
            if attempt < self.policy.max_attempts:
                self._count("retries")
                self._sleep(self._delay(attempt, retry_after))
        raise ApiError(f"{url}: gave up after {self.policy.max_attempts} attempts: {last}")

    def map(
        self,
        fn: Callable[[T], R],
        items: Iterable[T],
        *,
        stop: Callable[[], bool] | None = None,
    ) -> Iterator[tuple[T, Future[R]]]:
        """Run ``fn`` on each item with up to ``concurrency`` in flight; yield ``(item,
        future)`` in completion order, submitting the next item as one finishes. Once ``stop()``
        is true nothing more is submitted and the requests in flight are still yielded (their
        answers can be kept). A consumer that stops early waits for those in flight."""
        it = iter(items)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            running: dict[Future[R], T] = {}
            try:
                for item in it:
                    running[pool.submit(fn, item)] = item
                    if len(running) >= self.concurrency:
                        break
                while running:
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                    for future in done:
                        item = running.pop(future)
                        yield item, future
                        if stop is None or not stop():
                            for nxt in it:
                                running[pool.submit(fn, nxt)] = nxt
                                break
            finally:
                for future in running:
                    future.cancel()


def error_fields(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The (code, message) of an error answer (the OpenAI shape ``{"error": {...}}``, else
    its text); ``("", "")`` when it has no readable body."""
    return _error_fields(_read_error(exc))


def _read_error(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", "replace")[:2000]
    except Exception:  # noqa: BLE001 - the body of an error answer is optional
        return ""


def _error_fields(text: str) -> tuple[str, str]:
    """The OpenAI error shape ``{"error": {"code", "message", "type"}}``: (code, message)."""
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return "", text.strip()[:500]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type") or ""
        return str(code), str(error.get("message") or "")
    if isinstance(error, str):
        return "", error
    return "", text.strip()[:500]


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
