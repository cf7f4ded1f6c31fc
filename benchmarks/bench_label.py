"""Benchmark: images/s of the label stage's parts, batched, next to a one-image-at-a-time loop.

Usage::

    python benchmarks/bench_label.py --n 200 [--parts decode,faces,agegender,clip,stage]
        [--clip-model ViT-B-32] [--clip-pretrained random] [--device auto]
        [--batch-size 32] [--workers 2] [--json OUT.json]

Images: ``--n`` files written to a temporary folder, cycled from real photos shipped in PyPI
packages (skimage astronaut / camera, matplotlib's Grace Hopper, skimage's LFW faces and
non-faces upscaled to 128 px, a two-person collage) as JPEG and PNG, so decoding is real.

Parts (each measured batched *and* as a plain loop over single images, same process):

- ``decode``: :func:`corpus_audit.core.imagefile.read_rgb` in ``--workers`` threads vs a loop;
- ``faces``: MediaPipe full-range detection + the one-face rule, per image (MediaPipe has no
  batch API: this is the floor of the stage on CPU);
- ``agegender``: the gender network on the detected faces, one call per batch vs per image;
- ``clip``: open_clip ``--clip-model`` with ``--clip-pretrained`` (``random`` = untrained
  weights of the real architecture: same FLOPs, no download) on ``--device``: forward only on
  preprocessed tensors (batch vs 1) and the whole classifier call (threaded preprocessing +
  forward) batched vs one image at a time;
- ``stage``: the ``label`` stage end to end on a study (decode prefetch, detection, agegender,
  one DuckDB transaction per batch) vs a loop that decodes, detects, classifies and inserts one
  image at a time (autocommit).

Model loading is timed apart. The CPUs here are shared while others work; rerun for numbers
you report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CORPUS_AUDIT_MODEL_DIR", str(REPO / ".cache" / "models"))


def make_images(folder: Path, n: int) -> list[Path]:
    """``n`` image files cycled from the real photos (JPEG and PNG)."""
    from image_fixtures import encode, lfw, photo, two_people

    pool = [photo("astronaut"), photo("camera"), photo("grace"), two_people()]
    pool += lfw("faces")[:40] + lfw("non_faces")[:10]
    paths = []
    for i in range(n):
        array = pool[i % len(pool)]
        fmt, ext = ("PNG", ".png") if i % 3 == 0 else ("JPEG", ".jpg")
        path = folder / f"{i:06d}{ext}"
        path.write_bytes(encode(array, fmt))
        paths.append(path)
    return paths


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 2) if seconds > 0 else float("inf")


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def bench_decode(paths, workers):
    from concurrent.futures import ThreadPoolExecutor

    from corpus_audit.core.imagefile import read_rgb

    arrays, loop_s = timed(lambda: [read_rgb(p) for p in paths])
    with ThreadPoolExecutor(workers) as pool:
        _, pool_s = timed(lambda: list(pool.map(read_rgb, paths)))
    return arrays, {
        "images": len(paths),
        "threads": workers,
        "batched_img_s": rate(len(paths), pool_s),
        "loop_img_s": rate(len(paths), loop_s),
        "speedup": round(loop_s / pool_s, 2),
    }


def bench_faces(arrays, face_model):
    from corpus_audit.backends.faces import MediaPipeFaceDetector, face_filter

    detector, load_s = timed(lambda: MediaPipeFaceDetector(face_model, 0.5))
    detector.detect(arrays[0])  # warm-up
    results, run_s = timed(
        lambda: [face_filter(detector.detect(a), a.shape[1], a.shape[0]) for a in arrays]
    )
    detector.close()
    kept = sum(r.kept for r in results)
    return results, {
        "model": face_model,
        "images": len(arrays),
        "load_s": round(load_s, 2),
        "img_s": rate(len(arrays), run_s),
        "ms_per_img": round(1000 * run_s / len(arrays), 2),
        "kept": kept,
    }


def _kept(arrays, results):
    pairs = [(a, r.face) for a, r in zip(arrays, results, strict=True) if r.kept]
    return [a for a, _ in pairs], [f for _, f in pairs]


def bench_agegender(arrays, results, batch_size):
    import numpy as np

    from corpus_audit.backends.classifiers import AgeGenderClassifier

    clf, load_s = timed(AgeGenderClassifier)
    images, faces = _kept(arrays, results)
    clf.p_female(images[:2], faces[:2])  # warm-up (lazy session creation)

    def batched():
        return np.concatenate(
            [
                clf.p_female(images[i : i + batch_size], faces[i : i + batch_size])
                for i in range(0, len(images), batch_size)
            ]
        )

    b, batch_s = timed(batched)
    s, loop_s = timed(
        lambda: [clf.p_female([im], [f])[0] for im, f in zip(images, faces, strict=True)]
    )
    assert np.allclose(b, s, atol=1e-6)
    return {
        "faces": len(images),
        "load_s": round(load_s, 2),
        "batched_img_s": rate(len(images), batch_s),
        "loop_img_s": rate(len(images), loop_s),
        "speedup": round(loop_s / batch_s, 2),
    }


def bench_clip(arrays, args):
    import numpy as np
    import torch

    from corpus_audit.backends.classifiers import ClipClassifier

    clf, load_s = timed(
        lambda: ClipClassifier(
            args.clip_model,
            args.clip_pretrained,
            device=args.device,
            batch_size=args.batch_size,
            workers=args.workers,
        )
    )
    device = clf.device
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    images = (arrays * (1 + args.clip_images // max(1, len(arrays))))[: args.clip_images]
    nones = [None] * len(images)
    tensor = clf.preprocess(images[: args.batch_size], nones[: args.batch_size])
    clf.probabilities_tensor(tensor)  # warm-up (kernels, allocator)
    clf.probabilities_tensor(tensor[:1])
    sync()

    reps = max(1, len(images) // args.batch_size)

    def fwd_batch():
        for _ in range(reps):
            clf.probabilities_tensor(tensor)
        sync()

    def fwd_single():
        for i in range(min(len(images), reps * args.batch_size)):
            clf.probabilities_tensor(tensor[i % len(tensor) : i % len(tensor) + 1])
        sync()

    _, fb_s = timed(fwd_batch)
    n_single = min(len(images), reps * args.batch_size)
    _, fs_s = timed(fwd_single)
    b, call_s = timed(lambda: clf.p_female(images, nones))
    s, loop_s = timed(lambda: np.array([clf.p_female([im], [None])[0] for im in images]))
    close = 1e-2 if clf.precision != "fp32" else 1e-4
    agree = bool(np.allclose(b, s, atol=close))
    out = {
        "model": args.clip_model,
        "pretrained": args.clip_pretrained,
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        "precision": clf.precision,
        "batch_size": args.batch_size,
        "images": len(images),
        "load_s": round(load_s, 2),
        "forward_batched_img_s": rate(reps * args.batch_size, fb_s),
        "forward_single_img_s": rate(n_single, fs_s),
        "classifier_batched_img_s": rate(len(images), call_s),
        "classifier_loop_img_s": rate(len(images), loop_s),
        "speedup": round(loop_s / call_s, 2),
        "batched_equals_loop": agree,
    }
    clf.close()
    return out


def bench_stage(paths, args):
    """The label stage end to end vs a one-image-at-a-time loop with per-image inserts."""
    from corpus_audit.backends.classifiers import AgeGenderClassifier, decide
    from corpus_audit.backends.faces import MediaPipeFaceDetector, face_filter
    from corpus_audit.core.imagefile import try_read_rgb
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.label import label

    corpus = REPO.parent / "shared" / "data" / "laion400m_sample_10k.parquet"
    if not corpus.exists():
        corpus = REPO / "corpus_audit" / "demo_data" / "laion400m_sample_10k.parquet"
    root = Path(tempfile.mkdtemp(prefix="bench_label_study_"))
    out = {"images": len(paths)}
    for mode in ("stage", "loop"):
        study = init_study(root / mode, [str(corpus)])
        study.config.label.batch_size = args.batch_size
        study.config.engine.threads = args.workers  # the engine's threads decode ahead
        study.config.label.face_model = args.face_model
        study.con.executemany(
            "INSERT INTO images (image_id, source, path) VALUES (?, 'training', ?)",
            [(f"bench:{i:06d}", str(p)) for i, p in enumerate(paths)],
        )
        if mode == "stage":
            run, secs = timed(lambda s=study: label(s, progress=False))
            out["stage_img_s"] = rate(len(paths), secs)
            out["stage_labels"] = run.rows_out
        else:

            def loop(study=study):
                # models are loaded inside the timing, as the stage loads its own
                detector = MediaPipeFaceDetector(args.face_model, 0.5)
                clf = AgeGenderClassifier()
                con = study.con
                for i, p in enumerate(paths):
                    image_id = f"bench:{i:06d}"
                    array, detail = try_read_rgb(p)
                    if array is None:
                        con.execute(
                            "INSERT INTO face_filter (image_id, detector, kept, reason, detail) "
                            "VALUES (?, ?, FALSE, 'unreadable', ?)",
                            [image_id, detector.name, detail],
                        )
                        continue
                    h, w = array.shape[:2]
                    r = face_filter(detector.detect(array), w, h)
                    con.execute(
                        "INSERT INTO face_filter (image_id, detector, n_faces, kept, reason) "
                        "VALUES (?, ?, ?, ?, ?)",
                        [image_id, detector.name, len(r.faces), r.kept, r.reason],
                    )
                    for k, f in enumerate(r.faces):
                        con.execute(
                            "INSERT INTO faces (image_id, face_index, x, y, w, h, score) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [image_id, k, f.x, f.y, f.w, f.h, f.score],
                        )
                    if r.kept:
                        p_f = float(clf.p_female([array], [r.face])[0])
                        con.execute(
                            "INSERT INTO labels VALUES (?, 'agegender', ?, ?, 0.9)",
                            [image_id, p_f, decide(p_f, 0.9)],
                        )
                detector.close()

            _, secs = timed(loop)
            out["loop_img_s"] = rate(len(paths), secs)
            out["loop_labels"] = study.count("labels")
        study.close()
    out["speedup"] = round(out["stage_img_s"] / out["loop_img_s"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="image files (default 200)")
    ap.add_argument("--parts", default="decode,faces,agegender,clip,stage")
    ap.add_argument("--clip-model", default="ViT-B-32")
    ap.add_argument("--clip-pretrained", default="random")
    ap.add_argument("--clip-images", type=int, default=64, help="images through clip")
    ap.add_argument("--device", default="auto")
    ap.add_argument(
        "--face-model", default="short_range", help="short_range (default) or full_range"
    )
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2, help="decode/preprocess threads")
    ap.add_argument("--json", type=Path, help="write the numbers here as JSON")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    import warnings

    warnings.filterwarnings("ignore", message="clip classifier .*random")
    out: dict = {"n": args.n, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench_label_") as tmp:
        paths = make_images(Path(tmp), args.n)
        arrays, out["decode"] = bench_decode(paths, args.workers)
        print("decode", out["decode"], file=sys.stderr, flush=True)
        if parts & {"faces", "agegender"}:
            results, out["faces"] = bench_faces(arrays, args.face_model)
            print("faces", out["faces"], file=sys.stderr, flush=True)
            if "agegender" in parts:
                out["agegender"] = bench_agegender(arrays, results, args.batch_size)
                print("agegender", out["agegender"], file=sys.stderr, flush=True)
        if "clip" in parts:
            out["clip"] = bench_clip(arrays, args)
            print("clip", out["clip"], file=sys.stderr, flush=True)
        if "stage" in parts:
            out["stage"] = bench_stage(paths, args)
            print("stage", out["stage"], file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
