"""``openai:<model>``: any OpenAI-compatible chat-completions endpoint.

vLLM (``vllm serve MODEL`` -> ``http://HOST:8000/v1``), Ollama (``http://HOST:11434/v1``),
llama.cpp's ``llama-server`` (``http://HOST:8080/v1``) and hosted APIs
(``https://api.openai.com/v1``) all take ``POST {api_base}/chat/completions`` with one user
message. Standard library only (``urllib``, threads), so no client package is needed.

- **key**: read from the environment variable whose *name* is configured
  (``llm.api_key_env``), sent as ``Authorization: Bearer``; never stored, logged, printed,
  put in an error message or in :meth:`OpenAIChat.describe`. No variable (or an empty one):
  no header (local servers need none).
- **key and host**: the key is sent only to a host the user allows outside the study
  (:func:`corpus_audit.backends.api_client.key_for`; docs/reliability.md, "Secrets").
- **n per request**: a request for ``n`` texts is sent as ``ceil(n / n_per_request)`` HTTP
  requests of at most ``n_per_request`` choices (``1`` for servers that ignore ``n``); part
  ``k`` is sent with seed ``seed + k``. A server that returns fewer choices than asked
  (llama.cpp's server, Ollama: one per request) is asked again for the rest, **each time with
  a new seed** (``seed + parts + k * n_per_request + choices so far``: never one used before
  for the same request), so a server that honours ``seed`` draws new samples instead of
  repeating the first text (issue 33).
- **server checks**: requests answered with fewer choices than asked (``n`` ignored) and texts
  that repeat a text drawn with another seed (``seed`` ignored by a deterministic server, or
  greedy sampling) are counted; :meth:`OpenAIChat.warnings` says so in one line each, and the
  ``llm_texts`` stage reports it (the counts are in :meth:`OpenAIChat.describe`).
- **concurrency**: ``concurrency`` HTTP requests in flight (threads).
- **retries**: the one retry path of :class:`corpus_audit.backends.api_client.ApiClient`
  (HTTP 408, 409, 429 and 5xx, connection errors and timeouts; up to ``max_retries`` retries;
  ``Retry-After`` honoured but capped at ``max_backoff_s``; else ``backoff_s * 2**attempt``
  capped at ``max_backoff_s`` with equal jitter). Any other status fails at once with the
  server's message (OpenAI's, FastChat's and FastAPI's error shapes are read; a 404 from a
  base without ``/v1`` says so; 5xx answers to the end, with a model the server's
  ``GET /models`` does not list, say so: ``transformers serve`` answers an unknown model 500).
- **timeouts and sizes**: ``timeout_s`` bounds each HTTP request in all (the whole answer),
  ``max_body_mb`` its body; Ctrl-C or SIGTERM cancels the requests in flight and the waits.
- **malformed answers**: a body that is not an object, ``choices`` that is not a list of
  objects, a non-text ``content`` or non-integer token counts fail with one line (not a
  traceback); unreadable token counts are recorded as unknown; a choice whose ``content`` is
  null is recorded with the refusal ``no_content`` (counted with the refusals, not silently an
  empty text).
- **refusals**: ``message.refusal`` (OpenAI's structured refusal) or a ``content_filter``
  finish reason is recorded as the text's ``refusal``; its text is what the server sent
  (often empty).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from corpus_audit.backends.api_client import (
    ApiClient,
    ApiError,
    ApiRefusal,
    GaveUp,
    parse_retry_after,
)
from corpus_audit.backends.text_generators.base import (
    REFUSAL_FINISH_REASONS,
    Completion,
    SamplingSettings,
    TextRequest,
)
from corpus_audit.core.attrs import attrs_dict
from corpus_audit.core.config import LlmSection, derived_from
from corpus_audit.core.errors import ConfigError, ModelError, printable

__all__ = [
    "DEFAULT_API_BASE",
    "ChatClientSettings",
    "OpenAIChat",
    "factory",
    "parse_retry_after",
    "split_tokens",
]

DEFAULT_API_BASE = "https://api.openai.com/v1"
#: the ``refusal`` recorded for a choice whose ``content`` is null (or missing) without a
#: refusal: a tool call, a reasoning-only answer, a server error in disguise (issue 33)
NO_CONTENT = "no_content"


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


@derived_from(
    LlmSection,
    "base_url=api_base",
    "key_env=api_key_env",
    "concurrency",
    "n_per_request",
    "timeout=timeout_s",
    "max_retries",
    "backoff=backoff_s",
    "max_backoff=max_backoff_s",
    "max_body_mb",
)
class ChatClientSettings:
    """The chat client's ``[llm]`` settings (the HTTP client's,
    :class:`~corpus_audit.backends.api_client.HttpSettings`, and
    ``n_per_request``), derived from their declarations in :mod:`corpus_audit.core.config`:
    a value out of range is a :class:`ConfigError` naming ``llm.KEY``."""


class OpenAIChat:
    """A chat-completions client (module docstring). ``model`` is the server's model name."""

    backend = "openai"

    def __init__(
        self,
        model: str,
        settings: SamplingSettings,
        options: ChatClientSettings | None = None,
        *,
        environ: Any = None,
    ) -> None:
        """``options``: the client's ``[llm]`` settings (defaults: the keys' defaults);
        ``environ``: where the key is read (the process's environment by default)."""
        o = self.options = options or ChatClientSettings()
        self.model = model
        self.name = f"{self.backend}:{model}"
        self.settings = settings
        self.api_base = o.base_url.rstrip("/")
        self.url = f"{self.api_base}/chat/completions"
        self.api_key_env = o.key_env
        self.concurrency = o.concurrency
        self.n_per_request = o.n_per_request
        try:
            # the key is kept only inside the client's header (never in describe() or repr);
            # redirects are not followed; a loopback server is reached directly
            self.client = ApiClient.from_settings(o, require_key=False, environ=environ)
        except ApiError as exc:
            raise ModelError(f"{self.name}: {exc}") from None
        self._lock = threading.Lock()
        self.checks = {"short_answers": 0, "repeated_texts": 0}

    @property
    def stats(self) -> dict[str, int]:
        """HTTP requests sent, retries, and retries that waited a server's ``Retry-After``."""
        c = self.client.stats
        return {
            "http_requests": c["requests"],
            "retries": c["retries"],
            "retry_after_waits": c["retry_after_waits"],
        }

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

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one chat-completions body (the retries of :class:`ApiClient`); one-line
        :class:`ModelError` for a final answer, retries run out or a body that is not an
        object."""
        where = f"{self.name} at {printable(self.url)}"
        try:
            answer = self.client.post_json("chat/completions", body).body
        except ApiRefusal as exc:
            hint = ""
            if exc.status == 404 and not self.api_base.endswith("/v1"):
                hint = " (an OpenAI-compatible api_base usually ends in /v1)"
            message = printable(exc.message.strip()[:300]) or f"HTTP {exc.status}"
            raise ModelError(f"{where}: HTTP {exc.status}: {message}{hint}") from None
        except GaveUp as exc:
            hint = self._unlisted_model_hint() if exc.last.startswith("HTTP 5") else ""
            raise ModelError(
                f"{where}: gave up after {exc.attempts} attempts ({printable(exc.last)}){hint}"
            ) from None
        except ApiError as exc:
            raise ModelError(f"{self.name}: {printable(str(exc))}") from None
        if not isinstance(answer, dict):
            raise ModelError(
                f"{where}: the answer is a JSON {type(answer).__name__}, not an object"
            )
        return answer

    def _unlisted_model_hint(self) -> str:
        """After 5xx answers to the end: ``""``, or a hint when the server's ``GET /models``
        lists models but not this one (``transformers serve`` answers an unknown model with a
        bare 500, retried like a passing failure)."""
        listed = self.client.get_json("models")
        data = listed.get("data") if isinstance(listed, dict) else None
        if not isinstance(data, list):
            return ""
        ids = [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id") is not None]
        if not ids or self.model in ids:
            return ""
        names = printable(", ".join(ids[:10]))[:300]
        return f"; the server's /models does not list {printable(self.model)!r} (it lists: {names})"

    def _part(self, prompt: str, n: int, seed: int, reask: int) -> list[Completion]:
        """``n`` completions of ``prompt`` in one HTTP request or more (a server may return
        fewer choices than asked; at most ``n`` requests). The first request is sent with
        ``seed``, a re-ask for the rest with ``reask + choices so far`` (module docstring)."""
        out: list[Completion] = []
        for _ in range(n):
            want = n - len(out)
            if want <= 0:
                break
            ask = seed if not out else (reask + len(out)) % 2**31
            answer = self.post(self._body(prompt, want, ask))
            got = self._completions(answer, ask)[:want]
            if not got:
                raise ModelError(f"{self.name} at {printable(self.url)}: an answer without choices")
            if len(got) < want and want > 1:
                with self._lock:
                    self.checks["short_answers"] += 1
            out.extend(got)
        return out

    def _completions(self, answer: dict[str, Any], seed: int) -> list[Completion]:
        where = f"{self.name} at {printable(self.url)}"
        raw = answer.get("choices")
        if raw is None:
            raw = []
        if not isinstance(raw, list) or not all(isinstance(c, dict) for c in raw):
            raise ModelError(f"{where}: 'choices' is not a list of objects")
        choices = sorted(raw, key=lambda c: _int(c.get("index")) or 0)
        usage = answer.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        texts = []
        for choice in choices:
            message = choice.get("message")
            if message is None:
                message = {}
            if not isinstance(message, dict):
                raise ModelError(f"{where}: a choice's 'message' is not an object")
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                raise ModelError(f"{where}: a message's 'content' is not text")
            texts.append(content or "")
        shares = split_tokens(_int(usage.get("completion_tokens")), texts)
        prompt_tokens = _int(usage.get("prompt_tokens"))
        out = []
        for i, (choice, text, tokens) in enumerate(zip(choices, texts, shares, strict=True)):
            message = choice.get("message") or {}
            finish = printable(str(choice.get("finish_reason") or "unknown"))[:100]
            refusal = message.get("refusal")
            refusal = printable(str(refusal)) if refusal else None
            if refusal is None and finish in REFUSAL_FINISH_REASONS:
                refusal = finish
            if refusal is None and message.get("content") is None:
                refusal = NO_CONTENT  # not an empty text the model wrote: say so
            out.append(
                Completion(
                    text=text,
                    finish_reason=finish,
                    completion_tokens=tokens,
                    prompt_tokens=prompt_tokens if i == 0 else 0,
                    refusal=refusal,
                    seed=seed if self.settings.send_seed else None,
                )
            )
        return out

    def _check_repeats(self, completions: list[Completion]) -> None:
        """Count texts that repeat a text drawn with another seed in the same request."""
        seen: dict[str, int | None] = {}
        repeats = 0
        for c in completions:
            if not c.text or c.refusal:
                continue
            if c.text in seen and seen[c.text] != c.seed:
                repeats += 1
            seen.setdefault(c.text, c.seed)
        if repeats:
            with self._lock:
                self.checks["repeated_texts"] += repeats

    def warnings(self) -> list[str]:
        """One line per server check that failed (module docstring); [] when none."""
        out = []
        where = f"{self.name} at {printable(self.api_base)}"
        if self.checks["short_answers"]:
            out.append(
                f"{where}: {self.checks['short_answers']} answers had fewer choices than asked "
                "(the server ignores n): the rest was asked for with new seeds; set "
                "llm.n_per_request = 1 for this server"
            )
        if self.checks["repeated_texts"]:
            out.append(
                f"{where}: {self.checks['repeated_texts']} texts repeat a text drawn with another "
                "seed (the server ignores seed, or samples greedily): the copies are stored; "
                "check the server and llm.temperature"
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
        self.client.reset()  # a stream stopped early before cancelled the client
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
                        self._check_repeats(ordered)
                        yield index, ordered
                self._fill(pool, pending, queue, requests)
        except BaseException:
            self.client.cancel()  # Ctrl-C, SIGTERM, a failure: end the requests in flight now
            raise
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
            req = requests[index]
            pieces = math.ceil(req.n / self.n_per_request)
            seed = (req.seed + k) % 2**31
            reask = req.seed + pieces + k * self.n_per_request
            pending[pool.submit(self._part, req.prompt, n, seed, reask)] = (index, k)

    def describe(self) -> dict[str, Any]:
        """Provenance (no key: only the *name* of its environment variable)."""
        return {
            **attrs_dict(self, "backend", "model", "api_base", "api_key_env"),
            "key_sent": self.client.sends_key,
            "settings": self.settings.as_dict(),
            "n_per_request": self.n_per_request,
            "concurrency": self.concurrency,
            "timeout_s": self.options.timeout,
            "max_retries": self.options.max_retries,
            "max_backoff_s": self.options.max_backoff,
            "max_body_bytes": self.client.max_body_bytes,
            "server_checks": dict(self.checks),
        }

    def cancel(self) -> None:
        """End the requests in flight and the backoff waits now (Ctrl-C or SIGTERM on the
        driver while this client serves on an engine's worker thread)."""
        self.client.cancel()

    def close(self) -> None:
        return None


def _int(value: Any) -> int | None:
    """A token count or index as the server sent it: an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def factory(model: str, settings: SamplingSettings, **options: Any) -> OpenAIChat:
    """``openai:<model>``: the factory the ``TEXT_GENERATORS`` registry names lazily;
    ``options`` by their ``[llm]`` key names (``timeout_s=30``; the others it ignores)."""
    try:
        client = ChatClientSettings.from_config(options)
    except ConfigError as exc:  # one line naming the model, as the client's other errors
        raise ModelError(f"openai:{model}: {exc}") from None
    return OpenAIChat(model, settings, client, environ=options.get("environ"))
