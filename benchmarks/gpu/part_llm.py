"""Part ``llm``: the local text generator on a ~1.1 B Llama model, random weights.

TinyLlama-1.1B's architecture (``configs/tinyllama.json``: 22 layers, hidden 2048, grouped
query attention 32/4 heads, vocabulary 32,000) with random weights saved to a temporary
directory in float16, and a WordPiece tokenizer made from the MiniLM vocabulary (30,522 ids,
all inside the model's vocabulary; the Llama tokenizer is not on the machine: the tokenizer
changes how many tokens a prompt has, not the time per token). Run through
:class:`corpus_audit.backends.text_generators.transformers_lm.TransformersLM`, sampling at
temperature 1: new tokens per second batched vs one prompt per call.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from common import CONFIGS, Context, best_of, free, log, peak_gib, rate, reset_peak

OCCUPATIONS = ["nurse", "engineer", "CEO", "librarian", "carpenter", "teacher", "pilot", "chef"]
FULL = {"layers": None, "max_tokens": 128, "batches": [16, 64], "requests": 64, "single": 4}
DRY = {"layers": 1, "hidden": 64, "max_tokens": 4, "batches": [4], "requests": 4, "single": 2}


def model_dir(folder: Path, cfg: dict[str, Any], device: str) -> Path:
    """Random-weight LlamaForCausalLM (seed 0) and its tokenizer, saved under ``folder``."""
    import torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaForCausalLM

    data = json.loads((CONFIGS / "tinyllama.json").read_text(encoding="utf-8"))
    if cfg["layers"]:  # dry run: a tiny model of the same family
        data.update(
            num_hidden_layers=cfg["layers"],
            hidden_size=cfg["hidden"],
            intermediate_size=2 * cfg["hidden"],
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    config = LlamaConfig(**data)
    torch.manual_seed(0)
    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    del model
    tok = BertTokenizerFast(
        str(CONFIGS / "minilm" / "vocab.txt"),
        do_lower_case=True,
        model_input_names=["input_ids", "attention_mask"],  # a causal LM takes no token types
    )
    tok.save_pretrained(folder)
    return folder


def generate_all(lm: Any, requests: list[Any]) -> tuple[int, float]:
    """(new tokens, mean completion tokens) of generating every request."""
    n = 0
    count = 0
    for _, completions in lm.stream(requests):
        n += sum(c.completion_tokens for c in completions)
        count += len(completions)
    return n, n / max(1, count)


def run(ctx: Context) -> None:
    from corpus_audit.backends.text_generators.base import SamplingSettings, TextRequest
    from corpus_audit.backends.text_generators.transformers_lm import TransformersLM

    cfg = DRY if ctx.dry else FULL
    ctx.step("config", cfg)
    settings = SamplingSettings(temperature=1.0, top_p=1.0, max_tokens=cfg["max_tokens"])
    prompts = [f"Write a short story about a {o}." for o in OCCUPATIONS]
    with tempfile.TemporaryDirectory() as tmp:
        folder = model_dir(Path(tmp) / "llama-random", cfg, ctx.device)
        rows = []
        for batch in [1, *cfg["batches"]]:
            lm = TransformersLM(str(folder), settings, device=ctx.device, batch_size=batch)
            n_req = cfg["single"] if batch == 1 else cfg["requests"]
            reqs = [TextRequest(prompts[i % len(prompts)], 1, i) for i in range(n_req)]
            list(lm.stream(reqs[: min(batch, 2)]))  # warm-up
            reset_peak(ctx.device)
            seconds, (tokens, mean) = best_of(
                ctx.device, 1, lambda lm=lm, r=reqs: generate_all(lm, r)
            )
            rows.append(
                {
                    "batch": batch,
                    "requests": n_req,
                    "new_tokens": tokens,
                    "mean_completion_tokens": round(mean, 1),
                    "tokens_per_s": rate(tokens, seconds),
                    "seconds": round(seconds, 3),
                    "dtype": lm.dtype,
                    "peak_gib": peak_gib(ctx.device),
                }
            )
            ctx.step("rows", rows)
            lm.close()
            free(ctx.device)
    one = rows[0]["tokens_per_s"]
    best = max(rows, key=lambda r: r["tokens_per_s"])
    ctx.step(
        "summary",
        {
            "one_prompt_tokens_per_s": one,
            "best_batch": best["batch"],
            "best_tokens_per_s": best["tokens_per_s"],
            "speedup": round(best["tokens_per_s"] / max(one, 1e-9), 2),
        },
    )
    log(f"llm: {one} tokens/s one prompt, {best['tokens_per_s']} at batch {best['batch']}")
