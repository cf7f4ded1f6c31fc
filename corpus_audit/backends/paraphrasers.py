"""Caption paraphrasers (METHODS 1.5 "paraphrased captions"): one protocol, a registry, a
transformers backend.

Each caption of a training subset is rewritten by a language model with the published
instruction (:data:`INSTRUCTION`, Seshadri et al.) at temperature 0, i.e. greedy decoding, so
a paraphrase is a deterministic function of (model, caption, occupation). The generate stage
stores it in the ``paraphrases`` table next to its caption, with ``contains_occupation`` telling
whether the model kept the occupation word it was told to keep, and then uses it as a prompt.

Backends are registered by name in :data:`PARAPHRASERS`; the config value ``generate.paraphraser``
is ``"<backend>:<model>"`` or a plain model (transformers): a local directory or a hub id of a
text-to-text model (T5/FLAN-T5/BART: ``AutoModelForSeq2SeqLM``) or a causal LM
(``AutoModelForCausalLM``; its chat template is used when the tokenizer has one).

Heavy libraries (torch, transformers) are imported inside functions only.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from corpus_audit.backends.generators import load_error, package_versions, resolve_device
from corpus_audit.core.devices import release_memory
from corpus_audit.core.registry import Registry
from corpus_audit.core.specs import split_spec
from corpus_audit.methods.answers import clean_output

# The instruction of Seshadri, Singh & Elazar (METHODS 1.5), verbatim; [OCCUPATION] and
# [CAPTION] become {occupation} and {caption}.
INSTRUCTION = (
    "Please paraphrase the phrase/sentence below. You can change words without changing the "
    "original meaning or intent. You must include the word {occupation}. "
    "Phrase/Sentence: {caption}"
)


def instruction(caption: str, occupation: str) -> str:
    """The published instruction for one caption and the occupation word it must keep."""
    return INSTRUCTION.format(occupation=occupation, caption=caption)


def keeps_occupation(text: str, forms: Iterable[str]) -> bool:
    """Whether ``text`` names the occupation: any surface form as a whole word, any case.

    ``forms`` are the lexicon's lower-case forms (singular, plural, synonyms, hyphen/space
    variants), e.g. ``("nurse", "nurses")``.
    """
    low = " ".join(text.lower().split())
    for form in forms:
        f = " ".join(form.lower().split())
        if f and re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", low):
            return True
    return False


class Paraphraser(Protocol):
    """What the generate stage needs from a paraphrasing backend."""

    name: str  # recorded in paraphrases.paraphraser: "<backend>:<model>"

    def paraphrase(self, items: Sequence[tuple[str, str]]) -> list[str]:
        """One paraphrase per (caption, occupation word), in order; deterministic."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance: backend, model class, decoding settings, library versions."""
        ...

    def close(self) -> None: ...


ParaphraserFactory = Callable[..., Paraphraser]
# backend name -> factory; the prefix of a "<backend>:<model>" spec in generate.paraphraser
PARAPHRASERS: Registry[ParaphraserFactory] = Registry("paraphraser")


def register_paraphraser(name: str, factory: ParaphraserFactory) -> None:
    """Register a backend: ``factory(model, *, device, max_new_tokens, batch_size)``."""
    PARAPHRASERS.register(name, factory)


def load_paraphraser(
    spec: str, *, device: str = "auto", max_new_tokens: int = 77, batch_size: int = 16
) -> Paraphraser:
    """The paraphraser for ``generate.paraphraser``; raises :class:`ModelError` if unloadable."""
    backend, model = split_spec(spec, PARAPHRASERS, "transformers")
    return PARAPHRASERS.get(backend)(
        model, device=device, max_new_tokens=max_new_tokens, batch_size=batch_size
    )


class TransformersParaphraser:
    """A local or hub transformers LM, greedy decoding (temperature 0), batched.

    ``max_new_tokens`` caps the answer length (>= 1); ``batch_size`` captions per forward
    pass (>= 1). Encoder-decoder models read the instruction; causal LMs read it through the
    tokenizer's chat template when there is one, else as plain text followed by a newline,
    and only the newly generated tokens are decoded.
    """

    backend = "transformers"

    def __init__(
        self,
        model_id: str,
        *,
        device: str = "auto",
        max_new_tokens: int = 77,
        batch_size: int = 16,
    ):
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForSeq2SeqLM,
            AutoTokenizer,
        )

        if max_new_tokens < 1 or batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be >= 1")
        self.model_id = model_id
        self.name = f"{self.backend}:{model_id}"
        self.device = resolve_device(device)
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        source = str(Path(model_id).expanduser())
        if not Path(source).exists():
            source = model_id
        try:
            config = AutoConfig.from_pretrained(source)
            self.tokenizer = AutoTokenizer.from_pretrained(source)
            self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
            cls = AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM
            self.model = cls.from_pretrained(source).to(self.device).eval()
        except (OSError, ValueError, KeyError) as exc:
            raise load_error(model_id, "paraphrasing language model", exc) from None
        tok = self.tokenizer
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        if not self.seq2seq:
            tok.padding_side = "left"  # generation continues on the right
        self.chat = bool(getattr(tok, "chat_template", None)) and not self.seq2seq

    def _instructions(self, items: Sequence[tuple[str, str]]) -> list[str]:
        """The instruction the model reads for each item (subclasses may ask other things)."""
        return [instruction(caption, occupation) for caption, occupation in items]

    def _inputs(self, items: Sequence[tuple[str, str]]) -> list[str]:
        texts = self._instructions(items)
        if self.chat:
            return [
                self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
                )
                for t in texts
            ]
        return texts if self.seq2seq else [t + "\n" for t in texts]

    def paraphrase(self, items: Sequence[tuple[str, str]]) -> list[str]:
        import torch

        out: list[str] = []
        for start in range(0, len(items), self.batch_size):
            batch = self._inputs(items[start : start + self.batch_size])
            enc = self.tokenizer(batch, return_tensors="pt", padding=True, truncation=True)
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # sampling knobs unused by greedy
                ids = self.model.generate(
                    **enc,
                    do_sample=False,  # temperature 0
                    num_beams=1,
                    max_new_tokens=self.max_new_tokens,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            if not self.seq2seq:
                ids = ids[:, enc["input_ids"].shape[1] :]
            decoded = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
            out.extend(clean_output(t) for t in decoded)
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "model_id": self.model_id,
            "model_class": type(self.model).__name__,
            "tokenizer_class": type(self.tokenizer).__name__,
            "chat_template": self.chat,
            "decoding": "greedy (temperature 0)",
            "max_new_tokens": self.max_new_tokens,
            "batch_size": self.batch_size,
            "device": self.device,
            "instruction": INSTRUCTION,
            "versions": package_versions("transformers", "torch"),
        }

    def close(self) -> None:
        self.model = None
        release_memory()


register_paraphraser("transformers", TransformersParaphraser)


def transformers_completer(
    model: str, *, device: str = "auto", max_new_tokens: int = 60
) -> Callable[[str], str]:
    """``complete(instruction) -> answer`` with a local transformers LM (greedy decoding;
    the chat template when the tokenizer has one), through :class:`TransformersParaphraser`:
    FairCritic's language-model feedback writer
    (:class:`corpus_audit.methods.pst.critic.LMFeedback`) asks it for guidelines."""

    class _InstructionLM(TransformersParaphraser):
        def _instructions(self, items: Sequence[tuple[str, str]]) -> list[str]:
            return [text for text, _ in items]

    lm = _InstructionLM(model, device=device, max_new_tokens=max_new_tokens, batch_size=1)

    def complete(instruction: str) -> str:
        return lm.paraphrase([(instruction, "")])[0]

    return complete
