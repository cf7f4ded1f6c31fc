"""Every stage of the demo study, timed under two versions of the code, alternated.

Usage::

    .venv/bin/python benchmarks/bench_stages.py [--baseline REV] [--rounds 2]
                                                [--json benchmarks/out/stages.json]

For a refactor that must not slow any stage: ``--baseline`` (a git revision, default
``HEAD``) is checked out into a temporary git worktree, and each round runs the whole
``corpus-audit run`` order of the demo study (``corpus-audit demo``'s corpus and settings:
real LAION-400M, COCO and CC3M captions; spaCy NER, SBERT + FAISS) once in a fresh process
per version, the two versions' order swapped every round, each stage timed on its own
(``time.perf_counter`` around the stage function, models loaded inside the stage as a user's
run loads them). Printed: per stage the best seconds of each version and their ratio
(this tree / baseline; > 1 is slower), the median of the rounds' paired ratios (each round's
two runs side by side, so that a slow minute of the machine slows both) with their range,
the same median in CPU seconds (``time.process_time``: every thread of the process; less
moved by other jobs on the machine than wall time), and whether the two versions wrote the
same tables (row counts and order-free hashes of every table the stages write). The image
stages find no images in the demo (captions only) and time their skip.

The baseline is the simple run side by side; the numbers are wall seconds on this machine,
so alternate rounds and read the best of each, not one pair. A stage that takes a fraction
of a second (the image stages' skips, ``categories``) varies by tens of percent from run to
run: read its ratio beside its seconds; the ``all`` row is the sum of the stages.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Runs in the version's own tree (cwd = that tree, so `corpus_audit` imports from it).
CHILD = r"""
import json, sys, time
from pathlib import Path
from corpus_audit.commands import demo
from corpus_audit.core.catalogue import RUN_ORDERS, STAGES
from corpus_audit.core.pipeline import stage_function

# both versions read the same files (this tree's demo_data): paths are stored in the tables
demo.demo_corpus = lambda: [str(Path(sys.argv[2]) / name) for name in demo.DEMO_FILES]
study = demo.open_or_create(Path(sys.argv[1]))
times, cpu, order = {}, {}, RUN_ORDERS["amplification"]
for i, name in enumerate(order):
    key = name if name not in order[:i] else f"{name}#2"
    start, start_cpu = time.perf_counter(), time.process_time()
    stage_function(name)(study, progress=False)
    times[key] = time.perf_counter() - start
    cpu[key] = time.process_time() - start_cpu  # every thread of the process (DuckDB's too)
tables = sorted({t for n in dict.fromkeys(order) for t in STAGES.get(n).writes})
# columns that differ between two runs by design: paths under each study, clock times
volatile = {"index_path", "finished_at", "started_at", "created_at"}
hashes = {}
for t in tables:
    if study.table_exists(t):
        cols = [c for c in study.column(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [t]) if c not in volatile]
        hashes[t] = study.fingerprint(t, ", ".join(cols))
study.close()
print(json.dumps({"times": times, "cpu": cpu, "tables": hashes}))
"""

# Tables whose values differ between two runs by design (none: volatile columns are left out)
VOLATILE: set[str] = set()


def run_version(tree: Path, work: Path) -> dict:
    """One run of every stage in ``tree``, in a new study under ``work``; the child's JSON."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(work), str(REPO / "corpus_audit" / "demo_data")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"{tree}: the run failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def baseline_tree(rev: str, into: Path) -> Path:
    """A git worktree of ``rev`` at ``into`` (removed by :func:`remove_tree`)."""
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(into), rev],
        check=True,
        capture_output=True,
    )
    return into


def remove_tree(path: Path) -> None:
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "remove", "--force", str(path)],
        check=False,
        capture_output=True,
    )


def _seconds(run: dict, stage: str, clock: str = "times") -> float:
    """One run's wall (``times``) or CPU (``cpu``) seconds in ``stage`` (``all``: the sum)."""
    return sum(run[clock].values()) if stage == "all" else run[clock][stage]


def _paired(results: dict[str, list[dict]], stage: str, clock: str) -> list[float]:
    """Each round's this tree / baseline seconds (the round's two runs side by side)."""
    pairs = zip(results["baseline"], results["this tree"], strict=True)
    return [_seconds(mine, stage, clock) / _seconds(base, stage, clock) for base, mine in pairs]


def report(results: dict[str, list[dict]]) -> dict:
    """Best wall seconds per stage and version, their ratio, the median and range of the
    rounds' paired ratios in wall and in CPU time, and whether the tables agree."""
    rows = []
    for stage in [*results["this tree"][0]["times"], "all"]:
        best = {v: min(_seconds(r, stage) for r in runs) for v, runs in results.items()}
        wall, cpu = _paired(results, stage, "times"), _paired(results, stage, "cpu")
        rows.append(
            {
                "stage": stage,
                **best,
                "ratio": best["this tree"] / best["baseline"],
                "paired_median": statistics.median(wall),
                "paired_low": min(wall),
                "paired_high": max(wall),
                "paired_cpu_median": statistics.median(cpu),
            }
        )
    a, b = results["baseline"][0]["tables"], results["this tree"][0]["tables"]
    differ = sorted(t for t in set(a) | set(b) if t not in VOLATILE and a.get(t) != b.get(t))
    return {"stages": rows, "tables_differ": differ}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="HEAD", help="git revision to compare with")
    ap.add_argument("--rounds", type=int, default=2, help="alternated rounds (>= 1)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_stages_") as tmp:
        base = baseline_tree(args.baseline, Path(tmp) / "baseline")
        try:
            trees = {"baseline": base, "this tree": REPO}
            results: dict[str, list[dict]] = {v: [] for v in trees}
            for i in range(args.rounds):
                versions = list(trees) if i % 2 == 0 else list(trees)[::-1]
                for version in versions:
                    work = Path(tmp) / f"study_{i}_{version.replace(' ', '_')}"
                    results[version].append(run_version(trees[version], work))
                    print(f"round {i + 1}: {version} done", file=sys.stderr)
        finally:
            remove_tree(base)
    out = report(results)
    print(
        f"{'stage':<14}{'baseline s':>12}{'this tree s':>13}{'ratio':>8}"
        f"{'paired wall (range)':>24}{'paired CPU':>12}"
    )
    for r in out["stages"]:
        spread = f"{r['paired_median']:.2f} ({r['paired_low']:.2f}-{r['paired_high']:.2f})"
        print(
            f"{r['stage']:<14}{r['baseline']:>12.2f}{r['this tree']:>13.2f}{r['ratio']:>8.2f}"
            f"{spread:>24}{r['paired_cpu_median']:>12.2f}"
        )
    print(
        "tables: " + ("identical" if not out["tables_differ"] else f"differ {out['tables_differ']}")
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rounds": args.rounds, **out}, indent=2))


if __name__ == "__main__":
    main()
