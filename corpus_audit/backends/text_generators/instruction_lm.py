"""The ``transformers`` text generator's greedy instruction model: one answer per instruction,
decoded at temperature 0, so an answer is a deterministic function of (model, instruction).

What the roles that ask a local model one thing per item use (the paraphrase role,
:mod:`corpus_audit.backends.paraphrasers`; FairCritic's language-model feedback writer): a
local directory or a hub id of a text-to-text model (T5/FLAN-T5/BART:
``AutoModelForSeq2SeqLM``) or a causal LM (``AutoModelForCausalLM``; its chat template is used
when the tokenizer has one, else the instruction is followed by a newline, and only the new
tokens are decoded). The ``transformers`` backend offers it as its ``instruction_model``
(:mod:`corpus_audit.backends.text_generators.transformers_lm`); the sampled texts of the
``llm_texts`` stage are :class:`~.transformers_lm.TransformersLM`'s.

Heavy libraries (torch, transformers) are imported inside functions only.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus_audit.backends.generators import load_error, resolve_device
from corpus_audit.backends.text_generators.base import model_description
from corpus_audit.core.devices import HeldModel
from corpus_audit.methods.answers import clean_output


class InstructionLM(HeldModel):
    """A local or hub transformers LM, greedy decoding (temperature 0), batched.

    ``max_new_tokens`` caps the answer length (>= 1); ``batch_size`` instructions per forward
    pass (>= 1). Encoder-decoder models read the instruction; causal LMs read it through the
    tokenizer's chat template when there is one, else as plain text followed by a newline.
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

    def _inputs(self, texts: Sequence[str]) -> list[str]:
        if self.chat:
            return [
                self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
                )
                for t in texts
            ]
        return list(texts) if self.seq2seq else [t + "\n" for t in texts]

    def complete(self, instructions: Sequence[str]) -> list[str]:
        """One answer per instruction, in order (:func:`clean_output`: its first line)."""
        import torch

        out: list[str] = []
        for start in range(0, len(instructions), self.batch_size):
            batch = self._inputs(instructions[start : start + self.batch_size])
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
        return model_description(
            self,
            "model_id",
            decoding="greedy (temperature 0)",
            max_new_tokens=self.max_new_tokens,
            batch_size=self.batch_size,
            device=self.device,
        )
