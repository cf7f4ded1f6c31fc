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
from dataclasses import dataclass
from typing import Any

from corpus_audit.backends import boundary
from corpus_audit.backends.text_generators.base import (  # noqa: F401  (re-exported)
    REFUSAL_FINISH_REASONS,
    Completion,
    SamplingSettings,
    TextGenerator,
    TextRequest,
)
from corpus_audit.core import specs
from corpus_audit.core.errors import BackendOutputError, ConfigError, ModelError
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


@dataclass(frozen=True)
class TextGeneratorTraits:
    """What a text generator backend declares about itself (its factory's ``traits``; none
    declared: a network client, the defaults). ``local_model``: the model runs where it is
    loaded and draws planned batches of ``llm.batch_size`` rows
    (:func:`~corpus_audit.backends.text_generators.transformers_lm.plan_batches`), so the
    ``llm_texts`` stage spreads a round's batches over the engine's workers; else the
    backend is a client keeping ``llm.concurrency`` requests in flight itself."""

    local_model: bool = False


def text_generator_traits(spec: str) -> TextGeneratorTraits:
    """The :class:`TextGeneratorTraits` the backend of ``spec`` (an ``llm.models`` entry)
    declares, without loading it."""
    traits = getattr(TEXT_GENERATORS.get(split_spec(spec)[0]), "traits", TextGeneratorTraits())
    if not isinstance(traits, TextGeneratorTraits):
        raise ModelError(f"{spec}: the text generator backend's traits are not TextGeneratorTraits")
    return traits


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
    who = boundary.backend_name(TEXT_GENERATORS, backend)
    plugin = boundary.is_plugin(TEXT_GENERATORS, backend)
    factory = TEXT_GENERATORS.get(backend)
    built = boundary.call(who, plugin, "loading the model", factory, model, settings, **options)
    if not callable(getattr(built, "stream", None)):
        raise ModelError(f"{who}: its factory returned {boundary.shown(built)}, no stream")
    return CheckedTextGenerator(built, who, plugin, settings)


class CheckedTextGenerator:
    """A text generator whose completions are checked at the boundary before the stage
    stores them: each index names a request once, a request gets at most its ``n``
    completions, each completion's text, finish reason, token counts (>= 0) and seed have
    their types (:func:`corpus_audit.backends.boundary.check_completion`). A request whose
    ``n >= 2`` texts are all one text while sampling at a temperature above 0 is counted
    and said in :meth:`warnings` (a backend ignoring its seed or its sampling). A plugin's
    exception is one line naming it; the rest is the wrapped generator's."""

    def __init__(self, inner: Any, who: str, plugin: bool, settings: SamplingSettings) -> None:
        self.inner, self.who, self.plugin = inner, who, plugin
        self.sampling = settings
        self.identical = 0  # requests whose texts were all one text

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("inner", "who", "plugin"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def stream(self, requests: Sequence[TextRequest]) -> Iterator[tuple[int, list[Completion]]]:
        """The wrapped generator's ``(index, completions)``, each checked."""
        requests = list(requests)
        seen: set[int] = set()
        items = boundary.call(self.who, self.plugin, "stream", self.inner.stream, requests)
        iterator = boundary.call(self.who, self.plugin, "stream", iter, items)
        end = object()
        try:
            while (
                item := boundary.call(self.who, self.plugin, "stream", next, iterator, end)
            ) is not end:
                yield self._checked(item, requests, seen)
        finally:  # the consumer unwinds: the wrapped stream's requests end with it
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _checked(
        self, item: Any, requests: list[TextRequest], seen: set[int]
    ) -> tuple[int, list[Completion]]:
        who = self.who
        if not isinstance(item, tuple) or len(item) != 2:
            raise BackendOutputError(
                f"{who}: stream yielded {boundary.shown(item)}, not (request index, completions)"
            )
        index, completions = item
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(requests):
            raise BackendOutputError(
                f"{who}: stream yielded request index {boundary.shown(index)} for "
                f"{len(requests)} requests; nothing of this batch was stored"
            )
        if index in seen:
            raise BackendOutputError(
                f"{who}: stream yielded request {index} twice; nothing of this batch was stored"
            )
        seen.add(index)
        if isinstance(completions, (str, bytes)) or not isinstance(completions, Sequence):
            raise BackendOutputError(
                f"{who}: stream yielded {boundary.shown(completions)} as the completions of "
                f"request {index}, not a list"
            )
        n = requests[index].n
        if len(completions) > n:
            raise BackendOutputError(
                f"{who}: stream returned {len(completions)} texts for a request of {n}; "
                "nothing of this batch was stored"
            )
        checked = [boundary.check_completion(c, who) for c in completions]
        texts = {c.text for c in checked}
        if len(checked) >= 2 and len(texts) == 1 and self.sampling.temperature > 0:
            self.identical += 1
        return index, checked

    def warnings(self) -> list[str]:
        """The wrapped generator's warnings and this check's."""
        inner = getattr(self.inner, "warnings", None)
        out = list(inner()) if callable(inner) else []
        checks = getattr(self.inner, "checks", None)  # the chat client counts repeats itself
        said = isinstance(checks, dict) and bool(checks.get("repeated_texts"))
        if self.identical and not said:  # one warning per finding, not two
            out.append(
                f"{self.who}: {self.identical} requests returned the same text for every "
                f"completion at temperature {self.sampling.temperature} (a backend that ignores "
                "its seed or sampling?); they are stored and counted as drawn"
            )
        return out

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            boundary.call(self.who, self.plugin, "close", close)


# the backends, imported only when a study names them
register_text_generator(
    "transformers", "corpus_audit.backends.text_generators.transformers_lm:factory"
)  # type: ignore[arg-type]
register_text_generator("openai", "corpus_audit.backends.text_generators.openai_chat:factory")  # type: ignore[arg-type]
