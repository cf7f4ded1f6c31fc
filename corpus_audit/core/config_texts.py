"""The ``study.toml`` sections of texts, the PST and recaptioning: ``[variants]``,
``[recaption]``, ``[pst]``, ``[texts]``, ``[llm]`` (one field a key; the conventions in
:mod:`corpus_audit.core.config`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from corpus_audit.core.config_fields import (
    Cap,
    Check,
    Help,
    OneOf,
    Range,
    Rule,
    Text,
)
from corpus_audit.core.config_values import (
    BASES,
    COUNT,
    DTYPES,
    HTTP_BASE,
    KEY_NAME_RULE,
    LLM_GENDERS,
    MAX_LLM_TEXTS,
    MAX_RESAMPLES,
    NOT_NEGATIVE,
    POSITIVE,
    PST_KINDS,
    TEXT_SOURCES,
    UNIT,
    VARIANT,
    Section,
    check_feedback_writer,
    check_text_generator,
    check_variant_columns,
    http_keys,
)
from corpus_audit.core.errors import ConfigError

LLM_TEXTS_CAP = Cap(MAX_LLM_TEXTS, "texts planned per pair")  # llm.n, llm.max_texts


@dataclass
class VariantsSection(Section):
    """Caption variants of the same images compared side by side (docs/recaptioning.md).

    The variant ``original`` is always the caption column ``select`` reads; ``columns`` adds
    variants from other text columns of the same corpus rows; finished ``recaption`` runs add
    theirs. The ``variants`` stage compares every variant with ``baseline``.
    """

    columns: Annotated[
        dict[str, Annotated[str, Text("a column name")]],
        Check(check_variant_columns),
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
        Check(check_feedback_writer),
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
@http_keys("n_per_request", seconds="_s", concurrency=8, max_retries=6)
class LlmSection(Section):
    """LLM-written biographies and personas for who-vs-how (the ``llm_texts`` stage; "More of
    the Same"; docs/who_vs_how.md). ``enabled`` makes the study an LLM study: ``corpus-audit
    run`` then runs :data:`corpus_audit.core.catalogue.RUN_ORDERS` ``["llm"]``."""

    enabled: Annotated[bool, Help("true: an LLM study (`corpus-audit init DIR --kind llm`)")] = (
        False
    )
    models: Annotated[
        list[Annotated[str, Check(check_text_generator)]],
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
        LLM_TEXTS_CAP,
        Help("texts per specified pair; per side (women, men) for unspecified prompts"),
    ] = 100
    abandon_below: Annotated[
        float, UNIT, Help("abandon an unspecified pair below this share of n a side, [0, 1]")
    ] = 0.1
    max_texts: Annotated[
        int,
        LLM_TEXTS_CAP,
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
        HTTP_BASE,
        Help(
            "openai: the server, e.g. http://localhost:8000/v1 (vLLM), "
            "http://localhost:11434/v1 (Ollama)"
        ),
    ] = "https://api.openai.com/v1"
    api_key_env: Annotated[
        str,
        KEY_NAME_RULE,
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
    # here: concurrency, timeout_s, max_body_mb, max_retries, backoff_s, max_backoff_s (the
    # HTTP client's keys, declared once: config_values.http_keys)
    batch_size: Annotated[int, COUNT, Help("transformers: sequences per generate() call")] = 16
    dtype: Annotated[
        str, OneOf(DTYPES), Help("transformers: auto | float16 | bfloat16 | float32")
    ] = "auto"

    def rules(self) -> None:
        if self.max_texts < self.n:
            raise ConfigError(f"llm.max_texts: {self.max_texts} must be >= llm.n ({self.n})")
