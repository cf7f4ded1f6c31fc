"""Captioning backends behind one small protocol: a registry by name and two kinds.

A :class:`Captioner` turns a batch of :class:`CaptionInput` items into one caption each, in
order, deterministically. Two kinds are registered in :data:`CAPTIONERS`:

- ``transformers`` (``kind = "image"``): an image-captioning model of transformers, loaded with
  ``AutoModelForImageTextToText`` + ``AutoProcessor``: BLIP, BLIP-2, GIT, and the other
  image-text-to-text classes (vision-encoder-decoder, LLaVA-style chat models). The model is a
  local directory (``save_pretrained`` layout) or a hub id that must already be in the local
  Hugging Face cache: loading never downloads (``local_files_only=True``). It reads decoded
  RGB arrays (:func:`corpus_audit.core.imagefile.read_rgb` makes them; the driver decodes files).
- ``paraphrase`` (``kind = "text"``): a text-only rewrite of the existing caption by the
  project's paraphraser (:mod:`corpus_audit.backends.paraphrasers`: the published instruction, greedy
  decoding, the occupation word the rewrite must keep). It reads ``text`` and ``occupation``.

A spec is ``"<kind>:<model>"`` or a plain model (``transformers``), as for the paraphrasers and
generators; ``paraphrase:<spec>`` hands ``<spec>`` to :func:`corpus_audit.backends.paraphrasers.load_paraphraser`.

Determinism and what is recorded. Generation never samples (``do_sample=False``): greedy
decoding, or beam search when ``num_beams > 1``; both are deterministic functions of the
weights, the image and the settings. On CPU in float32 a batch gives the captions each image
gets alone (tested); on a GPU in float16 a different batch size can flip a near-tie between
two tokens (different kernels). :meth:`Captioner.describe` records the model id, the resolved
source, the **revision** (the commit hash of a hub snapshot, or ``sha256:<16 hex>`` of every
file of a local model directory: names, sizes and contents), the model and processor classes,
the generation keyword arguments, the prompt, the dtype, the device and library versions.
:attr:`Captioner.fingerprint` (16 hex digits) hashes what decides the captions (revision or
model id, generation arguments, prompt, ``keep_prompt``, dtype); the device and the batch size
are recorded but not part of it, so a run resumed on another machine continues the same
variant.

Conditional captioning. ``prompt`` (default empty: unconditional) starts every caption, as
BLIP's and GIT's own examples do (``"a photography of"``). BLIP's processor output goes to
BLIP's ``generate`` as it is (BLIP drops the trailing ``[SEP]`` itself); for other models a
trailing end token the tokenizer appended to the prompt (GIT's ``[SEP]``) is removed so the
model continues the prompt instead of ending it. With ``keep_prompt`` (default) the stored
caption is what the model's output sequence decodes to, the prompt included (BLIP and GIT
echo it); without, the prompt is removed as a text prefix of the decoded caption (as the
tokenizer renders it: lower case for BERT's uncased vocabulary), so the two settings differ
by exactly that prefix.
Chat-style models (LLaVA) need their own instruction template in ``prompt`` and
``keep_prompt = False``.

Heavy libraries (torch, transformers) are imported inside functions only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol

import numpy as np
from PIL import Image

from corpus_audit.backends.generators import (
    load_error,
    package_versions,
    resolve_device,
    resolve_dtype,
)
from corpus_audit.backends.paraphrasers import load_paraphraser
from corpus_audit.core.attrs import attrs_dict
from corpus_audit.core.config import RecaptionSection, derived_from
from corpus_audit.core.config_fields import Help, Range
from corpus_audit.core.devices import HeldModel
from corpus_audit.core.errors import ConfigError, ModelError
from corpus_audit.core.registry import Registry
from corpus_audit.core.specs import split_spec

KINDS = ("image", "text")
# Processor outputs no captioning model's generate() takes (GIT's processor adds them).
_DROPPED_INPUTS = ("token_type_ids",)


@derived_from(
    RecaptionSection,
    "max_new_tokens",
    "min_new_tokens",
    "num_beams",
    "repetition_penalty",
    "prompt",
    "keep_prompt",
    "batch_size",
    "engine.device",
    "dtype",
)
class CaptionSettings:
    """How captions are generated; everything here is recorded with the captions.

    The ``[recaption]`` keys of these names and ``engine.device``, derived from their
    declarations in :mod:`corpus_audit.core.config` (type, default, range, meaning; errors
    name ``recaption.KEY``): ``max_new_tokens`` 1..1024 tokens the model may add;
    ``num_beams`` >= 1 (1 = greedy, more = beam search; never sampling); ``prompt`` the text
    every caption starts with ('' = unconditional); ``keep_prompt`` whether the stored caption
    keeps it; ``batch_size`` >= 1 images (or texts) per forward pass; ``device`` auto | cpu |
    cuda | cuda:N | mps; ``dtype`` auto (float16 on CUDA, float32 elsewhere) | float16 |
    bfloat16 | float32. Two settings of the backend alone (not in study.toml):
    ``min_new_tokens`` and ``repetition_penalty``. The ``paraphrase`` kind uses
    ``max_new_tokens``, ``batch_size`` and ``device`` only (greedy decoding by the
    paraphraser).
    """

    min_new_tokens: Annotated[
        int, Range(ge=0), Help("tokens the model must add at least, <= max_new_tokens")
    ] = 0
    repetition_penalty: Annotated[
        float, Range(gt=0), Help("penalty of repeated tokens; 1.0 = none")
    ] = 1.0

    def rules(self) -> None:
        """The rule across fields: ``min_new_tokens`` <= ``max_new_tokens``."""
        if self.min_new_tokens > self.max_new_tokens:  # type: ignore[attr-defined]
            raise ConfigError(
                f"min_new_tokens: {self.min_new_tokens} is not in 0..max_new_tokens "
                f"({self.max_new_tokens})"  # type: ignore[attr-defined]
            )

    def generation_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``model.generate`` (sampling is always off)."""
        return {
            "do_sample": False,
            "num_beams": self.num_beams,
            "max_new_tokens": self.max_new_tokens,
            "min_new_tokens": self.min_new_tokens,
            "repetition_penalty": self.repetition_penalty,
        }


@dataclass(frozen=True)
class CaptionInput:
    """One thing to caption.

    ``key``: the image's id (``image_id``; any hashable, not None). ``image``: an ``(H, W, 3)``
    uint8 RGB array for ``image`` captioners (the driver also accepts a path or the file's
    bytes here and decodes them). ``text`` and ``occupation``: the caption to rewrite and the
    occupation word it must keep, for ``text`` captioners.
    """

    key: Hashable
    image: Any = None
    text: str | None = None
    occupation: str | None = None


class Captioner(Protocol):
    """What the recaption driver needs from a captioning backend."""

    kind: str  # "image": reads CaptionInput.image; "text": reads .text and .occupation
    model_id: str  # as configured: a local path or a hub id (paraphrase: the paraphraser spec)
    settings: CaptionSettings
    fingerprint: str  # 16 hex digits of what decides the captions (see the module docstring)

    def caption(self, items: Sequence[CaptionInput]) -> list[str]:
        """One caption per item, in order; deterministic. Raises ValueError for bad input."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance: kind, backend, model id, revision, classes, generation settings,
        dtype, device, library versions, fingerprint (JSON-serialisable)."""
        ...

    def close(self) -> None:
        """Free the model (GPU memory)."""
        ...


CaptionerFactory = Callable[[str, CaptionSettings], Captioner]
CAPTIONERS: Registry[CaptionerFactory] = Registry("captioner")


def register_captioner(name: str, factory: CaptionerFactory) -> None:
    """Register a backend: ``factory(model, settings) -> Captioner`` (a name once)."""
    CAPTIONERS.register(name, factory)


def load_captioner(spec: str, settings: CaptionSettings | None = None) -> Captioner:
    """The captioner for ``spec`` (``"kind:model"`` for a registered kind, else a
    ``transformers`` model); raises :class:`ModelError` when it cannot be loaded."""
    backend, model = split_spec(spec.strip(), CAPTIONERS, "transformers", empty_model=True)
    if not model:
        raise ModelError("recaption: no model given (a local directory or a cached hub id)")
    return CAPTIONERS.get(backend)(model, settings or CaptionSettings())


def captioner_kind(spec: str) -> str:
    """The kind (``image`` or ``text``) the backend of ``spec`` declares on its factory
    (the registered classes do), without loading it; ``""`` when a plugin declares none."""
    backend, _ = split_spec(spec.strip(), CAPTIONERS, "transformers", empty_model=True)
    return str(getattr(CAPTIONERS.get(backend), "kind", ""))


# -- identity -----------------------------------------------------------------------------------
def directory_digest(folder: Path | str) -> str:
    """``sha256:<16 hex>`` over every file below ``folder``: relative path, size and contents,
    in sorted order (a model directory's identity; the weights are read once, ~1 GB/s)."""
    root = Path(folder)
    sha = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        sha.update(f"{path.relative_to(root).as_posix()}\x00{path.stat().st_size}\x00".encode())
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                sha.update(block)
    return "sha256:" + sha.hexdigest()[:16]


def hub_revision(config: Any) -> str:
    """The commit hash of the cached hub snapshot ``config`` was loaded from (``unknown``
    when it cannot be told): the config's own record, else the snapshot folder's name."""
    commit = getattr(config, "_commit_hash", None)
    if commit:
        return str(commit)
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(str(config.name_or_path), "config.json")
    return Path(found).parent.name if isinstance(found, str) else "unknown"


def settings_fingerprint(identity: dict[str, Any]) -> str:
    """16 hex digits of the sorted JSON of ``identity``."""
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' loading/saving progress bars, then restore them."""
    import transformers.utils.logging as tlog

    enabled = tlog.is_progress_bar_enabled()
    tlog.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            tlog.enable_progress_bar()


def _check_images(items: Sequence[CaptionInput]) -> list[Any]:
    """PIL images of the items' decoded arrays; ValueError naming the first bad item."""
    out = []
    for item in items:
        image = item.image
        if (
            not isinstance(image, np.ndarray)
            or image.ndim != 3
            or image.shape[2] != 3
            or image.dtype != np.uint8
            or 0 in image.shape
        ):
            shape = getattr(image, "shape", None)
            raise ValueError(
                f"image {item.key!r}: an image captioner needs a decoded (H, W, 3) uint8 RGB "
                f"array, got {type(image).__name__} {shape or ''}".rstrip()
            )
        out.append(Image.fromarray(image))
    return out


def _clean(text: str) -> str:
    """White space collapsed and stripped."""
    return " ".join(text.split())


# -- transformers image captioning ---------------------------------------------------------------
class TransformersCaptioner(HeldModel):
    """An image-captioning model of transformers (see the module docstring)."""

    kind = "image"
    backend = "transformers"

    def __init__(self, model_id: str, settings: CaptionSettings | None = None) -> None:
        import torch

        self.model_id = model_id
        self.settings = settings or CaptionSettings()
        self.device = resolve_device(self.settings.device)
        self.torch_dtype = resolve_dtype(self.settings.dtype, self.device)
        local = Path(model_id).expanduser()
        self.source = str(local.resolve()) if local.exists() else model_id
        config = self._load_config()
        self.model_type = str(config.model_type)
        self.processor, self.tokenizer, self.model = self._load_parts()
        self.model.to(device=self.device, dtype=self.torch_dtype).eval()
        self.revision = directory_digest(self.source) if local.exists() else hub_revision(config)
        self._prompt_inputs = self._encode_prompt() if self.settings.prompt else None
        self._torch = torch
        self.fingerprint = settings_fingerprint(
            {
                "backend": self.backend,
                "identity": self.revision if self.revision != "unknown" else self.model_id,
                "model_class": type(self.model).__name__,
                "generation": self.settings.generation_kwargs(),
                "prompt": self.settings.prompt,
                "keep_prompt": self.settings.keep_prompt,
                "dtype": self.dtype_name,
            }
        )

    @property
    def dtype_name(self) -> str:
        return str(self.torch_dtype).replace("torch.", "")

    def _load_config(self) -> Any:
        from transformers import AutoConfig
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES as CAPTIONING,
        )

        try:
            config = AutoConfig.from_pretrained(self.source, local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise load_error(self.model_id, "image-captioning model", exc) from None
        if config.model_type not in CAPTIONING:
            raise ModelError(
                f"{self.model_id}: not an image-captioning model (model_type "
                f"{config.model_type!r}; BLIP, BLIP-2, GIT or another image-text-to-text model "
                "of transformers is needed)"
            )
        return config

    def _load_parts(self) -> tuple[Any, Any, Any]:
        from transformers import AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

        try:
            with warnings.catch_warnings(), quiet_transformers():
                warnings.simplefilter("ignore", FutureWarning)
                processor = AutoProcessor.from_pretrained(self.source, local_files_only=True)
                tokenizer = getattr(processor, "tokenizer", None)
                if tokenizer is None:  # an image processor alone (vision-encoder-decoder)
                    tokenizer = AutoTokenizer.from_pretrained(self.source, local_files_only=True)
                model = AutoModelForImageTextToText.from_pretrained(
                    self.source, local_files_only=True, dtype=self.torch_dtype
                )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise load_error(self.model_id, "image-captioning model", exc) from None
        return processor, tokenizer, model

    def _encode_prompt(self) -> dict[str, Any]:
        """The prompt's token ids as the model reads them (one row), see the module doc."""
        if getattr(self.processor, "tokenizer", None) is None:
            raise ModelError(
                f"{self.model_id}: its processor has no tokenizer, so it takes no caption prompt"
            )
        enc = self.processor.tokenizer([self.settings.prompt], return_tensors="pt")
        enc = {k: v for k, v in enc.items() if k not in _DROPPED_INPUTS}
        ends = {self.tokenizer.sep_token_id, self.tokenizer.eos_token_id} - {None}
        ids = enc["input_ids"]
        if self.model_type != "blip" and ids.shape[1] > 1 and int(ids[0, -1]) in ends:
            enc = {k: v[:, :-1] for k, v in enc.items()}
        return enc

    def _inputs(self, images: list[Any]) -> dict[str, Any]:
        if self._prompt_inputs is None:
            enc = self.processor(images=images, return_tensors="pt")
        elif self.model_type in ("blip", "git"):
            enc = dict(self.processor.image_processor(images=images, return_tensors="pt"))
            enc.update({k: v.repeat(len(images), 1) for k, v in self._prompt_inputs.items()})
        else:  # the processor places the model's image tokens in the text
            enc = self.processor(
                images=images, text=[self.settings.prompt] * len(images), return_tensors="pt"
            )
        out = {}
        for key, value in dict(enc).items():
            if key in _DROPPED_INPUTS:
                continue
            if hasattr(value, "to"):
                is_float = value.is_floating_point()
                value = value.to(self.device, dtype=self.torch_dtype if is_float else None)
            out[key] = value
        return out

    def _decode(self, sequences: Any) -> list[str]:
        texts = [
            _clean(t) for t in self.tokenizer.batch_decode(sequences, skip_special_tokens=True)
        ]
        if not self.settings.prompt or self.settings.keep_prompt:
            return texts
        ids = self.tokenizer(self.settings.prompt, add_special_tokens=False)["input_ids"]
        rendered = _clean(self.tokenizer.decode(ids, skip_special_tokens=True)).lower()
        return [
            t[len(rendered) :].strip() if rendered and t.lower().startswith(rendered) else t
            for t in texts
        ]

    def caption(self, items: Sequence[CaptionInput]) -> list[str]:
        torch = self._torch
        images = _check_images(items)
        out: list[str] = []
        step = self.settings.batch_size
        for start in range(0, len(images), step):
            inputs = self._inputs(images[start : start + step])
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # sampling knobs unused by greedy
                result = self.model.generate(**inputs, **self.settings.generation_kwargs())
            sequences = getattr(result, "sequences", result)
            out.extend(self._decode(sequences))
        return out

    def describe(self) -> dict[str, Any]:
        return {
            **attrs_dict(self, "kind", "backend", "model_id", "source", "revision", "model_type"),
            "model_class": type(self.model).__name__,
            "processor_class": type(self.processor).__name__,
            "generation": self.settings.generation_kwargs(),
            "prompt": self.settings.prompt,
            "keep_prompt": self.settings.keep_prompt,
            "dtype": self.dtype_name,
            "device": self.device,
            "batch_size": self.settings.batch_size,
            "fingerprint": self.fingerprint,
            "versions": package_versions("transformers", "torch"),
        }


# -- text-only rewrite ----------------------------------------------------------------------------
class RewriteCaptioner:
    """A text-only rewrite of each caption by a paraphraser (:mod:`corpus_audit.backends.paraphrasers`).

    Each item needs ``text`` (the caption to rewrite) and ``occupation`` (the word the rewrite
    must keep, as the published instruction says). The paraphraser decodes greedily; settings
    it does not use (beams, min_new_tokens, repetition_penalty, prompt, dtype) must keep their
    defaults, so what is recorded is what ran.
    """

    kind = "text"
    backend = "paraphrase"

    def __init__(self, model_id: str, settings: CaptionSettings | None = None) -> None:
        self.model_id = model_id
        self.settings = settings or CaptionSettings()
        unused = {
            k: v
            for k, v in asdict(self.settings).items()
            if k in ("min_new_tokens", "num_beams", "repetition_penalty", "prompt", "dtype")
            and v != getattr(CaptionSettings, k)
        }
        if unused:
            raise ModelError(
                f"paraphrase:{model_id}: the text rewrite decodes greedily and does not use "
                f"{', '.join(sorted(unused))}"
            )
        self.paraphraser = load_paraphraser(
            model_id,
            device=self.settings.device,
            max_new_tokens=self.settings.max_new_tokens,
            batch_size=self.settings.batch_size,
        )
        described = self.paraphraser.describe()
        folder = Path(str(described.get("model_id", model_id))).expanduser()
        self.revision = directory_digest(folder) if folder.is_dir() else "unknown"
        self.fingerprint = settings_fingerprint(
            {
                "backend": self.backend,
                "paraphraser": self.paraphraser.name,
                "identity": self.revision if self.revision != "unknown" else model_id,
                "model_class": described.get("model_class"),
                "decoding": described.get("decoding"),
                "instruction": described.get("instruction"),
                "max_new_tokens": self.settings.max_new_tokens,
            }
        )

    def caption(self, items: Sequence[CaptionInput]) -> list[str]:
        pairs = []
        for item in items:
            if not isinstance(item.text, str) or not item.text.strip():
                raise ValueError(f"caption {item.key!r}: a text rewrite needs the caption text")
            if not isinstance(item.occupation, str) or not item.occupation.strip():
                raise ValueError(
                    f"caption {item.key!r}: a text rewrite needs the occupation word to keep"
                )
            pairs.append((item.text, item.occupation))
        return [_clean(t) for t in self.paraphraser.paraphrase(pairs)] if pairs else []

    def describe(self) -> dict[str, Any]:
        return {
            **attrs_dict(self, "kind", "backend", "model_id", "revision"),
            "paraphraser": self.paraphraser.describe(),
            "max_new_tokens": self.settings.max_new_tokens,
            "batch_size": self.settings.batch_size,
            "fingerprint": self.fingerprint,
        }

    def close(self) -> None:
        self.paraphraser.close()


register_captioner("transformers", TransformersCaptioner)
register_captioner("paraphrase", RewriteCaptioner)
