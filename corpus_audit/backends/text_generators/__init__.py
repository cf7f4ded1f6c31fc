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

from collections.abc import Callable, Sequence
from typing import Any

from corpus_audit.backends.text_generators.base import (  # noqa: F401  (re-exported)
    REFUSAL_FINISH_REASONS,
    Completion,
    SamplingSettings,
    TextGenerator,
    TextRequest,
)
from corpus_audit.core import specs
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import Registry

# factory(model, settings, **options) -> TextGenerator; options are the backend's own
TextGeneratorFactory = Callable[..., TextGenerator]
TEXT_GENERATORS: Registry[TextGeneratorFactory] = Registry(
    "text generator",
    "corpus_audit.text_generators",
    expects=("a text generator factory (a callable)", callable),
)


def register_text_generator(name: str, factory: TextGeneratorFactory) -> None:
    """Register a backend: ``factory(model, settings, **options) -> TextGenerator``."""
    TEXT_GENERATORS.register(name, factory)


def split_spec(spec: str) -> tuple[str, str]:
    """``"backend:model"`` -> ``(backend, model)``; a spec without a known backend prefix
    raises :class:`~corpus_audit.core.errors.ConfigError` naming the known ones."""
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


# the backends, imported only when a study names them
register_text_generator(
    "transformers", "corpus_audit.backends.text_generators.transformers_lm:factory"
)  # type: ignore[arg-type]
register_text_generator("openai", "corpus_audit.backends.text_generators.openai_chat:factory")  # type: ignore[arg-type]
