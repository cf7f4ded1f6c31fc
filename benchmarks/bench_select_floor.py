"""Where the ``select`` scan's CPU goes, part by part, next to the raw scan it is compared with.

Usage::

    python benchmarks/bench_select_floor.py --rows 10000000 [--files 2] [--repeats 3]

On the synthetic LAION-like corpus of ``bench_select.py`` (cached, same ``--data-dir``), one
thread, CPU time per corpus row (``time.process_time``; nanoseconds, best of ``--repeats``
rounds, the parts alternated within each round so a shared machine's load falls on all alike),
over the row groups of the first ``--files`` files:

1. ``raw scan``: DuckDB's ``sum(length(TEXT))`` over ``read_parquet`` (``threads = 1``):
   the denominator of the stage's "x raw scan" ratio.
2. ``read TEXT``: pyarrow reads the caption column of each row group (what the raw scan reads).
3. ``read TEXT+URL``: the two columns the stage reads (``select`` keeps each caption's url).
4. ``UTF-8 check``: the full validation of the caption array (the stage counts invalid
   captions, and Hyperscan's UTF-8 mode needs valid input).
5. ``hyperscan scan``: the compiled database over each row group's joined bytes, no match
   handler: the matching engine's own cost.
6. ``hyperscan find``: the whole matcher (join, scan with its Python match handler, the
   numpy mapping of matches to rows and forms).
7. ``scan unit``: ``select``'s whole unit (reading, cleaning, matching, the candidate and
   mention tables), as a worker runs it.

Then the floor: 3 + 4 + 5, the parts no implementation of the stage can skip (it must read the
captions and urls, check the bytes and scan them), as a multiple of 1; its inverse is the best
"x raw scan" a ``select`` could reach on this machine if matching cost only the engine's scan
and nothing were written. The stage's own ratio (``bench_select.py``) is lower still: it also
writes captions, mentions and samples.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import hyperscan
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_select import add_corpus_arguments, corpus_dir  # noqa: E402

from corpus_audit.backends.corpus import CorpusFile  # noqa: E402
from corpus_audit.methods.lexicon import load_occupations  # noqa: E402
from corpus_audit.methods.matching import build_matcher  # noqa: E402
from corpus_audit.methods.multimatch import hyperscan_matcher  # noqa: E402
from corpus_audit.stages.select.scan import ScanOptions, plan_units, scan_unit  # noqa: E402

PARTS = (
    "raw scan",
    "read TEXT",
    "read TEXT+URL",
    "UTF-8 check",
    "hyperscan scan",
    "hyperscan find",
    "scan unit",
)


def _joined(text: pa.Array) -> memoryview:
    """The captions' bytes joined by NUL, as the hyperscan matcher scans them."""
    text = text.fill_null("")
    one = pa.ListArray.from_arrays(pa.array([0, len(text)], pa.int32()), text)
    return memoryview(pc.binary_join(one, "\x00").buffers()[2]).cast("B")


def cpu_ns(fn: Callable[[], object]) -> int:
    """CPU nanoseconds of ``fn()`` in this process."""
    c0 = time.process_time_ns()
    fn()
    return time.process_time_ns() - c0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(ap)
    ap.add_argument("--files", type=int, default=2, help="files measured (default 2)")
    ap.add_argument("--repeats", type=int, default=3, help="alternated rounds (default 3)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)

    paths = sorted(
        str(p) for p in corpus_dir(args.data_dir, args.rows, args.seed).glob("*.parquet")
    )
    paths = paths[: args.files]
    files = [CorpusFile(i, p, "parquet") for i, p in enumerate(paths)]
    matcher = build_matcher(load_occupations())
    hs = hyperscan_matcher(matcher)  # compiled here, outside the timings
    scratch = hyperscan.Scratch(hs.db)
    plan = plan_units(files)
    options = ScanOptions(matcher.pattern, True, 262_144, matcher, "hyperscan")
    opened = [pq.ParquetFile(p, memory_map=True) for p in paths]
    groups = [(pf, g) for pf in opened for g in range(pf.num_row_groups)]
    rows = sum(pf.metadata.row_group(g).num_rows for pf, g in groups)
    texts = [pf.read_row_group(g, columns=["TEXT"]).column(0).combine_chunks() for pf, g in groups]
    joined = [_joined(t) for t in texts]
    con = duckdb.connect(config={"threads": 1})

    def read(columns: list[str]) -> None:
        for pf, g in groups:
            pf.read_row_group(g, columns=columns, use_threads=False)

    runs: dict[str, Callable[[], object]] = {
        "raw scan": lambda: con.execute(
            "SELECT sum(length(TEXT)) FROM read_parquet(?)", [paths]
        ).fetchone(),
        "read TEXT": lambda: read(["TEXT"]),
        "read TEXT+URL": lambda: read(["TEXT", "URL"]),
        "UTF-8 check": lambda: [t.validate(full=True) for t in texts],
        "hyperscan scan": lambda: [hs.db.scan(j, scratch=scratch) for j in joined],
        "hyperscan find": lambda: [hs.find(t) for t in texts],
        "scan unit": lambda: [scan_unit(w, key[1], options) for key, w in plan.units],
    }
    for fn in runs.values():  # warm: page cache, first calls
        fn()
    best = {name: float("inf") for name in PARTS}
    for _ in range(args.repeats):
        for name in PARTS:
            best[name] = min(best[name], cpu_ns(runs[name]) / rows)

    raw = best["raw scan"]
    floor = best["read TEXT+URL"] + best["UTF-8 check"] + best["hyperscan scan"]
    print(
        f"{rows:,} rows in {len(groups)} row groups of {len(paths)} files; one thread, "
        f"CPU ns per row, best of {args.repeats} alternated rounds"
    )
    print(f"{'part':16s} {'ns/row':>8s} {'x raw scan':>11s}")
    for name in PARTS:
        print(f"{name:16s} {best[name]:>8.0f} {best[name] / raw:>11.2f}")
    print(
        f"floor (read TEXT+URL + UTF-8 check + hyperscan scan): {floor:.0f} ns/row = "
        f"{floor / raw:.2f}x the raw scan's CPU: the best select could reach is "
        f"{raw / floor:.2f}x the raw scan, before writing anything"
    )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ns_per_row": best, "floor": floor}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
