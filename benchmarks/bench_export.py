"""Peak memory and seconds of ``corpus-audit export`` on a study whose ``captions`` holds
``--rows`` synthetic rows (issue 44, M8: the export read each table whole, 680 MB peak for 1 M
captions; it now streams record batches).

Usage::

    python benchmarks/bench_export.py --rows 1000000 [--format parquet|csv] [--keep DIR]

Builds the study once (``init`` on the bundled LAION sample, then ``captions`` filled in
DuckDB with ``--rows`` rows of ~100-character texts and URLs), then runs ``corpus-audit export
STUDY --tables captions`` as a child process and reports its wall time and peak RSS
(``getrusage(RUSAGE_CHILDREN).ru_maxrss``; a fresh process, so the peak is the export's).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(root: Path, rows: int) -> None:
    from corpus_audit.api import demo_corpus
    from corpus_audit.core.pipeline import init_study

    study = init_study(root, [str(demo_corpus()["laion"])])
    study.con.execute(
        "INSERT INTO captions SELECT range AS caption_id, "
        "'a photo of a nurse at work number ' || range || ' ' || repeat('x', 60) AS text, "
        "'https://example.org/img/' || range || '.jpg' AS url, "
        "'synthetic.parquet' AS source_file, range AS row_in_file FROM range(?)",
        [rows],
    )
    study.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--format", default="parquet", choices=("parquet", "csv"))
    parser.add_argument("--keep", help="build (or reuse) the study here")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="bench_export_")) / "study"
    if not (root / "study.toml").exists():
        build(root, args.rows)
    out = root.parent / "out"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", "-q", "export", str(root)]
        + ["--tables", "captions", "--format", args.format, "--out", str(out)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    print(
        f"rows {args.rows}  format {args.format}  export {seconds:.1f} s  peak RSS {peak_mb:.0f} MB"
    )


if __name__ == "__main__":
    main()
