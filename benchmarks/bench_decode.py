"""Benchmark: peak memory and time of decoding one large image, next to plain Pillow.

Usage::

    python benchmarks/bench_decode.py [--megapixels 88] [--json OUT.json]

A photo-like image of ``--megapixels`` (the skimage astronaut photo scaled up to a square) is
written once as JPEG (quality 90) and PNG into ``benchmarks/out/``; then every row below runs in
a fresh process that reports its own peak RSS (``VmHWM`` from ``/proc/self/status``, Linux) minus
its RSS before decoding:

- ``pillow``: the simple baseline, ``np.asarray(Image.open(p).convert("RGB"))``;
- ``read_rgb full size``: :func:`corpus_audit.core.imagefile.read_rgb` with no size limit;
- ``label decode``: :func:`corpus_audit.core.imagefile.decode` as the ``label`` stage calls it
  (long side <= ``core.imagefile.DECODE_MAX_SIDE``, JPEG scaled by the decoder itself, inside
  :func:`~corpus_audit.core.imagefile.large_pillow_blocks`);
- ``label decode, 2 threads x 2 images``: two threads decoding two copies each, sharing one
  :class:`~corpus_audit.core.imagefile.DecodeBudget` of ``images.max_pixels`` (as the stage does)
  and, for comparison, with no budget.

The machine's other work moves the seconds, not the peaks.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

CHILD = r"""
import re, sys, time
import numpy as np

def rss_kb(field):
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s+(\d+) kB", f.read()).group(1))

mode, path = sys.argv[1], sys.argv[2]
from PIL import Image
from corpus_audit.core.imagefile import DecodeBudget, decode, large_pillow_blocks, read_rgb
from corpus_audit.core.imagefile import DECODE_MAX_SIDE
if mode != "pillow" and mode != "full":
    blocks = large_pillow_blocks()  # as the label stage does
    blocks.__enter__()
before = rss_kb("VmRSS")
t = time.perf_counter()
if mode == "pillow":
    shape = np.asarray(Image.open(path).convert("RGB")).shape
elif mode == "full":
    shape = read_rgb(path).shape
elif mode == "label":
    shape = decode(path, max_side=DECODE_MAX_SIDE).array.shape
else:  # threads: 2 threads x 2 images, with or without the stage's budget
    from concurrent.futures import ThreadPoolExecutor
    budget = DecodeBudget(89_478_485) if mode == "threads_budget" else None
    with ThreadPoolExecutor(2) as pool:
        out = list(pool.map(lambda p: decode(p, max_side=DECODE_MAX_SIDE, budget=budget), [path] * 4))
    shape = out[0].array.shape
seconds = time.perf_counter() - t
print(f"RESULT {rss_kb('VmHWM') - before} {seconds:.3f} {shape[1]}x{shape[0]}")
"""

MODES = [
    ("pillow", "pillow (baseline)"),
    ("full", "read_rgb full size"),
    ("label", "label decode"),
    ("threads_budget", "label decode, 2 threads x 2 images, shared budget"),
    ("threads_free", "label decode, 2 threads x 2 images, no budget"),
]


def make_images(megapixels: float, folder: Path) -> dict[str, Path]:
    """The astronaut photo scaled to ``megapixels`` (square), as JPEG and PNG (cached)."""
    import skimage.data
    from PIL import Image

    side = int(math.sqrt(megapixels * 1e6))
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"JPEG": folder / f"decode_{side}.jpg", "PNG": folder / f"decode_{side}.png"}
    if all(p.is_file() for p in paths.values()):
        return paths
    big = Image.fromarray(skimage.data.astronaut()).resize((side, side), Image.Resampling.BICUBIC)
    big.save(paths["JPEG"], quality=90)
    big.save(paths["PNG"], compress_level=1)
    return paths


def measure(mode: str, path: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=True,
    )
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    _, kb, seconds, size = line.split()
    return {"peak_mb": round(int(kb) / 1024), "seconds": float(seconds), "output": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--megapixels", type=float, default=88.0)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not Path("/proc/self/status").exists():
        sys.exit("bench_decode needs Linux (/proc/self/status) to read peak memory")
    paths = make_images(args.megapixels, HERE / "out")
    results = []
    print(f"decode of a {args.megapixels:g}-megapixel photo; peak RSS above the process's start")
    print(f"{'format':6} {'how':52} {'peak MB':>8} {'vs pillow':>10} {'seconds':>8}  output")
    for fmt, path in paths.items():
        base = None
        for mode, label in MODES:
            r = measure(mode, path)
            base = base or r["peak_mb"]
            ratio = r["peak_mb"] / base if base else float("nan")
            results.append({"format": fmt, "mode": mode, **r})
            print(
                f"{fmt:6} {label:52} {r['peak_mb']:>8} {ratio:>9.2f}x {r['seconds']:>8.2f}"
                f"  {r['output']}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps({"megapixels": args.megapixels, "rows": results}))


if __name__ == "__main__":
    main()
