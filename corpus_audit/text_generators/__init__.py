"""Text generators (language models) for the LLM-written texts of the ``llm_texts`` stage:
one small protocol, a registry by name, two backends.

A :class:`TextGenerator` turns a list of :class:`TextRequest` (a user message, how many
completions, a seed) into completions, yielded per request **as each request finishes** (so
the stage can commit every batch the moment it arrives; a killed run loses only what was in
flight). A model spec in ``llm.models`` is ``"<backend>:<model>"``:

- ``transformers:<local path or hub id>`` (:mod:`.transformers_lm`): a causal LM, its chat
  template when the tokenizer has one, batched sampling, seeded, GPU when there is one;
- ``openai:<model>`` (:mod:`.openai_chat`): any OpenAI-compatible chat-completions endpoint
  (vLLM, Ollama, llama.cpp's server, hosted APIs) at ``llm.api_base``, the key read from the
  environment variable ``llm.api_key_env`` names (never stored, logged or printed), ``n``
  completions per request, ``llm.concurrency`` requests in flight, 429/5xx and timeouts
  retried with exponential backoff and jitter honouring ``Retry-After``.

Heavy libraries (torch, transformers, httpx) are imported inside the backends only; this
module imports none, so config validation can read :data:`TEXT_GENERATORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from corpus_audit import specs
from corpus_audit.registry import Registry

REFUSAL_FINISH_REASONS = ("content_filter",)  # a finish reason that means the model refused


@dataclass(frozen=True)
class SamplingSettings:
    """How texts are sampled; recorded with every text.

    ``temperature`` >= 0 and ``top_p`` in (0, 1] (the paper: the API defaults, 1 and 1);
    ``max_tokens`` the longest completion (the paper: 750); ``send_seed``: pass each request's
    seed to a backend that takes one (transformers always seeds; OpenAI-compatible servers
    take ``seed`` on a best-effort basis).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 750
    send_seed: bool = True

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature: {self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: {self.top_p} is not in (0, 1]")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: {self.max_tokens} must be >= 1")

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
        finish. Raises :class:`~corpus_audit.errors.ModelError` when a request fails for good."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance: backend, model, settings, library versions (never a secret)."""
        ...

    def close(self) -> None:
        """Free the model or the connections."""
        ...


# factory(model, settings, **options) -> TextGenerator; options are the backend's own
TextGeneratorFactory = Callable[..., TextGenerator]
TEXT_GENERATORS: Registry[TextGeneratorFactory] = Registry("text generator")


def register_text_generator(name: str, factory: TextGeneratorFactory) -> None:
    """Register a backend: ``factory(model, settings, **options) -> TextGenerator``."""
    TEXT_GENERATORS.register(name, factory)


def split_spec(spec: str) -> tuple[str, str]:
    """``"backend:model"`` -> ``(backend, model)``; a spec without a known backend prefix
    raises :class:`~corpus_audit.errors.ConfigError` naming the known ones."""
    from corpus_audit.errors import ConfigError

    backend, model = specs.split_spec(spec, TEXT_GENERATORS, "", empty_model=True)
    if not backend or not model:
        known = ", ".join(f"{name}:<model>" for name in TEXT_GENERATORS.names())
        raise ConfigError(f"llm.models: {spec!r} is not one of {known}")
    return backend, model


def generate_all(
    generator: TextGenerator, requests: Sequence[TextRequest]
) -> list[list[Completion]]:
    """Every request's completions, in request order (collects :meth:`TextGenerator.stream`)."""
    out: list[list[Completion] | None] = [None] * len(requests)
    for index, completions in generator.stream(requests):
        out[index] = completions
    return [c if c is not None else [] for c in out]


def load_text_generator(spec: str, settings: SamplingSettings, **options: Any) -> TextGenerator:
    """The generator of ``spec``; each backend takes the options it knows and ignores the
    others (the stage passes every ``[llm]`` backend option)."""
    backend, model = split_spec(spec)
    return TEXT_GENERATORS.get(backend)(model, settings, **options)


def _transformers(model: str, settings: SamplingSettings, **options: Any) -> TextGenerator:
    from corpus_audit.text_generators.transformers_lm import TransformersLM

    return TransformersLM(model, settings, **_known(TransformersLM, options))


def _openai(model: str, settings: SamplingSettings, **options: Any) -> TextGenerator:
    from corpus_audit.text_generators.openai_chat import OpenAIChat

    return OpenAIChat(model, settings, **_known(OpenAIChat, options))


def _known(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """The options ``cls.__init__`` takes by keyword."""
    import inspect

    params = inspect.signature(cls.__init__).parameters
    return {k: v for k, v in options.items() if k in params}


register_text_generator("transformers", _transformers)
register_text_generator("openai", _openai)
