"""A tiny random-weight causal LM for the text-generator plumbing (tests, benchmarks).

:func:`random_causal_lm` saves a ``llama`` or ``gpt2`` model with the real CLIP BPE tokenizer
(built offline, as :mod:`corpus_audit.backends.fakes.paraphrasers` does) in the ``save_pretrained``
layout :class:`corpus_audit.backends.text_generators.transformers_lm.TransformersLM` loads; with
``chat_template`` the tokenizer carries a small chat template, so the chat path is exercised.
The text is gibberish. No stage imports this module.
"""

from __future__ import annotations

from pathlib import Path

from corpus_audit.backends.fakes.diffusion import offline_clip_tokenizer
from corpus_audit.backends.fakes.paraphrasers import save_with_tokenizer

CHAT_TEMPLATE = (
    "{% for m in messages %}<|startoftext|>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def random_causal_lm(
    out_dir: Path | str,
    arch: str = "llama",
    *,
    chat_template: bool = True,
    hidden: int = 32,
    layers: int = 2,
    seed: int = 0,
) -> Path:
    """Save a tiny random-weight causal LM (``llama`` or ``gpt2``) with the CLIP tokenizer."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    tok = offline_clip_tokenizer()
    if chat_template:
        tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    ids = dict(
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id
    )
    if arch == "llama":
        config = LlamaConfig(
            vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
            num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=1024, **ids,
        )  # fmt: skip
        model = LlamaForCausalLM(config)
    elif arch == "gpt2":
        config = GPT2Config(
            vocab_size=len(tok), n_positions=1024, n_embd=hidden, n_layer=layers, n_head=4, **ids
        )
        model = GPT2LMHeadModel(config)
    else:
        raise ValueError(f"arch: {arch!r} is not llama or gpt2")
    return save_with_tokenizer(out, model, tok)
