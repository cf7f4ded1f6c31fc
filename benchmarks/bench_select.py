"""Throughput and peak memory of the ``select`` stage next to simpler designs, same process.

Usage::

    python benchmarks/bench_select.py --rows 10000000 [--threads 2] [--memory-limit 2GB]

Writes (once, cached under ``--data-dir``) a synthetic LAION-like corpus with
``benchmarks/synth_corpus.py``, then times on it, ``--repeats`` rounds alternating the first
three (best wall time of each counts; a shared machine's load falls on all three alike):

1. the raw DuckDB scan of the caption column (``read_parquet`` of ``TEXT``, every value's
   length summed: decoding, no matching): the physical limit the stage is compared with.
2. ``select`` stage with ``select.matcher = "duckdb"`` (pyarrow RE2 prefilter + DuckDB SQL
   extraction, the reference), end to end: reading, matching, writing
   captions/mentions/samples, commit.
3. ``select`` stage with ``select.matcher = "hyperscan"`` (one multi-pattern pass over each
   batch's bytes in the scan units), end to end. Its ``captions``, ``mentions`` and
   ``samples`` must equal (2)'s row for row (``Study.fingerprint``): checked.

Then once each (``--skip`` leaves them out):

4. ``select`` stage, duckdb matcher, ``select.prefilter = false`` (DuckDB SQL does every row).
5. one DuckDB query: a single regex alternation over ``read_parquet`` + ``regexp_extract_all``
   on the matching rows (the design of the first probe in ENGINEERING_NOTES).
6. the naive baseline: one DuckDB regex per occupation (62 queries), on the first
   ``--baseline-rows`` rows held in memory (it is too slow for the whole corpus; reading the
   parquet is not timed for it, which flatters it).

rows/s = corpus rows / wall seconds; "x raw" = rows/s over the raw scan's. Peak RSS is sampled
every 20 ms (psutil) during each run (one process: the RSS a run leaves behind counts in the
next one's), except for runs 2 and 3: each is run once more, untimed, in a process of its own
(imports, a new study, ``select``), whose own peak (``VmHWM``) is the one reported: the
memory a user's ``corpus-audit select`` needs, not what the runs before it left behind
(``peak_rss_mb_shared`` in the JSON keeps the sampled one). The per-occupation counts of (2)
and (6) on the baseline rows are compared as a check. Hyperscan's database is compiled in the
untimed warm-up (once per process, ~0.3 s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_corpus  # noqa: E402

from corpus_audit.core.pipeline import init_study  # noqa: E402
from corpus_audit.methods.lexicon import load_occupations  # noqa: E402
from corpus_audit.methods.matching import build_matcher, form_regex  # noqa: E402
from corpus_audit.stages.select import select  # noqa: E402


class PeakRss:
    """Peak resident memory of this process while the block runs (sampled)."""

    def __init__(self, every: float = 0.02):
        self.every, self.peak, self._stop = every, 0, threading.Event()

    def _run(self) -> None:
        proc = psutil.Process()
        while not self._stop.is_set():
            self.peak = max(self.peak, proc.memory_info().rss)
            self._stop.wait(self.every)

    def __enter__(self) -> PeakRss:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, psutil.Process().memory_info().rss)


def corpus_dir(data_dir: Path, rows: int, seed: int) -> Path:
    """The cached synthetic corpus for (rows, seed), written if missing."""
    out = data_dir / f"synth_{rows}_s{seed}"
    if not (out / ".complete").exists():
        files = min(64, max(2, rows // 1_250_000))
        print(f"writing a {rows:,}-row synthetic corpus in {files} files to {out} ...", flush=True)
        synth_corpus.write_corpus(out, rows, files=files, seed=seed, progress=True)
        (out / ".complete").write_text("ok\n")
    return out


def add_corpus_arguments(ap: argparse.ArgumentParser) -> None:
    """``--rows``, ``--seed`` and ``--data-dir``: which cached synthetic corpus a benchmark
    reads (:func:`corpus_dir`; shared by the select benchmarks)."""
    ap.add_argument("--rows", type=int, default=10_000_000, help="corpus rows (default 10 M)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic corpus")
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=Path(__file__).resolve().parent / "out" / "synth",
        help="where synthetic corpora are cached",
    )


def timed(fn):
    """(result, wall seconds, cpu seconds, peak rss bytes) of ``fn()``."""
    with PeakRss() as mem:
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return result, wall, cpu, mem.peak


def new_study(
    corpus: Path,
    root: Path,
    threads: int,
    memory_limit: str,
    prefilter: bool,
    matcher: str = "duckdb",
):
    """A fresh study on ``corpus`` (created outside the timed block)."""
    return init_study(
        root,
        [str(corpus)],
        overrides={
            "engine": {"threads": threads, "memory_limit": memory_limit},
            "select": {"prefilter": prefilter, "matcher": matcher},
        },
    )


def table_fingerprints(study) -> dict[str, object]:
    """Rows and order-free hash of the tables select writes."""
    return {t: study.fingerprint(t) for t in ("captions", "mentions", "samples")}


def mention_counts(study) -> dict[str, int]:
    return dict(
        study.con.execute("SELECT occupation, count(*) FROM mentions GROUP BY 1").fetchall()
    )


def own_process_peak_rss(
    corpus: Path, root: Path, threads: int, memory_limit: str, matcher: str
) -> int:
    """Peak RSS in bytes of one ``select`` (matcher ``matcher``) on a fresh study in a process
    of its own (this script with ``--rss-child``)."""
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(corpus), str(root), str(threads)]
        + [memory_limit, matcher],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.split()[-1])


def rss_child(argv: list[str]) -> int:
    """``--rss-child CORPUS ROOT THREADS MEMORY_LIMIT MATCHER``: run ``select`` once and print
    this process's peak RSS in bytes."""
    corpus, root, threads, memory_limit, matcher = argv
    study = new_study(Path(corpus), Path(root), int(threads), memory_limit, True, matcher)
    select(study, progress=False)
    study.close()
    print(_own_peak_rss())
    return 0


def _own_peak_rss() -> int:
    """This process's peak RSS in bytes: ``VmHWM`` of /proc/self/status (Linux; the
    high-water mark of this process's own address space), else ``ru_maxrss``, which
    Linux carries over from the parent across fork and exec (a child of a big benchmark
    process would report the parent's RSS)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--rss-child"]:
        return rss_child(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_arguments(ap)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory-limit", default="2GB", help="DuckDB memory_limit of the study")
    ap.add_argument(
        "--baseline-rows",
        type=int,
        default=200_000,
        help="rows the naive 62-regex baseline runs on (default 200 k)",
    )
    ap.add_argument("--skip", default="", help="comma list of runs to skip: sql_only,duckdb,naive")
    ap.add_argument(
        "--repeats", type=int, default=2, help="alternated rounds of runs 1-3 (best counts)"
    )
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    corpus = corpus_dir(args.data_dir, args.rows, args.seed)
    files = sorted(str(p) for p in corpus.glob("*.parquet"))
    matcher = build_matcher(load_occupations())
    results: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench_select_"))

    def record(name: str, rows: int, wall: float, cpu: float, peak: int, **extra) -> None:
        results.append(
            {
                "method": name,
                "rows": rows,
                "seconds": round(wall, 3),
                "cpu_seconds": round(cpu, 3),
                "rows_per_s": rows / wall,
                "peak_rss_mb": round(peak / 2**20),
                **extra,
            }
        )

    # warm-up on the bundled 10 k real captions (imports, first DuckDB/RE2 use): not recorded
    warm = init_study(tmp / "warm", [str(synth_corpus.VOCAB_SOURCE)])
    select(warm, progress=False)
    warm.close()

    con = duckdb.connect(config={"threads": args.threads, "memory_limit": args.memory_limit})
    raw_q = "SELECT sum(length(TEXT)) FROM read_parquet($files)"
    con.execute(raw_q, {"files": files}).fetchone()  # warm the page cache
    best: dict[str, tuple] = {}
    fps: dict[str, dict] = {}
    run = None
    for i in range(args.repeats):
        for name in ("raw", "duckdb", "hyperscan"):
            if name == "raw":
                out = timed(lambda: con.execute(raw_q, {"files": files}).fetchone())
            else:
                study = new_study(
                    corpus, tmp / f"{name}{i}", args.threads, args.memory_limit, True, name
                )
                out = timed(lambda study=study: select(study, progress=False))
                run = out[0]
                fps[name] = table_fingerprints(study)
                if name == "duckdb":
                    counts = mention_counts(study)
                    subset_counts = dict(
                        study.con.execute(
                            "SELECT occupation, count(*) FROM mentions WHERE caption_id >> 40 = 0 "
                            "AND (caption_id & ((1::BIGINT << 40) - 1)) < ? GROUP BY 1",
                            [args.baseline_rows],
                        ).fetchall()
                    )
                study.close()
                shutil.rmtree(tmp / f"{name}{i}", ignore_errors=True)
            print(f"round {i}: {name:9s} {out[1]:.2f} s", flush=True)
            if name not in best or out[1] < best[name][1]:
                best[name] = out
    rows = run.rows_in
    labels = {
        "raw": "raw DuckDB scan of the caption column",
        "duckdb": "select stage, matcher duckdb (RE2 + SQL)",
        "hyperscan": "select stage, matcher hyperscan",
    }
    for name in ("raw", "duckdb", "hyperscan"):
        res, wall, cpu, peak = best[name]
        extra = {}
        if name != "raw":
            extra = {
                "captions": res.rows_out,
                "seconds_by_step": res.provenance["seconds"],
                "peak_rss_mb_shared": round(peak / 2**20),
            }
            peak = own_process_peak_rss(
                corpus, tmp / f"rss_{name}", args.threads, args.memory_limit, name
            )
            shutil.rmtree(tmp / f"rss_{name}", ignore_errors=True)
        record(labels[name], rows, wall, cpu, peak, **extra)
    identical = fps["duckdb"] == fps["hyperscan"]

    # 2. the stage, SQL only
    if "sql_only" not in skip:
        study = new_study(
            corpus, tmp / "sql_only", args.threads, args.memory_limit, False, "duckdb"
        )
        run2, wall, cpu, peak = timed(lambda: select(study, progress=False))
        same = mention_counts(study) == counts
        study.close()
        record("select stage, prefilter off (SQL only)", rows, wall, cpu, peak, same_mentions=same)

    # 5. one DuckDB query with one alternation
    if "duckdb" not in skip:
        q = (
            "SELECT count(*) FROM (SELECT unnest(regexp_extract_all(TEXT, $p, 0, 'i')) "
            "FROM read_parquet($files) WHERE regexp_matches(TEXT, $p, 'i'))"
        )
        _, wall, cpu, peak = timed(
            lambda: con.execute(q, {"p": matcher.pattern, "files": files}).fetchone()
        )
        record("one DuckDB query, 1 regex alternation", rows, wall, cpu, peak)

    # 6. naive: one regex per occupation
    check = True
    n = args.baseline_rows
    if "naive" not in skip:
        con.execute(
            "CREATE TEMP TABLE sub AS SELECT TEXT FROM read_parquet($file, "
            "file_row_number = true) WHERE file_row_number < $n",
            {"file": files[0], "n": n},
        )
        n = con.execute("SELECT count(*) FROM sub").fetchone()[0]
        per_occ: dict[str, list[str]] = {}
        for form, occ in matcher.forms:
            per_occ.setdefault(occ, []).append(form)
        patterns = {
            occ: "(?:" + "|".join(form_regex(f) for f in forms) + ")"
            for occ, forms in per_occ.items()
        }

        def naive() -> dict[str, int]:
            out = {}
            for occ, p in patterns.items():
                c = con.execute(
                    "SELECT count(*) FROM sub WHERE regexp_matches(TEXT, $p, 'i')", {"p": p}
                ).fetchone()[0]
                if c:
                    out[occ] = c
            return out

        naive_counts, wall, cpu, peak = timed(naive)
        record(f"naive: {len(patterns)} regexes, 1 per occupation", n, wall, cpu, peak)
        check = naive_counts == subset_counts

    raw = results[0]["rows_per_s"]
    print()
    print(
        f"corpus: {rows:,} rows, {len(files)} parquet files, {run.rows_out:,} captions "
        f"mention an occupation; threads={args.threads}, memory_limit={args.memory_limit}, "
        f"{os.cpu_count()} CPUs, best of {args.repeats} alternated rounds for runs 1-3"
    )
    head = (
        f"{'method':44s} {'rows':>12s} {'seconds':>8s} {'M rows/s':>9s} {'x raw':>6s} "
        f"{'cpu s':>7s} {'peak RSS MB':>11s}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        r["x_raw_scan"] = r["rows_per_s"] / raw
        print(
            f"{r['method']:44s} {r['rows']:>12,} {r['seconds']:>8.2f} "
            f"{r['rows_per_s'] / 1e6:>9.2f} {r['x_raw_scan']:>6.2f} {r['cpu_seconds']:>7.2f} "
            f"{r['peak_rss_mb']:>11,}"
        )
    for r in results[1:3]:
        print(f"steps of '{r['method']}' (s): {r['seconds_by_step']}")
    print(
        "check: hyperscan and duckdb matchers give identical captions, mentions, samples: "
        f"{identical}"
    )
    if "naive" not in skip:
        print(
            f"check: naive and stage per-occupation counts on the first {n:,} rows "
            f"{'agree' if check else 'DIFFER'}"
        )
    sql_only = [r for r in results if "same_mentions" in r]
    if sql_only:
        print(f"check: prefilter on/off give the same mentions: {sql_only[0]['same_mentions']}")
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "rows": rows,
                    "threads": args.threads,
                    "repeats": args.repeats,
                    "results": results,
                    "check": check,
                    "identical": identical,
                },
                indent=2,
            )
        )
    return 0 if check and identical else 1


if __name__ == "__main__":
    sys.exit(main())
