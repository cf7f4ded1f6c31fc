"""The text generators' protocol and records: what a request asks for, what a completion
holds, how sampling is set. No backend and no heavy library: the backends and the registry
(:mod:`corpus_audit.backends.text_generators`) import it."""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from corpus_audit.core.config import LlmSection, derived_from
from corpus_audit.core.versions import package_versions

REFUSAL_FINISH_REASONS = ("content_filter",)  # a finish reason that means the model refused


@derived_from(LlmSection, "temperature", "top_p", "max_tokens", "send_seed")
class SamplingSettings:
    """How texts are sampled; recorded with every text.

    The ``[llm]`` keys of these names, derived from their declarations in
    :mod:`corpus_audit.core.config` (type, default, range, meaning; errors name ``llm.KEY``):
    ``temperature`` >= 0 and ``top_p`` in (0, 1] (the paper: the API defaults, 1 and 1);
    ``max_tokens`` the longest completion (the paper: 750); ``send_seed``: pass each request's
    seed to a backend that takes one (transformers always seeds; OpenAI-compatible servers
    take ``seed`` on a best-effort basis).
    """

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TextRequest:
    """``n`` completions of one user message; ``seed`` in [0, 2**31)."""

    prompt: str
    n: int
    seed: int


@dataclass
class Completion:
    """One generated text and what it cost.

    ``finish_reason``: ``stop`` (the model ended it), ``length`` (``max_tokens`` reached),
    ``content_filter`` or what the server said; ``refusal``: the refusal message of a server
    that reports one (OpenAI's ``message.refusal``) or the finish reason when it is a filter,
    else None. ``completion_tokens``: tokens of this text (a server that reports usage per
    request only: the request's count shared by the texts in proportion to their length, so
    the texts of a request sum to it); ``prompt_tokens``: the request's prompt tokens,
    counted on its first text only (0 on the others), so sums are what was billed.
    ``seed``: the seed the text was sampled with (None when the backend took none).
    """

    text: str
    finish_reason: str
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    refusal: str | None = None
    seed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class TextGenerator(Protocol):
    """What the ``llm_texts`` stage needs from a language-model backend."""

    name: str  # the spec as configured: "openai:gpt-4o-mini", "transformers:/models/x"
    settings: SamplingSettings

    def stream(self, requests: Sequence[TextRequest]) -> Iterator[tuple[int, list[Completion]]]:
        """``(index into requests, its n completions)`` for every request, in the order they
        finish. Raises :class:`~corpus_audit.core.errors.ModelError` when a request fails for good."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance: backend, model, settings, library versions (never a secret)."""
        ...

    def close(self) -> None:
        """Free the model or the connections."""
        ...


def model_description(lm: Any, key: str, **settings: Any) -> dict[str, Any]:
    """A local transformers model's provenance: ``lm.backend``, ``lm.model_id`` under ``key``,
    the classes of ``lm.model`` and ``lm.tokenizer``, ``chat_template`` (``lm.chat``), the
    ``settings`` (in order), then the library versions."""
    return {
        "backend": lm.backend,
        key: lm.model_id,
        "model_class": type(lm.model).__name__,
        "tokenizer_class": type(lm.tokenizer).__name__,
        "chat_template": lm.chat,
        **settings,
        "versions": package_versions("transformers", "torch"),
    }


def known_options(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """The options ``cls.__init__`` takes by keyword (each backend ignores the others)."""
    params = inspect.signature(cls.__init__).parameters
    return {k: v for k, v in options.items() if k in params}
