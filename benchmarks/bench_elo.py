"""Benchmark: Elo over 1,000 shuffled battle orders, vectorised vs a plain Python loop.

Usage::

    python benchmarks/bench_elo.py [--battles 5000] [--models 6] [--rounds 1000]
                                   [--baseline-rounds 50] [--json OUT.json]

What it does, in one process:

1. draws ``--battles`` synthetic battles among ``--models`` models with known strengths
   (fixed seed; 10 % draws);
2. times ``corpus_audit.methods.preferences.elo.elo_bootstrap`` (the rounds run together as one
   rounds x models array, battle by battle) for ``--rounds`` shuffled orders: battle updates/s
   (= rounds x battles / seconds);
3. times the simple baseline, the METHODS formulas one battle at a time in plain Python with
   a dict of ratings, on ``--baseline-rounds`` of the same orders (it is slow: its rate is per
   update, so the two rates compare directly), and checks that both give the same ratings on
   those orders (largest difference printed);
4. times the Bradley-Terry fit with its bootstrap (``--rounds`` resamples) for scale.

The machine's CPUs may be shared while others work: rerun for numbers you report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def synthetic_battles(n: int, models: int, seed: int = 0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    names = [f"model{i}" for i in range(models)]
    strength = np.linspace(-1.0, 1.0, models)
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models  # never the same model
    p_a = 1 / (1 + np.exp(strength[b] - strength[a]))
    u = rng.random(n)
    vote = np.where(u < 0.9 * p_a, 0, np.where(u < 0.9, 1, 2))
    return pd.DataFrame(
        {
            "model_a": [names[i] for i in a],
            "model_b": [names[i] for i in b],
            "vote": vote,
            "aspect": "bias",
        }
    )


def plain_loop(rows: list[tuple[str, str, float]], orders: np.ndarray) -> list[dict[str, float]]:
    """The baseline: one order at a time, one battle at a time, a dict of ratings."""
    out = []
    for order in orders.tolist():
        rating: dict[str, float] = {}
        for index in order:
            ma, mb, s = rows[index]
            ra = rating.get(ma, 1000.0)
            rb = rating.get(mb, 1000.0)
            ea = 1 / (1 + 10 ** ((rb - ra) / 400))
            eb = 1 / (1 + 10 ** ((ra - rb) / 400))
            rating[ma] = ra + 4 * (s - ea)
            rating[mb] = rb + 4 * (1 - s - eb)
        out.append(rating)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=5000)
    parser.add_argument("--models", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--baseline-rounds", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from corpus_audit.methods.preferences.elo import (
        bradley_terry,
        elo_bootstrap,
        elo_orders,
        score_a,
    )

    battles = synthetic_battles(args.battles, args.models)
    n = len(battles)
    elo_bootstrap(battles.head(50), rounds=2)  # warm up: imports and first calls not timed
    bradley_terry(battles.head(50), rounds=2)

    start = time.perf_counter()
    table = elo_bootstrap(battles, rounds=args.rounds, seed=1)
    vector_s = time.perf_counter() - start

    # Baseline on the first orders of the same kind (Python's view of the same shuffles).
    rng = np.random.default_rng(2)
    orders = rng.permuted(np.tile(np.arange(n), (args.baseline_rounds, 1)), axis=1)
    s = score_a(battles["vote"].to_numpy())
    rows = list(zip(battles["model_a"], battles["model_b"], s.tolist(), strict=True))
    start = time.perf_counter()
    expected = plain_loop(rows, orders)
    loop_s = time.perf_counter() - start
    models = sorted(set(battles["model_a"]) | set(battles["model_b"]))
    index = {m: i for i, m in enumerate(models)}
    a = np.array([index[m] for m in battles["model_a"]])
    b = np.array([index[m] for m in battles["model_b"]])
    check = elo_orders(a, b, s, orders, len(models))
    diff = max(
        abs(check[r, index[m]] - expected[r][m]) for r in range(len(expected)) for m in models
    )

    start = time.perf_counter()
    bradley_terry(battles, rounds=args.rounds, seed=1)
    bt_s = time.perf_counter() - start

    vector_rate = args.rounds * n / vector_s
    loop_rate = args.baseline_rounds * n / loop_s
    result = {
        "battles": n,
        "models": args.models,
        "rounds": args.rounds,
        "vectorised_seconds": round(vector_s, 3),
        "vectorised_updates_per_s": round(vector_rate),
        "baseline_rounds": args.baseline_rounds,
        "baseline_seconds": round(loop_s, 3),
        "baseline_updates_per_s": round(loop_rate),
        "speedup": round(vector_rate / loop_rate, 1),
        "max_abs_difference": diff,
        "bradley_terry_seconds": round(bt_s, 3),
        "median_spread_points": round(float((table.elo_ci_high - table.elo_ci_low).mean()), 2),
    }
    print(f"Elo over shuffled orders: {n} battles, {args.models} models")
    print(
        f"  vectorised ({args.rounds} orders):    {vector_s:8.2f} s  {vector_rate:14,.0f} updates/s"
    )
    print(
        f"  plain loop ({args.baseline_rounds} orders):    {loop_s:8.2f} s  {loop_rate:14,.0f} "
        f"updates/s   (x{vector_rate / loop_rate:.1f} for the vectorised form)"
    )
    print(f"  same ratings on the baseline's orders: max |difference| = {diff:.2e} points")
    print(f"  Bradley-Terry fit + {args.rounds} bootstrap resamples: {bt_s:.2f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if diff < 1e-6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
