"""Benchmark: the label stage with perceived age and skin tone on vs off.

Usage::

    python benchmarks/bench_label_attributes.py --n 120 --repeats 3 [--batch-size 32]
        [--threads 2] [--json OUT.json]

The same ``--n`` image files (real photos cycled as JPEG and PNG, as in bench_label.py) go
through the ``label`` stage on a fresh study each time, alternately with ``label.age`` and
``label.skin_tone`` on (the default) and off; each setting's best of ``--repeats`` runs is
reported as images/s, with the ratio of the times (goal: attributes cost at most 1.5x). Model
loading is inside the timing, as in a real run (after one untimed warm-up run that pays the
imports). The CPUs here may be shared; rerun for
numbers you report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CORPUS_AUDIT_MODEL_DIR", str(REPO / ".cache" / "models"))


def _corpus() -> Path:
    corpus = REPO.parent / "shared" / "data" / "laion400m_sample_10k.parquet"
    if not corpus.exists():
        corpus = REPO / "corpus_audit" / "demo_data" / "laion400m_sample_10k.parquet"
    return corpus


def one_run(root: Path, paths: list[Path], attributes: bool, args) -> tuple[float, dict]:
    """Seconds of one label run on a fresh study, and the rows it wrote."""
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.label import label

    shutil.rmtree(root, ignore_errors=True)
    study = init_study(root, [str(_corpus())])
    cfg = study.config.label
    cfg.batch_size, cfg.age, cfg.skin_tone = args.batch_size, attributes, attributes
    study.config.engine.threads = args.threads
    study.con.executemany(
        "INSERT INTO images (image_id, source, path) VALUES (?, 'training', ?)",
        [(f"bench:{i:06d}", str(p)) for i, p in enumerate(paths)],
    )
    start = time.perf_counter()
    label(study, progress=False)
    seconds = time.perf_counter() - start
    rows = {t: study.count(t) for t in ("labels", "perceived_age", "skin_tone")}
    study.con.close()
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--n", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from bench_label import make_images

    work = Path(tempfile.mkdtemp(prefix="bench_label_attrs_"))
    try:
        folder = work / "images"
        folder.mkdir()
        paths = make_images(folder, args.n)
        times: dict[str, list[float]] = {"on": [], "off": []}
        rows: dict[str, dict] = {}
        one_run(work / "warm", paths[:4], True, args)  # imports and first loads, untimed
        for _ in range(args.repeats):
            for mode in ("off", "on"):  # alternated: drift in machine load hits both
                secs, rows[mode] = one_run(work / f"study_{mode}", paths, mode == "on", args)
                times[mode].append(secs)
        best = {mode: min(t) for mode, t in times.items()}
        out = {
            "images": args.n,
            "repeats": args.repeats,
            "batch_size": args.batch_size,
            "threads": args.threads,
            "off_img_s": round(args.n / best["off"], 2),
            "on_img_s": round(args.n / best["on"], 2),
            "ratio_on_off": round(best["on"] / best["off"], 3),
            "seconds": {m: [round(s, 2) for s in t] for m, t in times.items()},
            "rows_on": rows["on"],
            "rows_off": rows["off"],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
