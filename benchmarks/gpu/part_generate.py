"""Part ``generate``: Stable Diffusion 1.5 architecture, random weights, 512x512, 50 steps.

The pipeline is built from the committed configs (``configs/sd15``: UNet, VAE, CLIP text
encoder, safety checker, scheduler of runwayml/stable-diffusion-v1-5) with the real CLIP BPE
tokenizer written from open_clip's vocabulary; random weights cost the same time as trained
ones. Steps, in one process on one GPU:

1. ``plain``: the pipeline as diffusers ships it, float32, one image per call (the baseline);
2. ``ours``: :class:`corpus_audit.backends.generators.DiffusersGenerator` (float16, SDPA,
   channels-last, safety checker run by corpus_audit) at each batch size of the sweep, then
   bfloat16 and torch.compile at the largest batch;
3. ``checks``: the same (prompt, seed) twice gives bit-identical pixels, also inside a batch;
4. ``plan``: GPU-hours of the paper's plan (248,000 images) at the best rate.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import replace
from typing import Any

from common import (
    CONFIGS,
    GOALS,
    PAPER_S_PER_IMAGE,
    PLAN_IMAGES,
    Context,
    free,
    log,
    peak_gib,
    rate,
    reset_peak,
    timer,
)

PROMPTS = [
    "A photo of the face of a nurse",
    "A portrait photo of an engineer",
    "A photo of a CEO smiling",
    "A photo of a librarian at work",
]

FULL = {
    "arch": "sd15",
    "size": 512,
    "steps": 50,
    "plain_images": 3,
    "batches": [1, 4, 8, 16],
    "images": 8,
    "compile_batch": 8,
}
DRY = {
    "arch": "sd_tiny",
    "size": 32,
    "steps": 2,
    "plain_images": 1,
    "batches": [1, 2],
    "images": 2,
    "compile_batch": 2,
}


def _config(arch: str, name: str) -> dict[str, Any]:
    data = json.loads((CONFIGS / arch / f"{name}.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


def build_components(arch: str, device: str) -> dict[str, Any]:
    """The pipeline's modules, random weights (seed 0), created directly on ``device``."""
    import diffusers
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from diffusers.pipelines.stable_diffusion.safety_checker import StableDiffusionSafetyChecker
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPTextConfig, CLIPTextModel

    from corpus_audit.backends.fakes.diffusion import clip_tokenizer, write_clip_tokenizer_files

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = clip_tokenizer(write_clip_tokenizer_files(tmp))
    sched_cfg = _config(arch, "scheduler")
    scheduler = diffusers.PNDMScheduler.from_config(sched_cfg)
    with torch.device(device):
        unet = UNet2DConditionModel.from_config(_config(arch, "unet"))
        vae = AutoencoderKL.from_config(_config(arch, "vae"))
        text_encoder = CLIPTextModel(CLIPTextConfig(**_config(arch, "text_encoder")))
        checker = StableDiffusionSafetyChecker(CLIPConfig(**_config(arch, "safety_checker")))
    extractor = CLIPImageProcessor(**_config(arch, "feature_extractor"))
    for module in (unet, vae, text_encoder, checker):
        module.eval()
    return {
        "unet": unet,
        "vae": vae,
        "text_encoder": text_encoder,
        "tokenizer": tokenizer,
        "scheduler": scheduler,
        "safety_checker": checker,
        "feature_extractor": extractor,
    }


def pipeline(components: dict[str, Any]) -> Any:
    """A fresh pipeline object around the shared modules (corpus_audit's generator takes the
    safety checker out of the pipeline it wraps, so each path gets its own)."""
    from diffusers import StableDiffusionPipeline

    return StableDiffusionPipeline(**components, requires_safety_checker=True)


def plain(ctx: Context, components: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """The baseline: diffusers' own pipeline call, float32, batch 1."""
    import torch

    pipe = pipeline(components).to(ctx.device, torch.float32)
    pipe.set_progress_bar_config(disable=True)
    kw = {
        "num_inference_steps": cfg["steps"],
        "guidance_scale": 7.5,
        "height": cfg["size"],
        "width": cfg["size"],
    }
    pipe(
        PROMPTS[0],
        generator=torch.Generator("cpu").manual_seed(0),
        **{**kw, "num_inference_steps": 2},
    )
    n = cfg["plain_images"]
    reset_peak(ctx.device)
    with torch.inference_mode(), timer(ctx.device) as t:
        for i in range(n):
            pipe(PROMPTS[i % 4], generator=torch.Generator("cpu").manual_seed(i), **kw)
    return {
        "path": "plain diffusers",
        "dtype": "float32",
        "batch": 1,
        "images": n,
        "seconds": round(t["s"], 3),
        "s_per_image": round(t["s"] / n, 4),
        "images_per_s": rate(n, t["s"]),
        "peak_gib": peak_gib(ctx.device),
    }


def ours(ctx: Context, gen: Any, batch: int, images: int) -> dict[str, Any]:
    """corpus_audit's generator at ``batch`` images per call, ``images`` rounded up to calls."""
    settings = gen.settings
    warm = time.perf_counter()
    gen.settings = replace(settings, steps=min(2, settings.steps))
    gen.generate([PROMPTS[i % 4] for i in range(batch)], list(range(batch)))
    gen.settings = settings
    warm = time.perf_counter() - warm
    calls = max(1, -(-images // batch))
    reset_peak(ctx.device)
    with timer(ctx.device) as t:
        for c in range(calls):
            gen.generate(
                [PROMPTS[(c * batch + i) % 4] for i in range(batch)],
                [1000 + c * batch + i for i in range(batch)],
            )
    n = calls * batch
    info = gen.describe()
    return {
        "path": "corpus_audit",
        "dtype": info["dtype"],
        "batch": batch,
        "images": n,
        "compiled": info["compiled"],
        "channels_last": info["channels_last"],
        "attention": info["attention"],
        "warmup_s": round(warm, 2),
        "seconds": round(t["s"], 3),
        "s_per_image": round(t["s"] / n, 4),
        "images_per_s": rate(n, t["s"]),
        "peak_gib": peak_gib(ctx.device),
    }


def checks(gen: Any, batch: int) -> dict[str, Any]:
    """Same (prompt, seed) twice -> identical pixels, alone and at the same place in a batch;
    and how far the batch's image is from the batch-1 image (other kernels)."""
    import numpy as np

    a = gen.generate([PROMPTS[0]], [42])[0]
    b = gen.generate([PROMPTS[0]], [42])[0]
    prompts = [PROMPTS[1]] * (batch - 1) + [PROMPTS[0]]
    seeds = list(range(batch - 1)) + [42]
    c = gen.generate(prompts, seeds)
    d = gen.generate(prompts, seeds)
    same_batch = all(np.array_equal(x.pixels, y.pixels) for x, y in zip(c, d, strict=True))
    return {
        "same_seed_bit_identical_batch1": bool(np.array_equal(a.pixels, b.pixels)),
        "same_seeds_bit_identical_batch": bool(same_batch),
        "batch": batch,
        "max_pixel_diff_batch1_vs_batch": int(
            np.abs(a.pixels.astype(int) - c[-1].pixels.astype(int)).max()
        ),
        "nsfw_flag_recorded": a.nsfw is not None,
    }


def run(ctx: Context) -> None:
    from corpus_audit.backends.generators import DiffusersGenerator, GenerationSettings

    cfg = DRY if ctx.dry else FULL
    ctx.step("config", dict(cfg, guidance_scale=7.5, scheduler="PNDMScheduler"))
    with timer(ctx.device) as t:
        components = build_components(cfg["arch"], ctx.device)
    ctx.step("build_s", round(t["s"], 2))
    rows = [ctx.step("plain", plain(ctx, components, cfg))]
    free(ctx.device)

    def settings(dtype: str, compile_: bool = False) -> GenerationSettings:
        return GenerationSettings(
            steps=cfg["steps"],
            height=cfg["size"],
            width=cfg["size"],
            device=ctx.device,
            dtype=dtype,
            compile=compile_,
        )

    half = "float16" if ctx.device.startswith("cuda") else "float32"
    gen = DiffusersGenerator.from_pipeline(pipeline(components), "sd15-random", settings(half))
    sweep = []
    for batch in cfg["batches"]:
        sweep.append(ours(ctx, gen, batch, max(batch, cfg["images"])))
        ctx.step("sweep", sweep)
    rows += sweep
    ctx.step("checks", checks(gen, cfg["batches"][-1]))
    gen.close()
    free(ctx.device)

    def variant(dtype: str, compile_: bool, batch: int) -> dict[str, Any]:
        gen = DiffusersGenerator.from_pipeline(
            pipeline(components), "sd15-random", settings(dtype, compile_)
        )
        try:
            return ours(ctx, gen, batch, max(batch, cfg["images"]))
        finally:
            gen.close()
            free(ctx.device)

    # optional steps: a failure is recorded and the part goes on (the dry run takes the same
    # path; corpus_audit compiles on CUDA only)
    big = cfg["batches"][-1]
    rows.append(ctx.optional("bfloat16", lambda: variant("bfloat16", False, big)))
    rows.append(ctx.optional("compiled", lambda: variant(half, True, cfg["compile_batch"])))
    rows = [r for r in rows if r is not None]
    best = min(rows, key=lambda r: r["s_per_image"])
    base = rows[0]["s_per_image"]
    ctx.step(
        "summary",
        {
            "best": {k: best[k] for k in ("path", "dtype", "batch", "compiled") if k in best},
            "best_s_per_image": best["s_per_image"],
            "best_images_per_s": best["images_per_s"],
            "plain_s_per_image": base,
            "speedup_over_plain": round(base / best["s_per_image"], 2),
            "plan_images": PLAN_IMAGES,
            "plan_gpu_hours": round(PLAN_IMAGES * best["s_per_image"] / 3600, 1),
            "plan_gpu_hours_plain": round(PLAN_IMAGES * base / 3600, 1),
            "plan_gpu_hours_paper_rate": round(PLAN_IMAGES * PAPER_S_PER_IMAGE / 3600, 1),
            "goal_s_per_image": GOALS["generate_s_per_image_max"],
            "goal_met": None
            if ctx.dry
            else best["s_per_image"] <= GOALS["generate_s_per_image_max"],
        },
    )
    log(f"generate: best {best['s_per_image']} s/image ({best['path']} batch {best['batch']})")
