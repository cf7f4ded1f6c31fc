"""The ``study.toml`` sections of the corpus side: ``[study]``, ``[corpus]``, ``[lexicon]``,
``[storage]``, ``[engine]``, ``[select]``, ``[indicators]``, ``[neighbors]`` (one field a key;
the conventions in :mod:`corpus_audit.core.config`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

from corpus_audit.core.config_fields import (
    Cap,
    Check,
    Help,
    Keys,
    OneOf,
    Range,
    Registered,
    Rule,
    Text,
)
from corpus_audit.core.config_values import (
    COUNT,
    MAX_THREADS,
    NO_INDICATOR_SAMPLES,
    NOT_NEGATIVE,
    PRECISIONS,
    SAMPLE_UNITS,
    WORKER_STAGES,
    Section,
    check_memory_size,
    check_prompt_sets,
)
from corpus_audit.core.errors import ConfigError


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
        Check(check_prompt_sets),
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
        Check(check_endpoint),
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
        Check(check_memory_size),
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
