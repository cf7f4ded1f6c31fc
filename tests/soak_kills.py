"""Kill soak: SIGKILL / SIGTERM `corpus-audit run` at random moments, then compare the tables.

Not collected by pytest (a few minutes); run it by hand after changing how a stage writes::

    .venv/bin/python tests/soak_kills.py [--kills 20] [--seed 0] [--term-every 3]
        [--corpus ../shared/data/laion400m_sample_10k.parquet ../shared/data/coco_val2017_captions.parquet]

What it does (docs/reliability.md, "How it is tested"):

1. a reference study runs `corpus-audit run --until analyze` once, uninterrupted (its time T,
   through the same driver as the killed runs);
2. a second study, with the same config, is run again and again, each run killed after a
   random delay in [0.2 s, T] (every ``--term-every``-th kill is a SIGTERM, the others SIGKILL),
   until ``--kills`` kills have landed; after each kill no process the run started may remain
   (NER workers, multiprocessing's resource tracker), and ``status`` must open the study;
3. the killed study is run to the end and every content table is compared with the reference,
   row for row (an md5 of the sorted rows; columns that hold the study's own path or a time
   are left out), and no stage may be left partial.

NER runs in worker processes even for small batches (the driver lowers the threshold), so the
kills also land while workers are busy. Exit status 1 when anything differs or leaked.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CORPUS_AUDIT_SHARED_DATA", REPO.parent / "shared" / "data"))
DRIVER = """
import sys
if __name__ == "__main__":
    import corpus_audit.methods.gender_text as gender_text
    from corpus_audit.cli import main
    gender_text.NER_PROCESS_MIN_TEXTS = 1
    sys.exit(main(sys.argv[1:]))
"""
# table -> columns compared (None: every column)
TABLES: dict[str, str | None] = {
    "corpus_files": None,
    "captions": None,
    "mentions": None,
    "prompts": None,
    "samples": None,
    "indicators": None,
    "indicator_triggers": None,
    "similarity_diagnostics": None,
    "neighbors_progress": "occupation, signature, n_captions, n_no_indicators, n_prompts, index_kind",
    "percent_female": None,
    "amplification": None,
    "amplification_summary": None,
    "indicator_match": None,
    "occupation_indicators": None,
    "indicator_correlation": None,
}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", *args],
        capture_output=True,
        text=True,
        env=env(),
        check=False,
    )


def init(root: Path, corpus: list[str]) -> None:
    proc = cli("init", str(root), "--corpus", *corpus, "--sample-size", "20")
    if proc.returncode:
        sys.exit(proc.stderr)
    text = (root / "study.toml").read_text().replace("batch_size = 10000", "batch_size = 20")
    (root / "study.toml").write_text(text)  # indicators: many small batches


def digests(root: Path) -> dict[str, str]:
    import duckdb

    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        out = {}
        for table, cols in TABLES.items():
            row = con.execute(
                f"SELECT count(*) || ':' || coalesce(md5(string_agg(r::VARCHAR, '|' "
                f"ORDER BY r::VARCHAR)), '-') FROM (SELECT {cols or '*'} FROM {table}) r"
            ).fetchone()
            out[table] = row[0]
        out["stage_unfinished"] = str(
            con.execute("SELECT count(*) FROM stage_unfinished").fetchone()[0]
        )
        return out
    finally:
        con.close()


def killed_run(root: Path, driver: Path, delay: float, sig: int) -> tuple[bool, list[str]]:
    """One run killed after ``delay`` s; returns (finished before the kill, leaked cmdlines)."""
    proc = subprocess.Popen(
        [sys.executable, str(driver), "-q", "run", str(root), "--until", "analyze"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env(),
        start_new_session=True,
    )
    ps = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            for child in ps.children(recursive=True):
                seen[child.pid] = child
        time.sleep(0.05)
    if proc.poll() is not None:
        return True, []
    proc.send_signal(sig)
    proc.wait(timeout=120)
    end = time.monotonic() + 15
    leaked = list(seen.values())
    while leaked and time.monotonic() < end:
        leaked = [p for p in leaked if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    names = [" ".join(p.cmdline())[:100] for p in leaked]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return False, names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--term-every", type=int, default=3, help="every n-th kill is a SIGTERM")
    ap.add_argument(
        "--corpus",
        nargs="+",
        default=[
            str(SHARED / "laion400m_sample_10k.parquet"),
            str(SHARED / "coco_val2017_captions.parquet"),
        ],
    )
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="soak_kills_"))
    driver = work / "drive.py"
    driver.write_text(DRIVER)

    reference = work / "reference"
    init(reference, args.corpus)
    t0 = time.monotonic()
    proc = subprocess.run(  # through the driver, as the killed runs go: the same timing
        [sys.executable, str(driver), "-q", "run", str(reference), "--until", "analyze"],
        capture_output=True,
        text=True,
        env=env(),
        check=False,
    )
    full = time.monotonic() - t0
    if proc.returncode:
        sys.exit(proc.stderr)
    want = digests(reference)
    print(f"reference run: {full:.1f} s; work in {work}", flush=True)

    failures = 0
    kills = rounds = 0
    while kills < args.kills:
        rounds += 1
        study = work / f"killed_{rounds}"
        init(study, args.corpus)
        round_kills = 0
        while kills < args.kills:
            sig = signal.SIGTERM if (kills + 1) % args.term_every == 0 else signal.SIGKILL
            delay = rng.uniform(0.2, full)
            finished, leaked = killed_run(study, driver, delay, sig)
            if finished:  # nothing left to kill in this study: compare it and start another
                break
            round_kills += 1
            kills += 1
            state = cli("status", str(study))
            partial = [r.split()[0] for r in state.stdout.splitlines() if "  partial" in r]
            line = (
                f"kill {kills:3d}: {signal.Signals(sig).name:7s} after {delay:5.1f} s; "
                f"partial: {', '.join(partial) or '-'}"
            )
            if state.returncode or leaked:
                failures += 1
                line += f"  FAILED status={state.returncode} leaked={leaked}"
            print(line, flush=True)
        if not round_kills:  # finished before its first kill: nothing to check
            shutil.rmtree(study, ignore_errors=True)
            continue
        proc = cli("-q", "run", str(study), "--until", "analyze")
        got = digests(study) if proc.returncode == 0 else {}
        diff = [t for t in want if got.get(t) != want[t]]
        print(
            f"study {rounds}: {round_kills} kills, final run exit {proc.returncode}; "
            f"tables differing from the reference: {diff or 'none'}",
            flush=True,
        )
        failures += bool(diff) or proc.returncode != 0
    print(f"{kills} kills: {'OK' if not failures else f'{failures} FAILURES'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
