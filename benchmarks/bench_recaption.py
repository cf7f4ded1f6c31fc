"""Benchmark: captions/s of the recaption driver, batched, next to one image per call.

Usage::

    python benchmarks/bench_recaption.py [--n 128] [--batch-size 16] [--max-new-tokens 20]
        [--model PATH] [--device auto] [--dtype auto] [--decode-threads 2] [--threads 0]
        [--json OUT.json]

Images: ``--n`` files in a temporary folder, cycled from real photos shipped in PyPI packages
(as ``bench_label.py`` makes them: astronaut, cameraman, Grace Hopper, LFW crops, a
two-person collage; JPEG and PNG), so decoding is real. Model: ``--model`` (a local
captioning model directory or a cached hub id), default a tiny random-weight BLIP built offline
(:func:`corpus_audit.backends.fakes.captioners.tiny_blip`; 32 px input, 2 layers: the numbers then
measure the driver, decoding and transformers' generate loop more than the network).

Side by side, same process, same model, both warmed up first:

- ``batched``: :func:`corpus_audit.stages.recaption.driver.recaption` with ``--batch-size`` images per
  sink call and per ``generate``, images decoded in ``--decode-threads`` threads while the
  model works on the previous batch;
- ``one_per_call`` (the simple baseline): a loop that decodes one image, captions it alone and
  hands its row to the sink.

Both write to an in-memory sink; ``identical`` says whether both gave the same captions
(expected on CPU in float32). ``--threads`` sets torch's intra-op threads: on a CPU shared with
other jobs, torch's default (one per core) can be ten times slower on the tiny model's small
operations than one thread (measured here: 1.7 s vs 0.1 s per image), so compare runs made
with the same setting. The CPUs here are shared while others work; rerun for numbers you
report.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def run_batched(captioner, paths: list[Path], batch_size: int, threads: int) -> tuple[float, list]:
    from corpus_audit.backends.captioners import CaptionInput
    from corpus_audit.stages.recaption.driver import recaption

    frames = []
    items = [CaptionInput(p.name, p) for p in paths]
    start = time.perf_counter()
    recaption(captioner, items, sink=frames.append, batch_size=batch_size, decode_threads=threads)
    seconds = time.perf_counter() - start
    return seconds, [c for f in frames for c in f["caption"].tolist()]


def run_one_per_call(captioner, paths: list[Path]) -> tuple[float, list]:
    """The simple loop: decode one image, caption it alone, hand its row to the sink."""
    from corpus_audit.backends.captioners import CaptionInput
    from corpus_audit.core.imagefile import read_rgb

    rows = []
    start = time.perf_counter()
    for path in paths:
        image = read_rgb(path)
        (caption,) = captioner.caption([CaptionInput(path.name, image)])
        rows.append({"image_id": path.name, "caption": caption})
    seconds = time.perf_counter() - start
    return seconds, [r["caption"] for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=128, help="images")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=20)
    ap.add_argument("--model", default="", help="captioning model (default: a tiny BLIP)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--decode-threads", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", type=Path, help="write the numbers here as JSON")
    args = ap.parse_args(argv)

    import torch
    from bench_label import make_images

    if args.threads > 0:
        torch.set_num_threads(args.threads)

    from corpus_audit.backends.captioners import CaptionSettings, load_captioner
    from corpus_audit.backends.fakes.captioners import tiny_blip

    with tempfile.TemporaryDirectory(prefix="bench_recaption_") as tmp:
        folder = Path(tmp) / "images"
        folder.mkdir()
        paths = make_images(folder, args.n)
        model = args.model or str(tiny_blip(Path(tmp) / "tiny-blip"))
        settings = CaptionSettings(
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
            device=args.device,
            dtype=args.dtype,
        )
        start = time.perf_counter()
        captioner = load_captioner(model, settings)
        load_seconds = time.perf_counter() - start
        warm = paths[: min(len(paths), args.batch_size)]
        run_batched(captioner, warm, args.batch_size, args.decode_threads)  # warm-up
        run_one_per_call(captioner, warm[:2])
        batched_s, batched = run_batched(captioner, paths, args.batch_size, args.decode_threads)
        single_s, single = run_one_per_call(captioner, paths)
    info = captioner.describe()
    out = {
        "images": args.n,
        "model": args.model or "tiny-blip (random weights, 32 px, 2 layers)",
        "model_class": info["model_class"],
        "device": info["device"],
        "dtype": info["dtype"],
        "max_new_tokens": args.max_new_tokens,
        "batch_size": args.batch_size,
        "decode_threads": args.decode_threads,
        "load_seconds": round(load_seconds, 3),
        "batched": {"seconds": round(batched_s, 3), "captions_per_s": round(args.n / batched_s, 1)},
        "one_per_call": {
            "seconds": round(single_s, 3),
            "captions_per_s": round(args.n / single_s, 1),
        },
        "ratio": round(single_s / batched_s, 2),
        "identical": batched == single,
        "torch_threads": torch.get_num_threads(),
        "cpu": platform.processor() or platform.machine(),
    }
    print(
        f"recaption {args.n} images, {out['model_class']} on {out['device']} ({out['dtype']}): "
        f"batched {out['batched']['captions_per_s']} captions/s | one per call "
        f"{out['one_per_call']['captions_per_s']} captions/s | {out['ratio']}x | "
        f"identical captions: {out['identical']}",
        file=sys.stderr,
    )
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
