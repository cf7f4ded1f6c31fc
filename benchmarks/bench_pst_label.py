"""Benchmark: labelling PST (two-person) images by position, next to the one-face path.

Usage::

    python benchmarks/bench_pst_label.py --n 200 [--batch-size 32] [--images-per-prompt 1]
        [--repeats 3] [--json OUT.json]

Images: ``--n`` JPEG files of each kind written to a temporary folder and decoded with
:func:`corpus_audit.core.imagefile.read_rgb` inside the timing (as the label stage does):

- **two-face**: real photos composed side by side (skimage's astronaut and cameraman in both
  orders; pairs of skimage LFW faces upscaled to 160 px), cycled;
- **one-face**: the same photos alone (astronaut, cameraman, LFW faces).

Paths, each over its own images, same process, models loaded once beforehand:

- ``one_face``: decode, MediaPipe full-range detection, the one-face rule, the agegender
  classifier on the kept faces, one call per batch of ``--batch-size`` images (the core of the
  ``label`` stage);
- ``two_face``: decode, detection, the two-face rule (:func:`corpus_audit.methods.pst.positions.pair_filter`),
  each person's crop through agegender, one call per batch (:func:`corpus_audit.methods.pst.persons.classify_people`);
- ``two_face_loop`` (the simple baseline): decode, detection, the two-face rule, then one
  classifier call per person on the whole image.

Reported per path: images/s, persons/s, and prompts/s at ``--images-per-prompt`` images per
prompt (best of ``--repeats`` interleaved runs); ratios two-face vs one-face and batched vs
loop. The classifier calls of the batched
and the loop path give the same probabilities (checked). The machine's CPUs may be shared:
rerun for numbers you report.
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


def make_images(folder: Path, n: int) -> tuple[list[Path], list[Path]]:
    """``n`` two-face and ``n`` one-face JPEG files."""
    import numpy as np
    from image_fixtures import encode, lfw, photo
    from pst_fixtures import person, side_by_side

    faces = lfw("faces", size=160)[:24]
    two = [side_by_side("woman", "man"), side_by_side("man", "woman")]
    two += [np.concatenate([faces[i], faces[i + 1]], axis=1) for i in range(0, len(faces), 2)]
    one = [person("woman"), person("man"), photo("astronaut"), photo("camera"), *faces]
    out: tuple[list[Path], list[Path]] = ([], [])
    for kind, pool, paths in (("two", two, out[0]), ("one", one, out[1])):
        for i in range(n):
            path = folder / f"{kind}_{i:06d}.jpg"
            path.write_bytes(encode(np.ascontiguousarray(pool[i % len(pool)]), "JPEG", quality=92))
            paths.append(path)
    return out


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def one_face_path(paths, detector, clf, batch_size):
    from corpus_audit.backends.faces import face_filter
    from corpus_audit.core.imagefile import read_rgb

    probs, persons = [], 0
    for start in range(0, len(paths), batch_size):
        images, faces = [], []
        for path in paths[start : start + batch_size]:
            image = read_rgb(path)
            result = face_filter(detector.detect(image), image.shape[1], image.shape[0])
            if result.kept:
                images.append(image)
                faces.append(result.face)
        persons += len(images)
        probs.extend(clf.p_female(images, faces).tolist())
    return persons, probs


def two_face_path(paths, detector, clf, batch_size, prompt):
    from corpus_audit.core.imagefile import read_rgb
    from corpus_audit.methods.pst.persons import PstImage, classify_people
    from corpus_audit.methods.pst.positions import pair_filter

    frames = []
    for start in range(0, len(paths), batch_size):
        items = []
        for path in paths[start : start + batch_size]:
            image = read_rgb(path)
            result = pair_filter(detector.detect(image), image.shape[1], image.shape[0])
            items.append(PstImage(path.name, image, prompt, result))
        frames.append(classify_people(items, clf, batch_size=2 * batch_size))
    probs = [p for f in frames for p in f["p_female"].tolist()]
    return len(probs), probs


def two_face_loop(paths, detector, clf):
    from corpus_audit.core.imagefile import read_rgb
    from corpus_audit.methods.pst.positions import pair_filter

    probs = []
    for path in paths:
        image = read_rgb(path)
        result = pair_filter(detector.detect(image), image.shape[1], image.shape[0])
        for _, _, face in result.people():
            probs.append(float(clf.p_female([image], [face])[0]))
    return len(probs), probs


def rates(n_images, persons, seconds, per_prompt):
    return {
        "images": n_images,
        "persons": persons,
        "seconds": round(seconds, 3),
        "images_s": round(n_images / seconds, 2),
        "persons_s": round(persons / seconds, 2),
        "prompts_s": round(n_images / seconds / per_prompt, 2),
    }


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200, help="images of each kind (default 200)")
    ap.add_argument("--batch-size", type=int, default=32, help="images per classifier batch")
    ap.add_argument("--images-per-prompt", type=int, default=1, help="for prompts/s (default 1)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each path, best kept")
    ap.add_argument("--json", type=Path, help="write the numbers here as JSON")
    args = ap.parse_args(argv)

    from corpus_audit.backends.classifiers import AgeGenderClassifier
    from corpus_audit.backends.faces import MediaPipeFaceDetector
    from corpus_audit.methods.lexicon.pst import load_prompts

    prompt = load_prompts(kinds=("paired",), fair=False)[0]
    out: dict = {
        "n": args.n,
        "cpus": os.cpu_count(),
        "batch_size": args.batch_size,
        "repeats": args.repeats,
    }
    with tempfile.TemporaryDirectory(prefix="bench_pst_label_") as tmp:
        two_paths, one_paths = make_images(Path(tmp), args.n)
        (detector, clf), load_s = timed(
            lambda: (MediaPipeFaceDetector("full_range", 0.5), AgeGenderClassifier())
        )
        out["load_s"] = round(load_s, 2)
        one_face_path(one_paths[:4], detector, clf, 4)  # warm-up: lazy sessions, caches
        two_face_path(two_paths[:4], detector, clf, 4, prompt)
        paths = {
            "one_face": lambda: one_face_path(one_paths, detector, clf, args.batch_size),
            "two_face": lambda: two_face_path(two_paths, detector, clf, args.batch_size, prompt),
            "two_face_loop": lambda: two_face_loop(two_paths, detector, clf),
        }
        best: dict[str, float] = {}
        probs: dict[str, list[float]] = {}
        persons: dict[str, int] = {}
        for _ in range(args.repeats):  # interleaved, best of --repeats
            for name, run in paths.items():
                (persons[name], probs[name]), secs = timed(run)
                best[name] = min(secs, best.get(name, secs))
        for name in paths:
            n_images = len(one_paths) if name == "one_face" else len(two_paths)
            out[name] = rates(n_images, persons[name], best[name], args.images_per_prompt)
            print(name, out[name], file=sys.stderr, flush=True)
        batched, looped = probs["two_face"], probs["two_face_loop"]
        detector.close()
    out["batched_equals_loop"] = bool(
        len(batched) == len(looped) and np.allclose(batched, looped, atol=1e-3)
    )
    out["kept_two_face_share"] = round(out["two_face"]["persons"] / (2 * args.n), 3)
    out["two_vs_one_face_images"] = round(
        out["two_face"]["images_s"] / out["one_face"]["images_s"], 2
    )
    out["batched_vs_loop"] = round(
        out["two_face"]["images_s"] / out["two_face_loop"]["images_s"], 2
    )
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
