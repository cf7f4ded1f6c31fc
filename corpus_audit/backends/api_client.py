"""A small JSON-over-HTTP client for OpenAI-compatible APIs, endpoint-agnostic (stdlib only).

What every API backend needs and nothing more, **one retry path** for the images client
(:mod:`corpus_audit.backends.openai_images`) and the chat client
(:mod:`corpus_audit.backends.text_generators.openai_chat`): POST a JSON body to
``<base_url>/<path>`` with a bearer key, up to N requests in flight (:meth:`ApiClient.map`),
retries of 408, 409, 429 and 5xx answers (but a 5xx saying the request is too long, a
context overflow: :data:`FINAL_5XX`) and of network errors and timeouts with exponential
backoff and equal jitter (a uniform factor in [0.5, 1]), honouring ``Retry-After`` (seconds or
an HTTP date) but never waiting longer than ``max_backoff``, and a bounded number of attempts.
A 4xx other than those is final: :class:`ApiRefusal` carries the status, the API's error code
and message (a content-policy refusal is one).

Bounds (issue 33): ``timeout`` bounds the **whole** request (connect, wait, every byte of the
answer): a watchdog shuts the socket down at the deadline, so a server that dribbles one byte a
second cannot hold a request longer than ``timeout``. An answer's body is read up to
``max_body_bytes`` (larger: a final :class:`ApiError`, nothing more is read), an error answer's
body up to :data:`ERROR_BODY_BYTES` (the rest is never read). Every wait is interruptible:
:meth:`ApiClient.cancel` (called when a consumer of :meth:`ApiClient.map` or the chat client's
stream unwinds on Ctrl-C or SIGTERM) wakes every backoff sleep and shuts down every socket in
flight, so the worker threads end at once and the command exits within a second or two.

Redirects are not followed (urllib would forward the ``Authorization`` header to the new host);
a loopback base URL never goes through a proxy.

**Keys and hosts** (docs/reliability.md, "Secrets"): the key is read from the environment
variable the config names (``key_env``) when the client is made and kept only in the request
header; it never appears in ``repr``, in a message, in provenance (:meth:`ApiClient.describe`
names the variable, never its value) or in the study. Because a study file may come from
someone else, :func:`key_for` sends a key only when (a) the variable's name ends in ``_API_KEY``
or ``_TOKEN`` (so a study cannot name ``AWS_SECRET_ACCESS_KEY`` or ``HOME``) and (b) the host is
one the *user* allows outside the study: a loopback host, ``api.openai.com`` for
``OPENAI_API_KEY``, or a host listed in the environment variable ``CORPUS_AUDIT_ALLOWED_HOSTS``
(comma- or space-separated host names). Anything else is refused with one line naming the host
and how to allow it, before any request is sent.

Why the standard library (``urllib.request`` in threads) and not ``httpx`` or ``openai``:
``openai`` is not installed here and would be a new dependency for one POST; ``httpx`` is only
present as a dependency of other packages. The requests are few and long (seconds each), so
one blocking connection per worker thread costs nothing, and the retry, backoff and timeout
rules stay in this one file where tests can drive them (``sleep`` and ``rng`` are injectable).
"""

from __future__ import annotations

import contextlib
import email.utils
import heapq
import http.client
import json
import math
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from corpus_audit.core.config import API_KEY_NAME as KEY_NAME
from corpus_audit.core.errors import ApiError

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
#: the user's list of hosts that may receive a key (outside any study file)
ALLOWED_HOSTS_ENV = "CORPUS_AUDIT_ALLOWED_HOSTS"
#: hosts allowed without asking, per key variable
DEFAULT_KEY_HOSTS: dict[str, tuple[str, ...]] = {"OPENAI_API_KEY": ("api.openai.com",)}
#: bytes of an error answer's body that are read (its message is cut to 2,000 characters)
ERROR_BODY_BYTES = 64 * 1024
#: bytes of a successful answer's body read at most, unless the setting says otherwise
DEFAULT_MAX_BODY_BYTES = 64 * 2**20
_CHUNK = 64 * 1024
#: a 5xx that says the request itself is too long (some servers answer a context overflow with
#: 500): asking again cannot help, so it is final like a 4xx
FINAL_5XX = re.compile(
    r"context length|context window|maximum context|too many tokens|prompt is too long|"
    r"input is too long",
    re.IGNORECASE,
)
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


class GaveUp(ApiError):
    """The attempts ran out (``attempts`` of them); ``last`` is why the last one failed."""

    def __init__(self, url: str, attempts: int, last: str) -> None:
        self.attempts = attempts
        self.last = last
        super().__init__(f"{url}: gave up after {attempts} attempts: {last}")


class Stopped(ApiError):
    """The client was cancelled (Ctrl-C, SIGTERM, a consumer that stopped): no more requests."""


@dataclass
class ApiResponse:
    """A successful answer: the parsed JSON body, the attempts it took and the time spent."""

    body: Any
    attempts: int
    seconds: float
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries and backoff: ``max_retries`` requests after the first (>= 0; 0 asks once),
    the meaning of retries in every setting (``generate.api_max_retries``,
    ``llm.max_retries``). The delay before attempt ``k+1`` is ``Retry-After`` when the server
    sent one, else ``min(max_backoff, backoff * 2**(k-1))`` times a uniform factor in [0.5, 1]
    (equal jitter); never longer than ``max_backoff`` seconds."""

    max_retries: int = 5
    backoff: float = 1.0  # seconds, the first delay's upper bound
    max_backoff: float = 60.0  # seconds, the cap of any delay (Retry-After included)

    @property
    def max_attempts(self) -> int:
        """Requests sent at most: the first and its retries."""
        return self.max_retries + 1

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return max(0.0, min(self.max_backoff, retry_after))
        base = min(self.max_backoff, self.backoff * 2 ** min(attempt - 1, 64))
        return base * (0.5 + 0.5 * rng.random())


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: a number, or an HTTP date; None when absent or unreadable
    (the caller caps it: :meth:`RetryPolicy.delay`)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = when.timestamp() - (now if now is not None else time.time())
        except (TypeError, ValueError, OverflowError, IndexError):
            return None
    if not math.isfinite(seconds):  # "inf", "nan": not a wait anyone meant
        return None
    return max(0.0, seconds)


def is_loopback(host: str) -> bool:
    """``localhost``, ``::1`` or ``127.x.y.z``."""
    return host in ("localhost", "::1") or host.startswith("127.")


def allowed_hosts(environ: Mapping[str, str]) -> set[str]:
    """The hosts the user allows in :data:`ALLOWED_HOSTS_ENV` (lower case)."""
    raw = environ.get(ALLOWED_HOSTS_ENV, "")
    return {h.strip().lower() for h in re.split(r"[\s,]+", raw) if h.strip()}


def key_for(
    key_env: str,
    base_url: str,
    *,
    setting: str,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The key to send to ``base_url`` ("" when ``key_env`` is empty or unset). Raises
    :class:`ApiError` (one line naming ``setting``) for a variable name that does not end in
    ``_API_KEY`` or ``_TOKEN``, or for a host the user has not allowed (module docstring)."""
    if not key_env:
        return ""
    if not KEY_NAME.fullmatch(key_env):
        raise ApiError(
            f"{setting} {key_env!r}: an API key variable's name must end in _API_KEY or _TOKEN "
            "(a study cannot send other environment variables; docs/reliability.md)"
        )
    env = os.environ if environ is None else environ
    key = env.get(key_env, "")
    if not key:
        return ""
    host = (urllib.parse.urlsplit(base_url).hostname or "").lower()
    if is_loopback(host) or host in DEFAULT_KEY_HOSTS.get(key_env, ()):
        return key
    if host and host in allowed_hosts(env):
        return key
    raise ApiError(
        f"{setting}: the key in {key_env} is not sent to {host!r}, a host you have not "
        f"allowed: to allow it, export {ALLOWED_HOSTS_ENV}={host} (docs/reliability.md)"
    )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would send the Authorization header to wherever a
    3xx points. The 3xx comes back as an HTTPError instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def opener(base_url: str, *extra: urllib.request.BaseHandler) -> urllib.request.OpenerDirector:
    """No redirects; the environment's proxies (HTTPS_PROXY ...) except for a loopback host,
    which is always reached directly."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    proxies = urllib.request.ProxyHandler({} if is_loopback(host) else None)
    return urllib.request.build_opener(proxies, _NoRedirect(), *extra)


class _Watch:
    """The sockets of one request: shut down at its deadline (``why = "timeout"``) or when the
    client is cancelled (``why = "stopped"``), which ends any blocking read at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.why = ""
        self.done = False  # the request ended: its deadline no longer matters

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if not self.why:
                return
        _shutdown(sock)

    def finish(self) -> None:
        """The request ended: its deadline is skipped and its sockets are let go."""
        with self._lock:
            self.done = True
            self._socks = []

    def shut(self, why: str) -> None:
        with self._lock:
            self.why = self.why or why
            socks = list(self._socks)
        for sock in socks:
            _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_current = threading.local()  # the _Watch of the request this thread is sending


def _register(sock: socket.socket) -> None:
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.add(sock)


class _WatchedConnection(http.client.HTTPConnection):
    """An HTTP connection whose socket the current request's :class:`_Watch` can shut down."""

    def connect(self) -> None:
        super().connect()
        _register(self.sock)


class _WatchedSecureConnection(http.client.HTTPSConnection):
    """The same for HTTPS (the TLS socket; shutting it down ends a blocked read too)."""

    def connect(self) -> None:
        super().connect()
        _register(self.sock)


class _WatchedHandler(urllib.request.HTTPHandler):
    def http_open(self, req: Any) -> Any:
        return self.do_open(_WatchedConnection, req)


class _WatchedSecureHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: Any) -> Any:
        return self.do_open(_WatchedSecureConnection, req, context=self._context)


class _Deadlines:
    """One daemon thread that shuts each request's sockets down at its deadline (a heap of
    deadlines; a finished request is skipped when its turn comes)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._count = 0
        self._thread: threading.Thread | None = None

    def add(self, deadline: float, watch: _Watch) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="api-deadlines", daemon=True)
                self._thread.start()
            self._count += 1
            heapq.heappush(self._heap, (deadline, self._count, watch))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, watch = self._heap[0]
                now = time.monotonic()
                if deadline > now and not watch.done:
                    self._cond.wait(deadline - now)
                    continue
                heapq.heappop(self._heap)
            if not watch.done:
                watch.shut("timeout")


_deadlines = _Deadlines()


class _TooLarge(Exception):
    pass


def read_capped(answer: Any, limit: int, *, cut: bool = False) -> bytes:
    """At most ``limit`` bytes of ``answer`` (read in chunks); past it, :class:`_TooLarge`, or
    with ``cut`` the first ``limit`` bytes (the rest is never read)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = answer.read(min(_CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            if cut:
                return b"".join(chunks)[:limit]
            raise _TooLarge


class HttpSettings(Protocol):
    """An HTTP client's settings, as a backend derives them from its section: the one
    declaration of each (``corpus_audit.core.config_values``: ``HTTP_*``) under the section's
    key names. ``config_keys`` maps each field to its ``section.key``."""

    base_url: str
    key_env: str
    timeout: float  # seconds one request may take in all, > 0
    max_retries: int  # requests after the first, >= 0
    backoff: float  # seconds, >= 0
    max_backoff: float  # seconds, >= 0
    concurrency: int  # requests in flight, >= 1
    max_body_mb: float  # largest answer body in MB, > 0
    config_keys: dict[str, str]


class ApiClient:
    """POST JSON to an OpenAI-compatible API with retries (see the module docstring).

    ``timeout``: seconds one attempt may take in all, > 0; ``max_body_bytes``: the largest
    answer body read; ``key_setting`` / ``timeout_setting``: the study keys named in messages.
    """

    def __init__(
        self,
        base_url: str,
        *,
        key_env: str,
        timeout: float = 120.0,
        policy: RetryPolicy | None = None,
        concurrency: int = 4,
        seed: int | None = None,
        sleep: Callable[[float], Any] | None = None,
        require_key: bool = True,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        key_setting: str = "generate.api_key_env",
        timeout_setting: str = "generate.api_timeout",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        split = urllib.parse.urlsplit(base_url)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ApiError(
                f"api base URL {base_url!r} must start with http:// or https:// and name a host"
            )
        if not (math.isfinite(timeout) and timeout > 0):
            raise ApiError(f"{timeout_setting}: {timeout!r} must be a finite number > 0")
        self.base_url = base_url.rstrip("/")
        self.key_env = key_env
        self._key = key_for(key_env, self.base_url, setting=key_setting, environ=environ)
        if require_key and not self._key:
            raise ApiError(
                f"the API key is read from the environment variable {key_env!r} "
                f"({key_setting}), which is not set: export it and run again"
            )
        self.timeout = float(timeout)
        self.timeout_setting = timeout_setting
        self.max_body_bytes = int(max_body_bytes)
        self.policy = policy or RetryPolicy()
        self.concurrency = max(1, int(concurrency))
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._stop = threading.Event()
        self._sleep = sleep if sleep is not None else self._stop.wait
        self._watches: set[_Watch] = set()
        self._opener = opener(self.base_url, _WatchedHandler(), _WatchedSecureHandler())
        self._watch_lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "retry_after_waits": 0}
        self._stats_lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, http: HttpSettings, *, require_key: bool = True, **extra: Any
    ) -> ApiClient:
        """The client of a backend's HTTP settings (:class:`HttpSettings`, derived from
        ``study.toml``: the images client's ``generate.api_*``, the chat client's ``llm.*``),
        its messages naming the backend's own keys; ``extra``: :meth:`__init__`'s other
        arguments (``environ``, ``sleep``, ``seed``)."""
        keys = http.config_keys
        return cls(
            http.base_url,
            key_env=http.key_env,
            timeout=http.timeout,
            policy=RetryPolicy(http.max_retries, http.backoff, http.max_backoff),
            concurrency=http.concurrency,
            require_key=require_key,
            max_body_bytes=int(http.max_body_mb * 2**20),
            key_setting=keys["key_env"],
            timeout_setting=keys["timeout"],
            **extra,
        )

    def __repr__(self) -> str:  # never the key
        return f"ApiClient({self.base_url!r}, key_env={self.key_env!r})"

    @property
    def sends_key(self) -> bool:
        """Whether requests carry an ``Authorization`` header (never the key itself)."""
        return bool(self._key)

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
            "max_body_bytes": self.max_body_bytes,
            "concurrency": self.concurrency,
            "client": "urllib",
        }

    def cancel(self) -> None:
        """Stop: wake every backoff wait and shut down every request in flight; every later
        request raises :class:`Stopped`."""
        self._stop.set()
        with self._watch_lock:
            watches = list(self._watches)
        for watch in watches:
            watch.shut("stopped")

    def reset(self) -> None:
        """Usable again after :meth:`cancel` (a new :meth:`map` or stream begins with it, so a
        consumer that stopped early does not leave the client stopped)."""
        self._stop.clear()

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        with self._rng_lock:
            return self.policy.delay(attempt, retry_after, self._rng)

    def _exchange(
        self, request: urllib.request.Request, limit: int | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One attempt: (status, headers, body) of the answer (at most ``limit`` bytes, by
        default ``max_body_bytes``), an error status included.
        Raises :class:`TimeoutError` past ``timeout`` (the whole exchange), :class:`Stopped`
        when cancelled, :class:`_TooLarge`, or the transport's error."""
        watch = _Watch()
        with self._watch_lock:
            self._watches.add(watch)
        if self._stop.is_set():
            watch.shut("stopped")
        _deadlines.add(time.monotonic() + self.timeout, watch)
        _current.watch = watch
        try:
            try:
                try:
                    answer = self._opener.open(request, timeout=self.timeout)
                except urllib.error.HTTPError as exc:
                    with exc:
                        body = read_capped(exc, ERROR_BODY_BYTES, cut=True)
                    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
                    status, raw = exc.code, body
                else:
                    with answer:
                        raw = read_capped(answer, limit or self.max_body_bytes)
                        headers = {k.lower(): v for k, v in answer.headers.items()}
                        status = answer.status
            except (OSError, http.client.HTTPException, ValueError):
                if watch.why:
                    raw, status, headers = b"", 0, {}
                else:
                    raise
            if watch.why == "stopped":
                raise Stopped(f"{self.base_url}: stopped")
            if watch.why == "timeout":
                raise TimeoutError
            return status, headers, raw
        finally:
            watch.finish()
            _current.watch = None
            with self._watch_lock:
                self._watches.discard(watch)

    def post_json(self, path: str, payload: dict[str, Any]) -> ApiResponse:
        """POST ``payload`` to ``<base_url>/<path>``; retried as the policy says. Raises
        :class:`ApiRefusal` for a final 4xx, :class:`GaveUp` when the attempts run out,
        :class:`Stopped` once cancelled, :class:`ApiError` for an answer over the size limit
        or a redirect."""
        url = f"{self.base_url}/{path.lstrip('/')}"
        data = json.dumps(payload).encode("utf-8")
        start = time.monotonic()
        last = ""
        for attempt in range(1, self.policy.max_attempts + 1):
            if self._stop.is_set():
                raise Stopped(f"{url}: stopped")
            self._count("requests")
            retry_after: float | None = None
            request = urllib.request.Request(url, data=data, method="POST")
            request.add_header("Content-Type", "application/json")
            request.add_header("Accept", "application/json")
            if self._key:
                request.add_header("Authorization", f"Bearer {self._key}")
            try:
                status, headers, raw = self._exchange(request)
            except _TooLarge:
                raise ApiError(
                    f"{url}: the answer is larger than {self.max_body_bytes} bytes "
                    "(the body-size setting): not read further"
                ) from None
            except TimeoutError:
                status, headers, raw = 0, {}, b""
                last = f"no complete answer within {self.timeout:g} s ({self.timeout_setting})"
            except (OSError, http.client.HTTPException, ValueError) as exc:
                status, headers, raw = 0, {}, b""
                reason = getattr(exc, "reason", None) or exc
                last = f"connection failed: {type(exc).__name__}: {reason}"[:300]
            if status == 200 or (200 <= status < 300):
                try:
                    return ApiResponse(
                        json.loads(raw.decode("utf-8")), attempt, time.monotonic() - start, headers
                    )
                except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
                    last = "the answer is not JSON"
            elif status:
                text = raw.decode("utf-8", "replace")  # <= ERROR_BODY_BYTES, parsed whole
                code, message = _error_fields(text)
                code, message, text = code[:200], message[:2000], text[:2000]
                if 300 <= status < 400:
                    raise ApiError(
                        f"{url}: HTTP {status} redirect to {headers.get('location', '?')!r} "
                        "not followed (it would carry the key): give the final URL as api_base"
                    )
                if status not in RETRY_STATUSES and status < 500:
                    raise ApiRefusal(status, code or f"http_{status}", message or text)
                if status >= 500 and FINAL_5XX.search(message or text):
                    raise ApiRefusal(status, code or f"http_{status}", message or text)
                retry_after = parse_retry_after(headers.get("retry-after"))
                last = f"HTTP {status} {code or ''} {message or ''}".strip()[:500]
            if attempt < self.policy.max_attempts:
                self._count("retries")
                if retry_after is not None:
                    self._count("retry_after_waits")
                self._sleep(self._delay(attempt, retry_after))
        raise GaveUp(url, self.policy.max_attempts, last)

    def get_json(self, path: str, *, max_bytes: int = ERROR_BODY_BYTES) -> Any:
        """GET ``<base_url>/<path>`` once (no retry; the key as for a POST): the parsed JSON of
        a 2xx answer of at most ``max_bytes`` bytes, else None. For hints after a failure
        (the models a server lists), never for results; not counted in :attr:`stats`."""
        request = urllib.request.Request(f"{self.base_url}/{path.lstrip('/')}", method="GET")
        request.add_header("Accept", "application/json")
        if self._key:
            request.add_header("Authorization", f"Bearer {self._key}")
        try:
            status, _, raw = self._exchange(request, max_bytes)
            return json.loads(raw.decode("utf-8")) if 200 <= status < 300 else None
        except (Stopped, _TooLarge, TimeoutError, OSError, http.client.HTTPException):
            return None
        except (ValueError, RecursionError):  # not UTF-8, not JSON
            return None

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
        answers can be kept). A consumer that unwinds (an error, Ctrl-C, SIGTERM) cancels the
        client (:meth:`cancel`): the requests in flight end at once."""
        it = iter(items)
        self.reset()
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
            except BaseException:
                self.cancel()
                raise
            finally:
                for future in running:
                    future.cancel()


def error_fields(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The (code, message) of an error answer (the OpenAI shape ``{"error": {...}}``, else
    its text); ``("", "")`` when it has no readable body."""
    return _error_fields(_read_error(exc))


def _read_error(exc: urllib.error.HTTPError) -> str:
    try:
        return read_capped(exc, ERROR_BODY_BYTES, cut=True).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the body of an error answer is optional
        return ""


def _error_fields(text: str) -> tuple[str, str]:
    """The OpenAI error shape ``{"error": {"code", "message", "type"}}``, FastChat's
    ``{"object": "error", "message", "code"}`` or FastAPI's ``{"detail": "..."}`` (``transformers
    serve``; a list of ``{"loc", "msg"}`` for a request that fails validation): (code,
    message)."""
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError):
        return "", text.strip()[:500]
    if isinstance(body, dict) and body.get("object") == "error" and "error" not in body:
        return str(body.get("code") or body.get("type") or ""), str(body.get("message") or "")
    if isinstance(body, dict) and "detail" in body and "error" not in body:
        return "", _detail(body["detail"]) or text.strip()[:500]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type") or ""
        return str(code), str(error.get("message") or "")
    if isinstance(error, str):
        return "", error
    return "", text.strip()[:500]


def _detail(detail: Any) -> str:
    """FastAPI's ``detail``: its text, or a validation error list as ``loc: msg; ...``."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = []
        for item in detail[:10]:
            if isinstance(item, dict):
                loc = item.get("loc")
                where = ".".join(str(x) for x in loc) if isinstance(loc, list) else ""
                msg = str(item.get("msg") or "")
                parts.append(f"{where}: {msg}" if where else msg)
        return "; ".join(p for p in parts if p)
    return ""


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
