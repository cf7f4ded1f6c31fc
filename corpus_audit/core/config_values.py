"""What the ``study.toml`` sections share: the choices and bounds of their keys, the shared
declarations (the HTTP client's settings), the :class:`Section` base and the checkers of values
with a grammar (memory sizes, prompt sets, image sources, ...). The sections themselves are in
:mod:`~corpus_audit.core.config_corpus` (the corpus side), :mod:`~corpus_audit.core.config_models`
(images and models) and :mod:`~corpus_audit.core.config_texts` (texts, PST, recaptioning);
:mod:`corpus_audit.core.config` puts them together.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from corpus_audit.core.config_fields import Help, OneOf, Range, Rule, check_fields
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import load

CONFIG_NAME = "study.toml"
SAMPLE_UNITS = ("labelled_images", "captions")  # select.sample_unit
NO_INDICATOR_SAMPLES = ("split", "fresh")  # indicators.no_indicator_sample
CAPTION_PROMPTS = ("labelled", "all")  # generate.caption_prompts
PARITY_SIDES = ("upper", "neither")  # analysis.parity_side
CORRECTION_SCOPES = ("per_source", "pooled")  # analysis.correction
IMAGE_SIMILARITY = ("auto", "on", "off")  # analysis.image_similarity
PST_KINDS = ("single", "paired", "power")  # pst.kinds (corpus_audit.methods.lexicon.pst.KINDS)
TEXT_SOURCES = ("captions", "corpus", "llm")  # texts.source
LLM_GENDERS = ("female", "male", "non_binary")  # llm.genders
DTYPES = ("auto", "float16", "bfloat16", "float32")  # generate, recaption, llm: dtype
NSFW_POLICIES = ("blackout", "keep")  # generate.nsfw_policy
PRECISIONS = ("auto", "fp32", "bf16", "fp16")  # neighbors.precision (backends.embeddings)
BASES = ("union", "a", "b", "both")  # variants.basis (corpus_audit.methods.recaption.compare.BASES)
VARIANT_NAME = re.compile(r"[a-z0-9_]{1,40}")  # caption variant names (variants, recaption)

# Bounds of the counts a user sets (docs/reliability.md, "Bounds of the counts you set"): a
# count past them would take the machine down rather than give a better answer.
MAX_RESAMPLES = 100_000  # analysis.bootstrap, variants.replicates, battles import --rounds
#: texts per pair (``llm.n``, ``llm.max_texts``): the requests of a round are planned before
#: the first is sent (issue 33: ``llm.n = 1e9`` allocated 4 GB first)
MAX_LLM_TEXTS = 100_000
#: the name of an API key variable (docs/reliability.md, "Secrets"): a study may name only
#: such variables, so it cannot send AWS_SECRET_ACCESS_KEY or HOME to a server
API_KEY_NAME = re.compile(r"[A-Z][A-Z0-9_]*(_API_KEY|_TOKEN)")
KEY_NAME_RULE = Rule(
    lambda v: not v or API_KEY_NAME.fullmatch(v) is not None,
    "must be empty or a variable name ending in _API_KEY or _TOKEN (docs/reliability.md)",
)
#: the stages whose workers load a model (engine.workers may name them)
WORKER_STAGES = ("indicators", "neighbors", "label", "generate", "recaption", "llm_texts")
MAX_THREADS = 1024  # engine.threads (DuckDB threads, workers of the map-style steps)

COUNT = Range(ge=1)  # a count of at least one
NOT_NEGATIVE = Range(ge=0)
POSITIVE = Range(gt=0)
FINITE_POSITIVE = Range(gt=0, finite=True)  # durations, sizes: > 0, never NaN or infinite
FINITE_NOT_NEGATIVE = Range(ge=0, finite=True)

# The HTTP client settings (backends/api_client.py), declared once and shared by the images
# client ([generate] api_*) and the chat client ([llm]); retries count the requests after the
# first one (0: ask once). A section holds them through :func:`http_keys`.
HTTP_BASE = Rule(lambda v: v.startswith(("http://", "https://")), "must start with http(s)://")
HTTP_CONCURRENCY = Annotated[int, COUNT, Help("API models: HTTP requests in flight at once")]
HTTP_TIMEOUT = Annotated[
    float,
    FINITE_POSITIVE,
    Help(
        "API models: seconds one HTTP request may take in all (connect, wait, whole answer) "
        "before a retry"
    ),
]
HTTP_MAX_BODY_MB = Annotated[
    float,
    FINITE_POSITIVE,
    Help("API models: largest answer body read, in MB (larger: the request fails)"),
]
HTTP_MAX_RETRIES = Annotated[
    int,
    NOT_NEGATIVE,
    Help("API models: retries of a request after the first (408, 409, 429, 5xx, timeouts), >= 0"),
]
HTTP_BACKOFF = Annotated[
    float,
    FINITE_NOT_NEGATIVE,
    Help("API models: first retry delay bound in seconds, doubled each retry (jittered)"),
]
HTTP_MAX_BACKOFF = Annotated[
    float,
    FINITE_NOT_NEGATIVE,
    Help("API models: longest wait between attempts in seconds (Retry-After too)"),
]
#: the HTTP client's keys in file order: role -> (declaration, default)
HTTP_KEYS: dict[str, tuple[Any, Any]] = {
    "concurrency": (HTTP_CONCURRENCY, 4),
    "timeout": (HTTP_TIMEOUT, 120.0),
    "max_body_mb": (HTTP_MAX_BODY_MB, 64.0),
    "max_retries": (HTTP_MAX_RETRIES, 5),
    "backoff": (HTTP_BACKOFF, 1.0),
    "max_backoff": (HTTP_MAX_BACKOFF, 60.0),
}
HTTP_DURATIONS = ("timeout", "backoff", "max_backoff")  # seconds


def http_keys(
    after: str, *, prefix: str = "", seconds: str = "", **defaults: Any
) -> Callable[[type], type]:
    """Class decorator, under ``@dataclass``: the section's HTTP client keys (:data:`HTTP_KEYS`,
    each declared once) right after its key ``after``, named ``prefix + role`` (``+ seconds``
    for a duration: ``timeout_s``), with ``defaults`` by role where the section's differ."""

    def wrap(cls: type) -> type:
        out: dict[str, Any] = {}
        for key, annotation in cls.__dict__.get("__annotations__", {}).items():
            out[key] = annotation
            if key != after:
                continue
            for role, (declaration, default) in HTTP_KEYS.items():
                name = prefix + role + (seconds if role in HTTP_DURATIONS else "")
                out[name] = declaration
                setattr(cls, name, defaults.get(role, default))
        if set(defaults) - set(HTTP_KEYS) or after not in out:
            raise TypeError(f"{cls.__name__}: http_keys({after!r}, {sorted(defaults)})")
        cls.__annotations__ = out
        return cls

    return wrap


UNIT = Range(ge=0, le=1)  # a share or a probability
VARIANT = Rule(
    lambda v: bool(VARIANT_NAME.fullmatch(v)), "is not a variant name (1-40 of a-z, 0-9, _)"
)


class Section:
    """Base of the ``study.toml`` sections: :meth:`validate` checks every key against its
    declaration (type, range, choices; :func:`check_fields`), then :meth:`rules`."""

    @classmethod
    def toml_name(cls) -> str:
        """The section's name in ``study.toml``: the class name without ``Section``, lower case
        (``GenerateSection``: ``generate``; the field of :class:`StudyConfig` that holds it)."""
        return cls.__name__.removesuffix("Section").lower()

    def validate(self) -> None:
        """:class:`ConfigError` naming ``section.key`` for the first value that is not allowed."""
        check_fields(self, self.toml_name())
        self.rules()

    def rules(self) -> None:
        """The section's rules across keys (a key's own range is declared with the key)."""


_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*")
_PERCENT = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*%\s*")
_SIZE_UNITS = {
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
MIN_MEMORY_LIMIT = 64 * 10**6  # bytes; DuckDB cannot run the stages' queries in much less


def parse_size(text: str) -> int | None:
    """``'2GB'`` -> 2000000000 bytes (DuckDB's units: KB = 1000 B, KiB = 1024 B); None for
    anything else, including a percentage of the RAM (``'80%'``)."""
    m = _SIZE.fullmatch(text)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def check_memory_size(key: str, value: str) -> None:
    """A DuckDB memory size: the only text form that ever reaches DuckDB's settings."""
    percent = _PERCENT.fullmatch(value)
    if percent:
        if not 0 < float(percent.group(1)) <= 100:
            raise ConfigError(f"{key}: {value!r} is not a share of the RAM in (0%, 100%]")
        return
    size = parse_size(value)
    if size is None:
        raise ConfigError(
            f"{key}: {value!r} is not a memory size (a number and a unit: 2GB, 1.5GiB, "
            "512MB; or a share of the RAM: 80%)"
        )
    if size < MIN_MEMORY_LIMIT:
        raise ConfigError(f"{key}: {value!r} is below the 64MB DuckDB needs")


def check_prompt_sets(key: str, prompts: str | list[str]) -> None:
    """One prompt set, or a non-empty list of them (names or paths)."""
    specs = [prompts] if isinstance(prompts, str) else prompts
    if not isinstance(specs, list) or not specs:
        raise ConfigError(f"{key}: expected a prompt set or a non-empty list of them")
    for i, spec in enumerate(specs):
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"{key}[{i}]: expected a prompt set name or path")


def check_image_sources(key: str, sources: list[dict[str, Any]]) -> None:
    """Each image source: its kind from the registry, typed options, no unknown key."""
    parse_source = load("corpus_audit.backends.image_sources:parse_source")  # no image library
    for i, source in enumerate(sources):
        parse_source(i, source)


def check_feedback_writer(key: str, writer: str) -> None:
    """A FairCritic feedback writer: a registered name, with ``:model`` where it takes one."""
    names = load("corpus_audit.backends.feedback:WRITERS").names()
    OneOf(tuple(names)).check(key, writer.partition(":")[0])


def check_text_generator(key: str, spec: str) -> None:
    """A text generator spec ``backend:model`` (the backend's registry name, a model)."""
    load("corpus_audit.backends.text_generators:split_spec")(spec)  # no backend import


def check_variant_columns(key: str, columns: dict[str, str]) -> None:
    """Variant names (not ``original``, the column ``select`` reads) -> corpus columns."""
    for name in columns:
        VARIANT.check(f"{key}.{name}", name)
        if name == "original":
            raise ConfigError(
                f"{key}.original: 'original' is the column select reads "
                "(corpus.text_column); give the other variants here"
            )
