"""A tiny random-weight language model for the paraphrasing plumbing (tests, offline demos).

:func:`random_paraphraser_model` saves a ``t5`` (seq2seq) or ``gpt2`` (causal) model with the
real CLIP tokenizer in the ``save_pretrained`` layout that
:class:`corpus_audit.backends.text_generators.instruction_lm.InstructionLM` loads (the
``transformers`` text generator's paraphrasing model). No stage imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corpus_audit.backends.fakes.diffusion import offline_clip_tokenizer


def random_paraphraser_model(
    out_dir: Path | str, arch: str = "t5", *, tokenizer_dir: Path | str | None = None, seed: int = 0
) -> Path:
    """Save a tiny random-weight LM (``t5`` seq2seq or ``gpt2`` causal) with the CLIP tokenizer.

    For tests and offline demos of the paraphrasing plumbing only: greedy decoding makes its
    output deterministic, but the text is gibberish (it will not keep the occupation word).
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

    out = Path(out_dir)
    tok = offline_clip_tokenizer(tokenizer_dir)
    torch.manual_seed(seed)
    ids = dict(pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    if arch == "t5":
        config = T5Config(
            vocab_size=len(tok), d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4,
            decoder_start_token_id=tok.pad_token_id, **ids,
        )  # fmt: skip
        model = T5ForConditionalGeneration(config)
    elif arch == "gpt2":
        config = GPT2Config(
            vocab_size=len(tok), n_positions=256, n_embd=32, n_layer=2, n_head=4,
            bos_token_id=tok.bos_token_id, **ids,
        )  # fmt: skip
        model = GPT2LMHeadModel(config)
    else:
        raise ValueError(f"arch: {arch!r} is not t5 or gpt2")
    return save_with_tokenizer(out, model, tok)


def save_with_tokenizer(out: Path, model: Any, tokenizer: Any) -> Path:
    """``model`` and ``tokenizer`` saved together into ``out`` (the ``save_pretrained`` layout
    ``from_pretrained`` loads); returns ``out``."""
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
