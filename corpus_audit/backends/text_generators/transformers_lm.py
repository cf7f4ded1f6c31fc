"""``transformers:<local path or hub id>``: a causal language model run in this process.

- the user message goes through the tokenizer's chat template when it has one
  (``apply_chat_template(..., add_generation_prompt=True)``), else it is the plain text
  followed by a newline; only the new tokens are decoded;
- **batched**: the ``n`` samples of the requests are packed into batches of ``batch_size``
  sequences (left padding), one ``generate`` call per batch;
- **seeded**: before each batch the torch generator is seeded with the seed of the batch's
  first sample (a request's samples ``j`` use ``seed + j``); each text records the seed its
  batch was drawn with. The same requests, settings, batch size and device give the same
  texts; another batch size gives other (equally valid) samples;
- **distributable**: :func:`plan_batches` (no model) cuts the requests into
  :class:`PlannedBatch` es, :meth:`TransformersLM.generate_batch` draws one, and
  :func:`assemble` turns their completions (in batch order) into the per-request yields;
  :meth:`TransformersLM.stream` is exactly these three, so batches drawn by other processes
  (the ``llm_texts`` stage's engine actors) give the same texts, yielded in the same order;
- device from ``engine.device`` (GPU when there is one), ``dtype`` auto (float16 on CUDA, float32
  elsewhere) | float16 | bfloat16 | float32;
- a hub id is loaded from the local cache only when ``HF_HUB_OFFLINE`` is set; the stage
  never downloads on its own (fetch a model with ``huggingface-cli download``);
- ``finish_reason``: ``stop`` when the model produced its end-of-sequence token, else
  ``length``; ``completion_tokens``: the tokens of the text up to and including the end token.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.backends.text_generators import TextGeneratorTraits
from corpus_audit.backends.text_generators.base import (
    Completion,
    SamplingSettings,
    TextRequest,
    known_options,
    model_description,
)
from corpus_audit.backends.text_generators.instruction_lm import InstructionLM
from corpus_audit.core.config import LlmSection, derived_from
from corpus_audit.core.devices import HeldModel, resolve_device
from corpus_audit.core.errors import ModelError, printable


@derived_from(LlmSection, "batch_size", "dtype", "engine.device")
class LocalLMSettings:
    """A local model's ``[llm]`` settings, derived from their declarations: ``batch_size``
    sequences per ``generate`` call (>= 1), ``dtype`` auto | float16 | bfloat16 | float32,
    ``device`` (``engine.device``); a value out of range is a :class:`ConfigError` naming
    ``llm.KEY``."""


@dataclass(frozen=True)
class PlannedBatch:
    """One ``generate`` call: ``rows[k] = (request index, sample index)`` of its row ``k``,
    ``prompts[k]`` that row's user message (before any chat template), ``seed`` in
    [0, 2**31) the torch seed of the whole batch (its first sample's)."""

    rows: tuple[tuple[int, int], ...]
    prompts: tuple[str, ...]
    seed: int


def plan_batches(requests: Sequence[TextRequest], batch_size: int) -> list[PlannedBatch]:
    """The requests' samples (request by request, sample ``j`` of ``0..n-1``) cut into
    batches of ``batch_size`` (>= 1) rows; a batch may hold samples of several requests.
    Pure: no model, no torch."""
    if batch_size < 1:
        raise ValueError(f"batch_size: {batch_size} must be >= 1")
    samples = [(i, j) for i, r in enumerate(requests) for j in range(r.n)]
    batches = []
    for lo in range(0, len(samples), batch_size):
        rows = tuple(samples[lo : lo + batch_size])
        i0, j0 = rows[0]
        batches.append(
            PlannedBatch(
                rows,
                tuple(requests[i].prompt for i, _ in rows),
                (requests[i0].seed + j0) % 2**31,
            )
        )
    return batches


def assemble(
    requests: Sequence[TextRequest], results: Iterable[tuple[PlannedBatch, list[Completion]]]
) -> Iterator[tuple[int, list[Completion]]]:
    """``(request index, its n completions)`` as :meth:`TransformersLM.stream` yields them:
    first the requests asking for none, then each request the moment the batch completing it
    arrives. ``results``: each planned batch with its completions (one per row), in the
    order of :func:`plan_batches`; it is read lazily, one batch per completed step."""
    got: dict[int, list[Completion]] = {i: [] for i in range(len(requests))}
    for i, r in enumerate(requests):
        if r.n == 0:
            yield i, got.pop(i)
    for batch, completions in results:
        if len(completions) != len(batch.rows):
            raise ValueError(f"{len(completions)} completions for a batch of {len(batch.rows)}")
        for (i, _), completion in zip(batch.rows, completions, strict=True):
            got[i].append(completion)
            if len(got[i]) == requests[i].n:
                yield i, got.pop(i)


class TransformersLM(HeldModel):
    """A causal LM with seeded, batched sampling (module docstring)."""

    backend = "transformers"

    def __init__(
        self,
        model: str,
        settings: SamplingSettings,
        *,
        device: str = "auto",
        batch_size: int = 16,
        dtype: str = "auto",
        source: str | None = None,
    ) -> None:
        """``model``: the spec's path or hub id, as recorded; ``source``: where to load it
        from when that is elsewhere (an engine worker gets the driver's absolute path)."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        LocalLMSettings(batch_size=batch_size, dtype=dtype, device=device)  # checked
        self.model_id = model
        self.name = f"{self.backend}:{model}"
        self.settings = settings
        self.batch_size = batch_size
        self.device = resolve_device(device)
        if dtype == "auto":
            dtype = "float16" if self.device.startswith("cuda") else "float32"
        self.dtype = dtype
        source = str(Path(source or model).expanduser())
        if not Path(source).exists():
            source = model
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            self.model = (
                AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype))
                .to(self.device)
                .eval()
            )
        except (OSError, ValueError, KeyError) as exc:
            raise ModelError(
                f"{printable(model)}: cannot load it as a causal language model "
                f"({type(exc).__name__}: {printable(str(exc).splitlines()[0] if str(exc) else '')})"
            ) from None
        tok = self.tokenizer
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"  # generation continues on the right
        self.chat = bool(getattr(tok, "chat_template", None))
        self.eos_ids = _eos_ids(self.model, tok)

    def prompt_text(self, prompt: str) -> str:
        """What the model reads for a user message."""
        if self.chat:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt + "\n"

    def stream(self, requests: Sequence[TextRequest]) -> Iterator[tuple[int, list[Completion]]]:
        batches = plan_batches(requests, self.batch_size)
        return assemble(requests, ((b, self.generate_batch(b)) for b in batches))

    def generate_batch(self, batch: PlannedBatch) -> list[Completion]:
        """One planned batch's completions, one per row, in row order."""
        return self._generate([self.prompt_text(p) for p in batch.prompts], batch.seed)

    def _generate(self, prompts: list[str], seed: int) -> list[Completion]:
        import torch

        s = self.settings
        enc = self.tokenizer(
            prompts, return_tensors="pt", padding=True, add_special_tokens=not self.chat
        )
        enc = {k: v.to(self.device) for k, v in enc.items()}
        torch.manual_seed(seed)  # generate() samples from the global generators (CUDA too)
        sample = s.temperature > 0
        options: dict[str, Any] = {"do_sample": sample, "max_new_tokens": s.max_tokens}
        if sample:
            options.update(temperature=s.temperature, top_p=s.top_p, top_k=0)
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            ids = self.model.generate(
                **enc, **options, pad_token_id=self.tokenizer.pad_token_id, num_beams=1
            )
        new = ids[:, enc["input_ids"].shape[1] :].cpu()
        prompt_tokens = enc["attention_mask"].sum(dim=1).tolist()
        out = []
        for row, n_prompt in zip(new.tolist(), prompt_tokens, strict=True):
            stop = next((k for k, t in enumerate(row) if t in self.eos_ids), None)
            kept = row if stop is None else row[: stop + 1]
            text = self.tokenizer.decode(kept, skip_special_tokens=True).strip()
            out.append(
                Completion(
                    text=text,
                    finish_reason="length" if stop is None else "stop",
                    completion_tokens=len(kept),
                    prompt_tokens=int(n_prompt),
                    seed=seed,
                )
            )
        return out

    def describe(self) -> dict[str, Any]:
        return model_description(
            self,
            "model",
            settings=self.settings.as_dict(),
            batch_size=self.batch_size,
            device=self.device,
            dtype=self.dtype,
        )


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """The end-of-sequence ids of the model's generation config and of the tokenizer."""
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return ids


def factory(model: str, settings: SamplingSettings, **options: Any) -> TransformersLM:
    """``transformers:<model>``: the factory the ``TEXT_GENERATORS`` registry names lazily."""
    return TransformersLM(model, settings, **known_options(TransformersLM, options))


# the backend's greedy instruction model (seq2seq or causal), for the roles that ask one thing
# per item: paraphrasing (corpus_audit.backends.paraphrasers), FairCritic's feedback writer
factory.instruction_model = InstructionLM  # type: ignore[attr-defined]
# what the backend declares: a local model drawing planned batches on the engine's workers
factory.traits = TextGeneratorTraits(local_model=True)  # type: ignore[attr-defined]
