"""Part ``clip``: the CLIP ViT-L/14 perceived-gender labeller, random weights.

open_clip's ``ViT-L-14`` config (committed as ``configs/ViT-L-14.json``) through
:class:`corpus_audit.backends.classifiers.ClipClassifier` (``label.clip_pretrained =
'random'``: untrained, seeded; the time is the trained model's). Steps:

1. ``forward``: the model alone on a preprocessed batch, batched vs one image per call;
2. ``end_to_end``: real photo files (JPEGs written from the photos the tests use: Grace
   Hopper from matplotlib, plus scikit-image's when it is installed) decoded with
   corpus_audit's decoder on every CPU core while the GPU classifies the previous batch,
   vs one file at a time (decode, preprocess, classify);
3. ``fp16_vs_fp32``: the same weights in float16 and float32 label the same files; labels at
   the 0.9 threshold agree except a counted few whose probability is within 0.01 of it. With
   random weights most probabilities sit near 0.5 (every label ``ambiguous``), so the step
   also compares the more likely text (p > 0.5) away from 0.5 and the largest difference.
"""

from __future__ import annotations

import tempfile
import warnings
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from common import CONFIGS, GOALS, Context, best_of, free, log, rate, timer

THRESHOLD = 0.9  # label.threshold of the paper
NEAR = 0.01  # a probability this close to the threshold may flip with rounding
DECODE_MAX_SIDE = 2048  # corpus_audit.core.imagefile's decode size cap

FULL = {
    "config": "ViT-L-14.json",
    "files": 4096,
    "batch": 256,
    "forward_batches": 8,
    "single": 256,
    "compare": 1024,
    "repeats": 3,
}
DRY = {
    "config": "tiny-clip.json",
    "files": 12,
    "batch": 4,
    "forward_batches": 2,
    "single": 3,
    "compare": 12,
    "repeats": 1,
}


def source_photos() -> dict[str, np.ndarray]:
    """The real photos the project's tests use (tests/image_fixtures.py), as RGB arrays:
    Grace Hopper (matplotlib, always there) and astronaut/camera/coffee/chelsea when
    scikit-image is installed."""
    from matplotlib import cbook
    from PIL import Image

    with Image.open(cbook.get_sample_data("grace_hopper.jpg")) as im:
        photos = {"grace": np.asarray(im.convert("RGB"))}
    try:
        import skimage.data
    except ImportError:
        return photos
    for name in ("astronaut", "coffee", "chelsea", "camera"):
        arr = getattr(skimage.data, name)()
        photos[name] = np.repeat(arr[:, :, None], 3, axis=2) if arr.ndim == 2 else arr
    return photos


def write_files(folder: Path, n: int, workers: int) -> list[Path]:
    """``n`` distinct JPEG files (quality 90): random crops of the photos, 384-1024 px long
    side, as web images are; written in parallel."""
    from PIL import Image

    photos = list(source_photos().items())
    rng = np.random.default_rng(0)
    plans = []
    for i in range(n):
        name, arr = photos[i % len(photos)]
        h, w = arr.shape[:2]
        ch, cw = int(h * rng.uniform(0.6, 1.0)), int(w * rng.uniform(0.6, 1.0))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        side = int(rng.integers(384, 1025))
        plans.append((folder / f"{i:06d}_{name}.jpg", arr, top, left, ch, cw, side))

    def one(plan: tuple) -> Path:
        path, arr, top, left, ch, cw, side = plan
        im = Image.fromarray(np.ascontiguousarray(arr[top : top + ch, left : left + cw]))
        scale = side / max(ch, cw)
        im = im.resize((max(8, round(cw * scale)), max(8, round(ch * scale))), Image.BICUBIC)
        im.save(path, "JPEG", quality=90)
        return path

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, plans))


def classifier(ctx: Context, cfg: dict[str, Any], precision: str, batch: int) -> Any:
    from corpus_audit.backends.classifiers import ClipClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "random (untrained) weights"
        return ClipClassifier(
            str(CONFIGS / cfg["config"]),
            "random",
            device=ctx.device,
            precision=precision,
            batch_size=batch,
            seed=0,
            workers=1,
        )


def load(clf: Any, path: Path) -> Any:
    """Decode a file (corpus_audit's decoder) and preprocess it: one ``(3, S, S)`` tensor."""
    from corpus_audit.core.imagefile import decode

    image = decode(path, max_side=DECODE_MAX_SIDE).array
    return clf.preprocess([image], [None])[0]


def pipelined(clf: Any, paths: Sequence[Path], batch: int, pool: ThreadPoolExecutor) -> np.ndarray:
    """p_female of every file: the pool decodes the next batches while the GPU runs one."""
    import torch

    def classify(futures: list[Future]) -> np.ndarray:
        return clf.probabilities_tensor(torch.stack([f.result() for f in futures]))[:, 1]

    pending: deque[list[Future]] = deque()
    out = []
    for start in range(0, len(paths), batch):
        pending.append([pool.submit(load, clf, p) for p in paths[start : start + batch]])
        if len(pending) > 3:  # three batches decode ahead of the GPU
            out.append(classify(pending.popleft()))
    while pending:
        out.append(classify(pending.popleft()))
    return np.concatenate(out)


def one_at_a_time(clf: Any, paths: Sequence[Path]) -> np.ndarray:
    from corpus_audit.core.imagefile import decode

    return np.array(
        [clf.p_female([decode(p, max_side=DECODE_MAX_SIDE).array], [None])[0] for p in paths]
    )


def labels(p: np.ndarray) -> np.ndarray:
    from corpus_audit.backends.classifiers import decide

    return np.array([decide(x, THRESHOLD) for x in p])


def run(ctx: Context) -> None:
    import torch

    cfg = DRY if ctx.dry else FULL
    half = "fp16" if ctx.device.startswith("cuda") else "fp32"
    ctx.step("config", dict(cfg, precision=half, threshold=THRESHOLD, decode_threads=ctx.cores))
    tmp = tempfile.TemporaryDirectory()
    pool = ThreadPoolExecutor(ctx.cores)
    try:
        with timer("cpu") as t:
            paths = write_files(Path(tmp.name), cfg["files"], ctx.cores)
        sizes = [p.stat().st_size for p in paths]
        ctx.step(
            "files",
            {
                "n": len(paths),
                "mean_kib": round(float(np.mean(sizes)) / 1024, 1),
                "photos": sorted(source_photos()),
                "write_s": round(t["s"], 2),
            },
        )
        clf = classifier(ctx, cfg, half, cfg["batch"])
        b = cfg["batch"]
        batch = torch.stack([load(clf, p) for p in paths[:b]] * (-(-b // len(paths))))[:b]
        clf.probabilities_tensor(batch)  # warm-up: kernels, allocator
        clf.probabilities_tensor(batch[:1])
        n_fwd = cfg["forward_batches"] * b
        s_batched, _ = best_of(
            ctx.device,
            cfg["repeats"],
            lambda: [clf.probabilities_tensor(batch) for _ in range(cfg["forward_batches"])],
        )
        single = cfg["single"]
        s_single, _ = best_of(
            ctx.device,
            1,
            lambda: [clf.probabilities_tensor(batch[i % b : i % b + 1]) for i in range(single)],
        )
        ctx.step(
            "forward",
            {
                "batch": b,
                "batched_images_per_s": rate(n_fwd, s_batched),
                "one_per_call_images_per_s": rate(single, s_single),
                "speedup": round((s_single / single) / (s_batched / n_fwd), 2),
            },
        )
        pipelined(clf, paths[: 2 * b], b, pool)  # warm the decoders
        s_e2e, p_half = best_of(ctx.device, cfg["repeats"], lambda: pipelined(clf, paths, b, pool))
        s_loop, p_loop = best_of(ctx.device, 1, lambda: one_at_a_time(clf, paths[:single]))
        e2e = rate(len(paths), s_e2e)
        ctx.step(
            "end_to_end",
            {
                "files": len(paths),
                "batch": b,
                "decode_threads": ctx.cores,
                "pipelined_images_per_s": e2e,
                "one_file_per_call_images_per_s": rate(single, s_loop),
                "speedup": round((s_loop / single) / (s_e2e / len(paths)), 2),
                "batched_equals_one_by_one_atol_1e-2": bool(
                    np.allclose(p_half[:single], p_loop, atol=1e-2)
                ),
                "goal_images_per_s": GOALS["clip_end_to_end_images_per_s_min"],
                "goal_met": None if ctx.dry else e2e >= GOALS["clip_end_to_end_images_per_s_min"],
            },
        )
        clf.close()
        clf = batch = None  # free the GPU memory
        free(ctx.device)
        n = cfg["compare"]
        ref = classifier(ctx, cfg, "fp32", b)
        p32 = pipelined(ref, paths[:n], b, pool)
        ref.close()
        del ref
        free(ctx.device)
        half_again = classifier(ctx, cfg, half, b)
        p16 = pipelined(half_again, paths[:n], b, pool)
        half_again.close()
        l16, l32 = labels(p16), labels(p32)
        differ = l16 != l32
        near = (np.abs(p32 - THRESHOLD) < NEAR) | (np.abs((1 - p32) - THRESHOLD) < NEAR)
        ctx.step(
            "fp16_vs_fp32",
            {
                "images": n,
                "precision": half,
                "threshold": THRESHOLD,
                "labels_differ": int(differ.sum()),
                "labels_differ_not_near_threshold": int((differ & ~near).sum()),
                "near_threshold": int(near.sum()),
                "max_abs_p_diff": round(float(np.abs(p16 - p32).max()), 6),
                "argmax_differ_not_near_half": int(
                    ((p16 > 0.5) != (p32 > 0.5))[np.abs(p32 - 0.5) > NEAR].sum()
                ),
                "label_counts_fp32": {
                    k: int(v) for k, v in zip(*np.unique(l32, return_counts=True), strict=True)
                },
                "ok": bool(
                    (differ & ~near).sum() == 0
                    and not ((p16 > 0.5) != (p32 > 0.5))[np.abs(p32 - 0.5) > NEAR].any()
                ),
            },
        )
        log(f"clip: end to end {e2e} images/s")
    finally:
        pool.shutdown(wait=True)
        tmp.cleanup()
