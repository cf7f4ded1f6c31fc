"""Run every CPU benchmark in turn, each in its own process, and keep their results as JSON.

Usage::

    .venv/bin/python benchmarks/run_all.py [--quick] [--only select,indicators,...]
                                           [--out benchmarks/out/results]

Each benchmark prints its own table (throughput next to its simple baseline, run in the same
process); this script runs them one after the other with the sizes quoted in the README's
performance section, keeps each one's printed output in ``<out>/<name>.log`` (and its
``<out>/<name>.json`` where the script writes one), and ends with a one-line status
per benchmark. ``--quick`` uses small sizes (a smoke run of every script in a few minutes; the
numbers are not the ones to report). GPU benchmarks (``bench_generate.py --arch sd15``,
``gpu_neighbors.sh``) are not run here: see the README.

A failing benchmark does not stop the others; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> (arguments for the reported run, arguments for --quick); "{json}" is the output file.
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "select": (
        ["bench_select.py", "--rows", "10000000", "--json", "{json}"],
        ["bench_select.py", "--rows", "200000", "--json", "{json}"],
    ),
    "select_floor": (
        ["bench_select_floor.py", "--files", "8", "--repeats", "3", "--json", "{json}"],
        ["bench_select_floor.py", "--rows", "200000", "--repeats", "1", "--json", "{json}"],
    ),
    "remote_scan": (
        ["bench_remote_scan.py", "--rows", "2000000", "--json", "{json}"],
        ["bench_remote_scan.py", "--rows", "200000", "--repeats", "1", "--json", "{json}"],
    ),
    "indicators": (
        ["bench_indicators.py", "--rows", "1000000", "--baseline", "2000", "--json", "{json}"],
        ["bench_indicators.py", "--rows", "50000", "--baseline", "200", "--json", "{json}"],
    ),
    "embed": (
        ["bench_embed.py", "--n", "4000", "--repeats", "3"],
        ["bench_embed.py", "--n", "256", "--repeats", "1"],
    ),
    "search": (
        ["bench_search.py", "--n", "1000000"],
        ["bench_search.py", "--n", "50000", "--repeats", "1"],
    ),
    "label": (
        ["bench_label.py", "--n", "200", "--json", "{json}"],
        ["bench_label.py", "--n", "24", "--clip-images", "8", "--json", "{json}"],
    ),
    "pst_label": (
        ["bench_pst_label.py", "--n", "200", "--json", "{json}"],
        ["bench_pst_label.py", "--n", "24", "--repeats", "1", "--json", "{json}"],
    ),
    "generate": (
        ["bench_generate.py", "--arch", "tiny", "--size", "8", "--json", "{json}"],
        ["bench_generate.py", "--arch", "tiny", "--size", "4", "--json", "{json}"],
    ),
    "association": (
        ["bench_association.py", "--repeat", "4", "--json", "{json}"],
        ["bench_association.py", "--repeat", "1", "--json", "{json}"],
    ),
    "analysis": (
        ["bench_analysis.py", "--json", "{json}"],
        ["bench_analysis.py", "--occupations", "10", "--images", "100", "--json", "{json}"],
    ),
    "elo": (
        ["bench_elo.py", "--json", "{json}"],
        ["bench_elo.py", "--battles", "1000", "--rounds", "200", "--json", "{json}"],
    ),
    "recaption": (
        ["bench_recaption.py", "--n", "256", "--threads", "1", "--json", "{json}"],
        ["bench_recaption.py", "--n", "32", "--threads", "1", "--json", "{json}"],
    ),
    "engines": (
        ["bench_engines.py", "--repeat", "2", "--json", "{json}"],
        [
            "bench_engines.py",
            "--rows",
            "200000",
            "--captions",
            "2000",
            "--texts",
            "256",
            "--chunk",
            "128",
            "--images",
            "48",
            "--gen-images",
            "8",
            "--repeat",
            "1",
            "--json",
            "{json}",
        ],
    ),
    "study_sql": (  # prints its table (kept in the .log); no JSON
        ["bench_study_sql.py", "--occupations", "62", "--rows", "2000", "--repeat", "3"],
        ["bench_study_sql.py", "--occupations", "5", "--rows", "200", "--repeat", "1"],
    ),
    "decode": (
        ["bench_decode.py", "--megapixels", "88", "--json", "{json}"],
        ["bench_decode.py", "--megapixels", "8", "--json", "{json}"],
    ),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--only", default="", help="comma list of: " + ",".join(BENCHMARKS))
    ap.add_argument("--out", type=Path, default=HERE / "out" / "results")
    args = ap.parse_args(argv)

    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; choose from {sorted(BENCHMARKS)}")
    args.out.mkdir(parents=True, exist_ok=True)

    status: list[tuple[str, int, float]] = []
    for name in names:
        full, quick = BENCHMARKS[name]
        json_path = args.out / f"{name}{'-quick' if args.quick else ''}.json"
        cmd = [sys.executable, str(HERE / (quick if args.quick else full)[0])]
        cmd += [a.replace("{json}", str(json_path)) for a in (quick if args.quick else full)[1:]]
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        log_path = json_path.with_suffix(".log")
        with log_path.open("w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
            )
            assert proc.stdout is not None
            for line in proc.stdout:  # shown live (progress bars) and kept
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
            rc = proc.wait()
        status.append((name, rc, time.perf_counter() - start))

    print("\n=== summary")
    for name, rc, seconds in status:
        print(f"{name:<12} {'ok' if rc == 0 else f'FAILED (exit {rc})':<16} {seconds:8.1f} s")
    print(f"results: {args.out}")
    return 0 if all(rc == 0 for _, rc, _ in status) else 1


if __name__ == "__main__":
    raise SystemExit(main())
