"""Generation throughput: plain diffusers (float32, batch 1) vs corpus_audit's generator
(half precision, SDPA, channels-last, batched; optionally torch.compile), in one process on
the same random-weight pipeline (random weights: the same FLOPs as the trained model).

Reports seconds per image and images per second for each path, the speed-up over the plain
baseline and over the paper's reference (3.5 s/image on a TITAN RTX, METHODS 1.3), and checks
on the device that a seed gives the identical image twice and the same image in a batch.

The tokenizer files (CLIP BPE, from open_clip) are written to benchmarks/out/clip_tokenizer on
the first run; a GPU machine without open_clip needs that folder copied along.

Quick (CPU, tiny model, seconds):
    .venv/bin/python benchmarks/bench_generate.py --arch tiny --size 8
Real size (GPU; SD 1.5 architecture, 512x512, 50 steps):
    python benchmarks/bench_generate.py --arch sd15 --size 32 --batch 8,16,32 \\
        --dtypes float16,bfloat16 --baseline-images 3 --compile --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TOKENIZER = REPO / "benchmarks" / "out" / "clip_tokenizer"  # git-ignored; carry it to a GPU box
PAPER_S_PER_IMAGE = 3.5  # Seshadri et al.: SD on a TITAN RTX, 512x512, 50 steps

PROMPTS = [
    "A photo of the face of a nurse",
    "A portrait photo of an engineer",
    "A photo of a CEO smiling",
    "A photo of a librarian at work",
]


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def plain_diffusers(pipe, args, device: str, n: int) -> dict:
    """The baseline: the pipeline as diffusers ships it, float32, one image per call."""
    import torch

    kw = dict(num_inference_steps=args.steps, guidance_scale=7.5, height=args.height,
              width=args.width)  # fmt: skip
    pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    pipe(
        PROMPTS[0],
        generator=torch.Generator("cpu").manual_seed(0),
        **{**kw, "num_inference_steps": 2},
    )
    _sync(device)
    start = time.perf_counter()
    for i in range(n):
        pipe(PROMPTS[i % len(PROMPTS)], generator=torch.Generator("cpu").manual_seed(i), **kw)
    _sync(device)
    seconds = time.perf_counter() - start
    return {"path": "plain diffusers", "dtype": "float32", "batch": 1, "images": n,
            "seconds": seconds}  # fmt: skip


def ours(gen, args, batch: int, n: int, label: str) -> dict:
    """corpus_audit's generator at ``batch`` images per call; ``n`` images timed after warm-up."""
    from dataclasses import replace

    settings = gen.settings
    warm = time.perf_counter()
    gen.settings = replace(settings, steps=min(2, settings.steps))
    gen.generate([PROMPTS[i % len(PROMPTS)] for i in range(batch)], list(range(batch)))
    gen.settings = settings
    warm = time.perf_counter() - warm
    calls = max(1, math.ceil(n / batch))
    cuda = gen.device.startswith("cuda")
    if cuda:
        import torch

        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for c in range(calls):
        prompts = [PROMPTS[(c * batch + i) % len(PROMPTS)] for i in range(batch)]
        gen.generate(prompts, [1000 + c * batch + i for i in range(batch)])
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    return {"path": label, "dtype": gen.describe()["dtype"], "batch": batch,
            "images": calls * batch, "seconds": seconds, "warmup_s": round(warm, 2),
            "peak_gib": peak}  # fmt: skip


def flops_per_image(arch: str, tokenizer: str | None, steps: int, height: int, width: int) -> float:
    """Analytic FLOPs of one image (meta tensors, nothing computed): ``steps`` UNet calls on the
    classifier-free-guidance pair, VAE decode, text encoder (pair), safety-checker vision tower.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from corpus_audit.backends.fakes.diffusion import random_sd_pipeline

    pipe = random_sd_pipeline(arch, tokenizer_dir=tokenizer, safety_checker=True, device="meta")
    f = pipe.vae_scale_factor
    size = pipe.feature_extractor.crop_size["height"]
    with torch.device("meta"), torch.no_grad(), FlopCounterMode(display=False) as unet:
        pipe.unet(torch.randn(2, 4, height // f, width // f), torch.tensor([500, 500]),
                  encoder_hidden_states=torch.randn(2, 77, pipe.text_encoder.config.hidden_size))  # fmt: skip
    with torch.device("meta"), torch.no_grad(), FlopCounterMode(display=False) as rest:
        pipe.vae.decode(torch.randn(1, 4, height // f, width // f))
        pipe.text_encoder(torch.zeros(2, 77, dtype=torch.long))
        pipe.safety_checker.vision_model(torch.randn(1, 3, size, size))
    return float(steps * unet.get_total_flops() + rest.get_total_flops())


def checks(gen, batch: int) -> dict:
    """Same seed twice -> identical pixels; the same seed inside a batch -> max pixel difference."""
    import numpy as np

    a = gen.generate([PROMPTS[0]], [42])[0]
    b = gen.generate([PROMPTS[0]], [42])[0]
    mixed = gen.generate([PROMPTS[1]] * (batch - 1) + [PROMPTS[0]], list(range(batch - 1)) + [42])
    c = mixed[-1]
    again = gen.generate([PROMPTS[1]] * (batch - 1) + [PROMPTS[0]], list(range(batch - 1)) + [42])
    return {
        "same_seed_identical_b1": bool(np.array_equal(a.pixels, b.pixels)),
        "same_seed_identical_in_same_batch": bool(np.array_equal(c.pixels, again[-1].pixels)),
        "max_pixel_diff_b1_vs_batch": int(
            np.abs(a.pixels.astype(int) - c.pixels.astype(int)).max()
        ),
        "nsfw_flags_recorded": a.nsfw is not None,
    }


def _fmt(value: float | None) -> str:
    return f"{value:8.2f}" if value is not None else f"{'-':>8}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--arch", default="tiny", choices=["tiny", "sd15"])
    p.add_argument("--size", type=int, default=8, help="images per batched measurement")
    p.add_argument("--batch", default="4", help="comma-separated batch sizes for the batched path")
    p.add_argument("--dtypes", default="float16", help="comma-separated: float16,bfloat16")
    p.add_argument("--baseline-images", type=int, default=2, help="images for the plain fp32 run")
    p.add_argument("--b1-images", type=int, default=2, help="images for our batch-1 run")
    p.add_argument("--steps", type=int, default=None, help="default 50 (sd15) / 2 (tiny)")
    p.add_argument("--height", type=int, default=None, help="default 512 (sd15) / 32 (tiny)")
    p.add_argument("--width", type=int, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--compile", action="store_true", help="also time torch.compile(unet)")
    p.add_argument("--no-safety-checker", action="store_true")
    p.add_argument("--tokenizer", default=str(TOKENIZER),
                   help="dir with CLIP vocab.json/merges.txt (written from open_clip if missing)")  # fmt: skip
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)
    sd15 = args.arch == "sd15"
    args.steps = args.steps or (50 if sd15 else 2)
    args.height = args.height or (512 if sd15 else 32)
    args.width = args.width or args.height

    import torch

    from corpus_audit.backends.fakes.diffusion import random_sd_pipeline
    from corpus_audit.backends.generators import DiffusersGenerator, GenerationSettings
    from corpus_audit.core.devices import resolve_device
    from corpus_audit.core.versions import package_versions

    if not (Path(args.tokenizer) / "vocab.json").is_file():
        from corpus_audit.backends.fakes.diffusion import write_clip_tokenizer_files

        write_clip_tokenizer_files(args.tokenizer)  # needs open_clip's vocabulary file
    device = resolve_device(args.device)
    cuda = device.startswith("cuda")
    t0 = time.perf_counter()
    pipe = random_sd_pipeline(args.arch, tokenizer_dir=args.tokenizer,
                              safety_checker=not args.no_safety_checker,
                              device=device if cuda else None)  # fmt: skip
    build_s = time.perf_counter() - t0
    results = [plain_diffusers(pipe, args, device, args.baseline_images)]
    checker = pipe.safety_checker
    dtypes = [d for d in args.dtypes.split(",") if d] if cuda else ["float32"]
    batches = [int(b) for b in args.batch.split(",") if b]
    check = {}
    for dtype in dtypes:
        pipe.safety_checker = checker  # DiffusersGenerator detaches it to run it itself
        settings = GenerationSettings(steps=args.steps, height=args.height, width=args.width,
                                      device=device, dtype=dtype)  # fmt: skip
        gen = DiffusersGenerator.from_pipeline(pipe, f"random-{args.arch}", settings)
        checker = gen.safety_checker
        if dtype == dtypes[0]:
            results.append(ours(gen, args, 1, args.b1_images, "corpus_audit batch 1"))
        for b in batches:
            results.append(ours(gen, args, b, args.size, "corpus_audit batched"))
        if dtype == dtypes[0]:
            check = checks(gen, min(4, max(batches)))
    if args.compile and cuda:
        pipe.safety_checker = checker
        settings = GenerationSettings(steps=args.steps, height=args.height, width=args.width,
                                      device=device, dtype=dtypes[0], compile=True)  # fmt: skip
        gen = DiffusersGenerator.from_pipeline(pipe, f"random-{args.arch}", settings)
        b = max(batches)
        results.append(ours(gen, args, b, args.size, "corpus_audit batched + compile"))

    flops = flops_per_image(args.arch, args.tokenizer, args.steps, args.height, args.width)
    base = results[0]["seconds"] / results[0]["images"]
    for r in results:
        r["tflops_per_s"] = flops / 1e12 * r["images"] / r["seconds"]
        r["s_per_image"] = r["seconds"] / r["images"]
        r["images_per_s"] = r["images"] / r["seconds"]
        r["speedup_vs_plain"] = base / r["s_per_image"]
        # the paper's 3.5 s/image is only comparable for the real architecture and settings
        comparable = args.arch == "sd15" and args.steps == 50 and args.height == args.width == 512
        r["speedup_vs_paper"] = PAPER_S_PER_IMAGE / r["s_per_image"] if comparable else None
    env = {
        "arch": args.arch, "steps": args.steps, "size": f"{args.width}x{args.height}",
        "guidance_scale": 7.5, "device": device,
        "gpu": torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu",
        "build_s": round(build_s, 1), "safety_checker": not args.no_safety_checker,
        "tflop_per_image": float(f"{flops / 1e12:.4g}"),
        "versions": package_versions("torch", "diffusers", "transformers"),
    }  # fmt: skip
    print(json.dumps(env))
    print(f"{'path':32} {'dtype':9} {'batch':>5} {'images':>6} {'s/image':>8} {'img/s':>7} "
          f"{'x plain':>8} {'x paper':>8} {'TFLOP/s':>8}")  # fmt: skip
    for r in results:
        print(f"{r['path']:32} {r['dtype']:9} {r['batch']:5d} {r['images']:6d} "
              f"{r['s_per_image']:8.3f} {r['images_per_s']:7.2f} {r['speedup_vs_plain']:8.2f} "
              f"{_fmt(r['speedup_vs_paper'])} {r['tflops_per_s']:8.2f}")  # fmt: skip
    print("checks:", json.dumps(check))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"env": env, "results": results, "checks": check}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
