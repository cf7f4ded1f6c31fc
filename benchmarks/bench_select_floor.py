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

Last (``--pipeline-repeats 0`` leaves it out), the floor as a running pipeline over the whole
corpus, wall time on ``--threads`` threads, alternated with the raw DuckDB scan on as many
threads (best of ``--pipeline-repeats`` rounds each): every row group on a thread pool is read
(TEXT and URL), UTF-8 checked and scanned by Hyperscan's engine without a match handler (over
the caption bytes as they lie, not joined: cheaper than any exact matcher), and its matching
rows (taken from the real matcher before the timing starts) become caption rows that the main
thread inserts, as each row group comes back, into a ``captions`` table of the study's schema
in a DuckDB file, committed at the end. Nothing else of the stage runs (no mentions, no
samples, no match positions): the end-to-end "x raw scan" no ``select`` that stores its
captions in DuckDB can beat on this machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import hyperscan
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_select import add_corpus_arguments, corpus_dir  # noqa: E402

from corpus_audit.backends.corpus import CorpusFile  # noqa: E402
from corpus_audit.core.store import sql_text  # noqa: E402
from corpus_audit.methods.lexicon import load_occupations  # noqa: E402
from corpus_audit.methods.matching import build_matcher  # noqa: E402
from corpus_audit.methods.multimatch import HyperscanMatcher, hyperscan_matcher  # noqa: E402
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


_FLUSH_ROWS = 65_536  # rows gathered before one INSERT, as the stage does


class FloorPipeline:
    """The floor as a pipeline (module docstring): read, check, scan without a handler, and
    store the matching rows as captions, on ``threads`` threads; nothing else."""

    def __init__(self, paths: list[str], hs: HyperscanMatcher, threads: int) -> None:
        self.paths, self.hs, self.threads = paths, hs, threads
        self._local = threading.local()
        self.units: list[tuple[int, pq.ParquetFile, int, int]] = []  # file, its reader, group, row
        for fid, path in enumerate(paths):
            pf = pq.ParquetFile(path, memory_map=True)
            start = 0
            for g in range(pf.num_row_groups):
                self.units.append((fid, pf, g, start))
                start += pf.metadata.row_group(g).num_rows
        # the rows the real matcher keeps, found once, untimed: the captions to store
        self.keep = [
            hs.find(pf.read_row_group(g, columns=["TEXT"]).column(0).combine_chunks()).keep
            for _, pf, g, _ in self.units
        ]
        self.rows = sum(pf.metadata.row_group(g).num_rows for _, pf, g, _ in self.units)

    def _unit(self, i: int) -> pa.Table:
        fid, pf, g, start = self.units[i]
        table = pf.read_row_group(g, columns=["TEXT", "URL"], use_threads=False)
        text = table.column(0).combine_chunks()
        text.validate(full=True)
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self.hs.db)
        if text.buffers()[2] is not None:
            self.hs.db.scan(memoryview(text.buffers()[2]).cast("B"), scratch=scratch)
        keep = self.keep[i]
        at = pa.array(keep)
        return pa.table(
            {
                "caption_id": pa.array((fid << 40) + start + keep, pa.int64()),
                "text": text.take(at),
                "url": table.column(1).take(at),
                "source_file": pa.array([self.paths[fid]] * len(keep), pa.string()),
                "row_in_file": pa.array(start + keep, pa.int64()),
            }
        )

    def scan_only(self) -> int:
        """The same row groups read, checked and scanned, nothing stored; the caption rows
        made."""
        with ThreadPoolExecutor(self.threads) as pool:
            return sum(t.num_rows for t in pool.map(self._unit, range(len(self.units))))

    def run(self, db: Path) -> int:
        """Run once into a fresh DuckDB file ``db``; the caption rows stored."""
        con = duckdb.connect(str(db), config={"threads": self.threads, "memory_limit": "2GB"})
        try:
            con.execute(sql_text("schema/001_select.sql"))  # the study's captions table
            con.execute("BEGIN")
            pending: list[pa.Table] = []

            def flush() -> None:
                con.register("_batch", pa.concat_tables(pending))
                con.execute("INSERT INTO captions SELECT * FROM _batch")
                con.unregister("_batch")
                pending.clear()

            with ThreadPoolExecutor(self.threads) as pool:
                for table in pool.map(self._unit, range(len(self.units))):
                    pending.append(table)
                    if sum(t.num_rows for t in pending) >= _FLUSH_ROWS:
                        flush()
            if pending:
                flush()
            con.execute("COMMIT")
            return con.execute("SELECT count(*) FROM captions").fetchone()[0]
        finally:
            con.close()


def pipeline_floor(
    paths: list[str], hs: HyperscanMatcher, threads: int, repeats: int
) -> dict[str, float]:
    """Best wall seconds of the raw DuckDB scan, of :class:`FloorPipeline` without storing
    (``scan``) and with it (``pipeline``) over ``paths`` on ``threads`` threads, alternated
    ``repeats`` rounds; also the rows and captions."""
    pipe = FloorPipeline(paths, hs, threads)
    raw_con = duckdb.connect(config={"threads": threads})
    raw_q = "SELECT sum(length(TEXT)) FROM read_parquet(?)"
    raw_con.execute(raw_q, [paths]).fetchone()  # warm the page cache
    tmp = Path(tempfile.mkdtemp(prefix="bench_floor_"))
    best = {"raw": float("inf"), "scan": float("inf"), "pipeline": float("inf")}
    captions = 0
    try:
        for i in range(repeats):
            t0 = time.perf_counter()
            raw_con.execute(raw_q, [paths]).fetchone()
            best["raw"] = min(best["raw"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            pipe.scan_only()
            best["scan"] = min(best["scan"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            captions = pipe.run(tmp / f"floor{i}.duckdb")
            best["pipeline"] = min(best["pipeline"], time.perf_counter() - t0)
            (tmp / f"floor{i}.duckdb").unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {**best, "rows": pipe.rows, "captions": captions}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(ap)
    ap.add_argument("--files", type=int, default=2, help="files measured (default 2)")
    ap.add_argument("--repeats", type=int, default=3, help="alternated rounds (default 3)")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument("--threads", type=int, default=2, help="threads of the pipeline floor")
    ap.add_argument(
        "--pipeline-repeats",
        type=int,
        default=3,
        help="alternated rounds of the pipeline floor and the raw scan (0: skip)",
    )
    args = ap.parse_args(argv)

    every_path = sorted(
        str(p) for p in corpus_dir(args.data_dir, args.rows, args.seed).glob("*.parquet")
    )
    paths = every_path[: args.files]
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
    out: dict[str, object] = {"rows": rows, "ns_per_row": best, "floor": floor}
    if args.pipeline_repeats > 0:
        pipe = pipeline_floor(every_path, hs, args.threads, args.pipeline_repeats)
        n = pipe["rows"]
        print(
            f"pipeline floor over all {n:,} rows ({len(every_path)} files), {args.threads} "
            f"threads, wall time, best of {args.pipeline_repeats} alternated rounds:"
        )
        for key, label in (
            ("raw", "raw DuckDB scan of TEXT"),
            ("scan", "read TEXT+URL, UTF-8 check, engine scan"),
            ("pipeline", f"the same + {pipe['captions']:,} captions stored"),
        ):
            print(
                f"  {label:46s} {pipe[key]:6.2f} s {n / pipe[key] / 1e6:6.2f} M rows/s "
                f"{pipe['raw'] / pipe[key]:5.2f}x raw scan"
            )
        out["pipeline"] = {**pipe, "threads": args.threads}
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
