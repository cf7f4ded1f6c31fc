"""Text-to-image generators: one small protocol, a registry by name, a diffusers backend.

A :class:`Generator` turns a batch of ``(prompt, seed)`` pairs into images. The seed fully
determines the initial noise: every image gets its own CPU ``torch.Generator`` seeded with its
recorded seed, so the noise does not depend on the batch it was made in nor on the device
(METHODS 1.3: "each with its own recorded seed so any image can be regenerated exactly").
On CPU in float32 the same (prompt, seed) gives bit-identical pixels; on a GPU the same
(prompt, seed, batch size) does, and a different batch size gives the same image within
floating-point rounding (different kernels).

Backends are registered by name in :data:`GENERATORS`; a model spec in ``generate.models`` is
``"<backend>:<model>"`` or a plain model (diffusers): a hub id such as
``CompVis/stable-diffusion-v1-4`` / ``stable-diffusion-v1-5/stable-diffusion-v1-5`` or a local
pipeline directory (``save_pretrained`` layout with ``model_index.json``).

GPU path (diffusers backend): float16 by default (``bfloat16``/``float32`` on request),
batched prompts, PyTorch scaled-dot-product attention (``AttnProcessor2_0``), UNet and VAE in
channels-last memory format, optional ``torch.compile`` of the UNet. CPU path: float32.

The safety checker of a pipeline that has one (Stable Diffusion 1.x) is run by this module on
every image and its NSFW flag returned with the image (never dropped): ``nsfw_policy="blackout"``
saves flagged images black (what diffusers does), ``"keep"`` saves them as generated. Pipelines
without a checker report ``nsfw=None``.

Random-weight Stable Diffusion pipelines for tests and benchmarks live in
:mod:`corpus_audit.backends.fakes.diffusion`.

Heavy libraries (torch, diffusers, transformers) are imported inside functions only.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from corpus_audit.core import specs
from corpus_audit.core.config import (  # noqa: F401  (DTYPES, NSFW_POLICIES re-exported)
    DTYPES,
    NSFW_POLICIES,
    GenerateSection,
    StudyConfig,
    derived_from,
)
from corpus_audit.core.devices import resolve_device  # noqa: F401  (re-exported)
from corpus_audit.core.errors import ModelError
from corpus_audit.core.registry import Registry
from corpus_audit.core.slugs import slug
from corpus_audit.core.versions import package_versions  # noqa: F401  (re-exported)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@derived_from(
    GenerateSection,
    "steps",
    "guidance_scale",
    "height",
    "width",
    "engine.device",
    "dtype",
    "scheduler",
    "nsfw_policy",
    "channels_last",
    "compile",
)
class GenerationSettings:
    """How images are made; everything here is recorded with each image.

    The ``[generate]`` keys of these names and ``engine.device``, derived from their
    declarations in :mod:`corpus_audit.core.config` (type, default, range, meaning; checked by
    the same checker, errors naming ``generate.KEY``): ``steps`` >= 1 denoising steps;
    ``guidance_scale`` >= 0 (classifier-free guidance, 7.5 in the paper; <= 1 disables
    guidance); ``height``/``width`` in pixels, multiples of 8; ``device`` auto | cpu | cuda |
    cuda:N | mps; ``dtype`` auto (float16 on CUDA, float32 elsewhere) | float16 | bfloat16 |
    float32; ``scheduler`` a diffusers scheduler class name (empty = the pipeline's own);
    ``nsfw_policy`` blackout | keep. ``GenerationSettings.from_config(config)`` reads them
    from a study config.
    """


@dataclass
class GeneratedImage:
    """One generated image: ``pixels`` uint8 array of shape (height, width, 3), RGB.

    ``nsfw`` is the safety checker's flag (None when the pipeline has no checker).
    """

    pixels: np.ndarray
    nsfw: bool | None


class Generator(Protocol):
    """What the generate stage needs from a text-to-image backend."""

    model_id: str  # as configured: hub id or local path
    settings: GenerationSettings
    max_prompt_tokens: int | None  # the text encoder's context (77 for CLIP), None if unknown

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text including start/end tokens (before any truncation)."""
        ...

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GeneratedImage]:
        """One image per (prompt, seed), in order. Seeds in [0, 2**63)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance: backend, classes, scheduler, dtype, device, library versions."""
        ...

    def close(self) -> None:
        """Free the model (GPU memory)."""
        ...


@dataclass(frozen=True)
class GeneratorTraits:
    """What a generator backend declares about itself (its factory's ``traits`` attribute;
    a backend that declares none is a local model: the defaults). The ``generate`` stage reads
    these, never the backend's name.

    ``per_image``: an images API whose answers are kept one by one (the bytes as sent, no
    seed, refusals recorded: :mod:`corpus_audit.backends.openai_images`) instead of seeded
    batches of ``generate.batch_size`` images; ``needs_config``: the factory takes the
    ``[generate]`` section (``config=``) instead of local files.
    """

    per_image: bool = False
    needs_config: bool = False


LOCAL_MODEL = GeneratorTraits()


GeneratorFactory = Callable[[str, GenerationSettings], Generator]
# backend name -> factory(model_id, settings); the prefix of a "<backend>:<model>" spec
GENERATORS: Registry[GeneratorFactory] = Registry(
    "generator", "corpus_audit.generators", expects=("a generator factory (a callable)", callable)
)


def register_generator(name: str, factory: GeneratorFactory) -> None:
    """Register a backend: ``factory(model_id, settings) -> Generator``."""
    GENERATORS.register(name, factory)


def split_spec(spec: str) -> tuple[str, str]:
    """``"backend:model"`` -> (backend, model); a plain model -> ("diffusers", model)."""
    return specs.split_spec(spec, GENERATORS, "diffusers")


def generator_traits(model: str) -> GeneratorTraits:
    """The :class:`GeneratorTraits` the backend of ``model`` (a ``generate.models`` entry)
    declares (:data:`LOCAL_MODEL` when it declares none)."""
    traits = getattr(GENERATORS.get(split_spec(model)[0]), "traits", LOCAL_MODEL)
    if not isinstance(traits, GeneratorTraits):
        raise ModelError(f"{model}: the generator backend's traits are not a GeneratorTraits")
    return traits


def open_generator(
    config: StudyConfig, model: str, settings: GenerationSettings, *, progress: bool = True
) -> Generator:
    """Load the generator of a ``generate.models`` entry of ``config`` (local paths relative to
    the study; an API backend gets the ``[generate]`` section instead of files)."""
    backend, name = split_spec(model)
    factory = GENERATORS.get(backend)
    if generator_traits(model).needs_config:  # an API backend: no local files, no weights
        return factory(name, settings, config=config.generate)
    path = config.resolve(name)
    with quiet_loading(not progress):
        return factory(str(path) if path.exists() else name, settings)


# -- ids and seeds --------------------------------------------------------------------------
def model_slug(model_id: str) -> str:
    """A file-name-safe, stable short name of a model spec.

    Hub ids keep their name (``CompVis/stable-diffusion-v1-4`` ->
    ``compvis--stable-diffusion-v1-4``); local paths become their folder name plus 8 hex
    digits of a hash of the spec, so two folders with one name do not collide.
    """
    spec = model_id.strip()
    if _HUB_ID.match(spec) and not Path(spec).expanduser().exists():
        return slug(spec.replace("/", "--"), sep="-", lower=True, empty="")
    name = Path(spec.rstrip("/\\")).name or "model"
    digest = hashlib.sha256(spec.encode()).hexdigest()[:8]
    return slug(name, sep="-", lower=True, empty="") + "-" + digest


def derive_seed(study_seed: int, model_id: str, prompt_key: str, index: int) -> int:
    """The seed of image ``index`` of ``prompt_key`` for ``model_id``, in [0, 2**63).

    SHA-256 of ``"<study_seed>\\x1f<model_id>\\x1f<prompt_key>\\x1f<index>"``, first 8 bytes
    big-endian, top bit cleared: independent of run order, batch size, machine and of the other
    prompts, so one image can be regenerated alone.
    """
    blob = f"{study_seed}\x1f{model_id}\x1f{prompt_key}\x1f{index}".encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") & ((1 << 63) - 1)


# -- devices --------------------------------------------------------------------------------
def resolve_dtype(dtype: str, device: str) -> Any:
    """The torch dtype: ``auto`` is float16 on CUDA and float32 elsewhere."""
    import torch

    if dtype == "auto":
        return torch.float16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def load_error(model_id: str, kind: str, exc: BaseException) -> ModelError:
    """A one-line :class:`ModelError` for a model that did not load (offline, missing, bad)."""
    from huggingface_hub import constants

    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    path = Path(model_id).expanduser()
    if path.exists():
        return ModelError(f"{model_id}: cannot load the {kind} from this directory: {first}")
    if not _HUB_ID.match(model_id):
        return ModelError(f"{model_id}: no such {kind} directory (and not a hub id)")
    if constants.HF_HUB_OFFLINE:
        return ModelError(
            f"{model_id}: {kind} is not a local directory and not in the Hugging Face cache, and "
            f"the hub is offline (HF_HUB_OFFLINE=1): download it on a connected machine "
            f"(`hf download {model_id}`) or give the path of a local copy"
        )
    return ModelError(f"{model_id}: cannot load the {kind} from the Hugging Face hub: {first}")


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Silence diffusers/transformers warnings this module records itself (prompt truncation,
    NSFW blackout) while a pipeline runs; restores the levels afterwards."""
    loggers = [logging.getLogger(name) for name in ("diffusers", "transformers")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


@contextlib.contextmanager
def quiet_loading(quiet: bool = True) -> Iterator[None]:
    """Hide diffusers'/transformers' model-loading progress bars (``quiet``), then restore."""
    if not quiet:
        yield
        return
    import diffusers.utils.logging as dlog
    import transformers.utils.logging as tlog

    before = [(m, m.is_progress_bar_enabled()) for m in (dlog, tlog)]
    for m, _ in before:
        m.disable_progress_bar()
    try:
        yield
    finally:
        for m, enabled in before:
            if enabled:
                m.enable_progress_bar()


# -- diffusers backend ----------------------------------------------------------------------
class DiffusersGenerator:
    """A diffusers text-to-image pipeline (Stable Diffusion 1.x/2.x and compatible).

    Loads by hub id (cache only when ``HF_HUB_OFFLINE=1``) or local directory. On CUDA:
    half precision, SDPA attention, channels-last UNet/VAE, optional ``torch.compile``.
    """

    backend = "diffusers"

    def __init__(self, model_id: str, settings: GenerationSettings, *, pipeline: Any = None):
        self.model_id = model_id
        self.settings = settings
        self.device = resolve_device(settings.device)
        self.torch_dtype = resolve_dtype(settings.dtype, self.device)
        self.pipe = pipeline if pipeline is not None else self._load()
        self._prepare()

    @classmethod
    def from_pipeline(
        cls, pipeline: Any, model_id: str, settings: GenerationSettings
    ) -> DiffusersGenerator:
        """Wrap a pipeline already in memory (benchmarks, tests); same preparation as loading."""
        return cls(model_id, settings, pipeline=pipeline)

    def _load(self) -> Any:
        from diffusers import DiffusionPipeline

        source = str(Path(self.model_id).expanduser())
        if not Path(source).exists():
            source = self.model_id
        try:
            with warnings.catch_warnings():  # `torch_dtype` is renamed `dtype` in new diffusers
                warnings.simplefilter("ignore", FutureWarning)
                return DiffusionPipeline.from_pretrained(source, torch_dtype=self.torch_dtype)
        except (OSError, ValueError) as exc:
            raise load_error(self.model_id, "text-to-image model", exc) from None

    def _prepare(self) -> None:
        import torch

        pipe = self.pipe
        for name in ("unet", "transformer", "text_encoder", "vae"):
            if getattr(pipe, name, None) is None and name in ("unet", "text_encoder"):
                raise ModelError(f"{self.model_id}: not a text-to-image pipeline (no {name})")
        if self.settings.scheduler:
            pipe.scheduler = self._scheduler(self.settings.scheduler)
        # The checker is run here, not inside the pipeline, so flagged images can be kept.
        self.safety_checker = getattr(pipe, "safety_checker", None)
        self.feature_extractor = getattr(pipe, "feature_extractor", None)
        if self.safety_checker is not None:
            pipe.safety_checker = None
            if self.feature_extractor is None:
                raise ModelError(f"{self.model_id}: has a safety checker but no feature_extractor")
        if pipe.dtype != self.torch_dtype:
            pipe.to(dtype=self.torch_dtype)
        pipe.to(self.device)
        if self.safety_checker is not None:
            self.safety_checker.to(self.device, self.torch_dtype)
        self.attention = self._use_sdpa()
        cuda = self.device.startswith("cuda")
        self.channels_last = bool(self.settings.channels_last and cuda)
        if self.channels_last:
            for name in ("unet", "vae"):
                module = getattr(pipe, name, None)
                if module is not None:
                    module.to(memory_format=torch.channels_last)
        self.compiled = False
        if self.settings.compile and cuda:
            pipe.unet = torch.compile(pipe.unet)
            self.compiled = True
        if hasattr(pipe, "set_progress_bar_config"):
            pipe.set_progress_bar_config(disable=True)
        tokenizer = getattr(pipe, "tokenizer", None)
        self.tokenizer = tokenizer
        limit = getattr(tokenizer, "model_max_length", None)
        self.max_prompt_tokens = int(limit) if limit and limit < 100_000 else None

    def _scheduler(self, name: str) -> Any:
        import diffusers

        compatible = sorted(c.__name__ for c in getattr(self.pipe.scheduler, "compatibles", []))
        cls = getattr(diffusers, name, None)
        if cls is None or not hasattr(cls, "from_config") or "Scheduler" not in name:
            raise ModelError(
                f"generate.scheduler: {name!r} is not a diffusers scheduler "
                f"(compatible with {self.model_id}: {', '.join(compatible) or 'unknown'})"
            )
        return cls.from_config(self.pipe.scheduler.config)

    def _use_sdpa(self) -> list[str]:
        """Set PyTorch SDPA attention on UNet and VAE; return the processor classes in use."""
        import torch.nn.functional as F

        used: set[str] = set()
        try:
            from diffusers.models.attention_processor import AttnProcessor2_0
        except ImportError:  # pragma: no cover - very old or very new diffusers
            AttnProcessor2_0 = None
        for name in ("unet", "vae"):
            module = getattr(self.pipe, name, None)
            if module is None or not hasattr(module, "attn_processors"):
                continue
            if AttnProcessor2_0 is not None and hasattr(F, "scaled_dot_product_attention"):
                # a model with special processors keeps them
                with contextlib.suppress(ValueError, TypeError):
                    module.set_attn_processor(AttnProcessor2_0())
            used.update(type(p).__name__ for p in module.attn_processors.values())
        return sorted(used)

    # -- protocol ----------------------------------------------------------------------------
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self.tokenizer is None:
            return [0] * len(texts)
        ids = self.tokenizer(list(texts), truncation=False, verbose=False).input_ids
        return [len(x) for x in ids]

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GeneratedImage]:
        import torch

        if len(prompts) != len(seeds):
            raise ValueError("generate: prompts and seeds differ in length")
        if not prompts:
            return []
        s = self.settings
        generators = [torch.Generator("cpu").manual_seed(int(seed)) for seed in seeds]
        with torch.inference_mode(), _quiet_libraries():
            out = self.pipe(
                prompt=list(prompts),
                generator=generators,
                num_inference_steps=s.steps,
                guidance_scale=s.guidance_scale,
                height=s.height,
                width=s.width,
                output_type="np",
            )
        images = np.asarray(out.images, dtype=np.float32)
        pixels = (images * 255).round().clip(0, 255).astype(np.uint8)
        flags = self._nsfw(pixels)
        result = []
        for px, flag in zip(pixels, flags, strict=True):
            if flag and s.nsfw_policy == "blackout":
                px = np.zeros_like(px)
            result.append(GeneratedImage(np.ascontiguousarray(px), flag))
        return result

    def _nsfw(self, pixels: np.ndarray) -> list[bool | None]:
        """The safety checker's flag per image (None without a checker)."""
        import torch
        from PIL import Image

        if self.safety_checker is None:
            return [None] * len(pixels)
        pil = [Image.fromarray(p) for p in pixels]
        clip_input = self.feature_extractor(pil, return_tensors="pt").pixel_values
        clip_input = clip_input.to(self.device, self.torch_dtype)
        scratch = np.zeros((len(pixels), 1, 1, 3), dtype=np.float32)  # the checker blanks these
        with torch.inference_mode(), _quiet_libraries():
            _, flags = self.safety_checker(images=scratch, clip_input=clip_input)
        return [bool(f) for f in flags]

    def describe(self) -> dict[str, Any]:
        pipe = self.pipe
        scheduler = pipe.scheduler
        sched_config = {k: v for k, v in dict(scheduler.config).items() if not k.startswith("_")}
        return {
            "backend": self.backend,
            "model_id": self.model_id,
            "pipeline_class": type(pipe).__name__,
            "name_or_path": str(getattr(pipe.config, "_name_or_path", "") or ""),
            "scheduler": type(scheduler).__name__,
            "scheduler_config": json.loads(json.dumps(sched_config, default=str)),
            "device": self.device,
            "dtype": str(self.torch_dtype).replace("torch.", ""),
            "attention": self.attention,
            "channels_last": self.channels_last,
            "compiled": self.compiled,
            "safety_checker": self.safety_checker is not None,
            "max_prompt_tokens": self.max_prompt_tokens,
            "settings": asdict(self.settings),
            "versions": package_versions("diffusers", "transformers", "torch"),
        }

    def close(self) -> None:
        import torch

        self.pipe = None
        self.safety_checker = None
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


register_generator("diffusers", DiffusersGenerator)


# an OpenAI-compatible images API, imported only when a study names it
register_generator("openai", "corpus_audit.backends.openai_images:openai_images")  # type: ignore[arg-type]
