"""Benchmark: `import-images` throughput against a plain hash-and-insert loop.

Usage::

    python benchmarks/bench_import.py --n 1000 [--side 256] [--repeats 3]

Images: ``--n`` PNG files of a real photo (skimage's astronaut at ``--side`` px), each with one
pixel changed so every file has its own bytes, in a temporary folder with a JSONL manifest that
names a PST prompt id per file (a PST study: ``pst_prompts`` only, no corpus needed).

Paths, each into a fresh study, files in the page cache (a warm-up read first):

- ``import_images``: :func:`corpus_audit.stages.import_images.import_images`: read the manifest, match
  every prompt, check every path, read + SHA-256 + open the header of each file (threads),
  look up earlier imports, write ``images``, ``imported_images`` and ``image_imports`` in one
  transaction;
- ``plain_loop`` (the baseline): for each manifest line read the file, SHA-256 it, and insert
  ``(image_id, path, sha256)`` into a table, one transaction;
- ``reimport``: ``import_images`` of the same manifest again (adds nothing).

Prints images/s per path (best of ``--repeats``) and the ratio to the plain loop.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _files(folder: Path, n: int, side: int, prompt_ids: list[str]) -> Path:
    import skimage.data
    from PIL import Image

    base = np.asarray(Image.fromarray(skimage.data.astronaut()).resize((side, side))).copy()
    lines = []
    for i in range(n):
        pixels = base.copy()
        pixels[i % side, (i // side) % side] = (i % 251, (i * 7) % 251, (i * 13) % 251)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="PNG", compress_level=1)
        name = f"{i:06d}.png"
        (folder / name).write_bytes(buf.getvalue())
        lines.append(json.dumps({"file": name, "prompt_id": prompt_ids[i % len(prompt_ids)]}))
    manifest = folder / "images.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def _study(root: Path):
    from corpus_audit.core.pipeline import init_study, stage_function

    study = init_study(root, [], overrides={"pst": {"enabled": True}})
    stage_function("pst_prompts")(study, progress=False)
    return study


def _plain(study, manifest: Path) -> int:
    folder = manifest.parent
    rows = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        data = (folder / record["file"]).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        rows.append((f"plain:{record['prompt_id']}:{sha[:16]}", str(folder / record["file"]), sha))
    study.con.execute(
        "CREATE TABLE IF NOT EXISTS plain (image_id VARCHAR, path VARCHAR, sha VARCHAR)"
    )
    with study.transaction() as con:
        con.executemany("INSERT INTO plain VALUES (?, ?, ?)", rows)
    return len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from corpus_audit.stages.import_images import import_images

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        probe = _study(tmp_path / "probe")
        ids = [r[0] for r in probe.con.execute("SELECT prompt_id FROM pst_prompts").fetchall()]
        probe.close()
        files = tmp_path / "files"
        files.mkdir()
        t = time.perf_counter()
        manifest = _files(files, args.n, args.side, ids)
        made = time.perf_counter() - t
        size = sum(f.stat().st_size for f in files.glob("*.png"))
        for f in files.glob("*.png"):  # warm the page cache
            f.read_bytes()
        best: dict[str, float] = {}
        for r in range(args.repeats):
            for name in ("import_images", "plain_loop"):
                study = _study(tmp_path / f"{name}_{r}")
                t = time.perf_counter()
                if name == "import_images":
                    run = import_images(study, [manifest], model="bench")
                    assert run.rows_out == args.n, run.rows_out
                    t_re = time.perf_counter()
                    again = import_images(study, [manifest], model="bench")
                    assert again.rows_out == 0
                    best["reimport"] = min(best.get("reimport", 1e9), time.perf_counter() - t_re)
                    seconds = t_re - t
                else:
                    assert _plain(study, manifest) == args.n
                    seconds = time.perf_counter() - t
                best[name] = min(best.get(name, 1e9), seconds)
                study.close()
    print(f"{args.n} PNG files of {args.side}x{args.side} px, {size / args.n / 1024:.1f} KiB each "
          f"(made in {made:.1f} s); best of {args.repeats}")  # fmt: skip
    print(f"{'path':<15} {'seconds':>8} {'images/s':>10} {'x plain':>8}")
    for name in ("plain_loop", "import_images", "reimport"):
        s = best[name]
        print(f"{name:<15} {s:8.3f} {args.n / s:10.0f} {best['plain_loop'] / s:8.2f}")


if __name__ == "__main__":
    main()
