"""Rows/s of the ``select`` stage reading the same parquet corpus from a loopback object store
(S3 or GCS) and from the local files, in the same run (issue 35: aim >= 0.7x).

Usage::

    python benchmarks/bench_remote_scan.py --rows 2000000 [--store s3|gs] [--threads 2]
        [--repeats 2] [--matcher auto|duckdb|hyperscan]

Writes (once, cached under ``--data-dir``) a synthetic LAION-like corpus with
``benchmarks/synth_corpus.py``, starts the store's server on 127.0.0.1 (a free port, its own
process, pure Python: moto's S3 server for ``--store s3``, gcp-storage-emulator (objects in
memory) for ``--store gs``; on a small machine its CPU is taken from the scan, which flatters
the local side; a real store serves from other machines), uploads the files, then runs
``select`` end to end (reading, matching, writing, commit) on two studies that differ only
in ``corpus.paths``: the local files, and ``s3://bench/*.parquet`` (``gs://bench/...``) with
``storage.endpoint_url`` set (and ``storage.anonymous`` for gs: the emulator checks no
credentials). Each is run ``--repeats`` times (fresh study each time), alternating; the best
wall time counts. rows/s = corpus rows / wall seconds; the ratio is store / local. Both
studies' ``captions`` row counts are compared as a check. The server's CPU seconds during each
store run (psutil, the server process and its children) and this process's own during each
run are reported too: on a 2-core machine the server's come out of the scan's two cores,
which a real store's would not. ``--matcher`` is ``select.matcher``
of both studies (default auto: hyperscan when installed, matching inside each scan task); the
matcher that ran is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_select import corpus_dir  # noqa: E402

from corpus_audit.backends import storage  # noqa: E402
from corpus_audit.core.pipeline import init_study  # noqa: E402
from corpus_audit.stages.select import select  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(port: int, timeout_s: float = 30.0) -> None:
    """Until the server on ``port`` accepts connections (or ``timeout_s`` passed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"the store's server on 127.0.0.1:{port} did not start in {timeout_s} s")


# --store -> the command serving it on 127.0.0.1:<port>, and whether requests are unsigned
SERVERS = {
    "s3": (["-m", "moto.server", "-H", "127.0.0.1", "-p"], False),
    "gs": (
        ["-m", "gcp_storage_emulator", "start", "--no-store-on-disk", "-q", "--host", "127.0.0.1"]
        + ["--port"],
        True,
    ),
}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its children so far."""
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def _run(
    root: Path, corpus: str, storage_section: dict, threads: int, matcher: str = "auto"
) -> tuple[float, int, int, str]:
    study = init_study(
        root,
        [corpus],
        overrides={
            "engine": {"threads": threads},
            "storage": storage_section,
            "select": {"matcher": matcher},
        },
    )
    try:
        t0 = time.perf_counter()
        run = select(study, progress=False)
        seconds = time.perf_counter() - t0
        captions = study.count("captions")
        return seconds, int(run.rows_in), captions, str(run.provenance["matcher"])
    finally:
        study.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000, help="corpus rows (default 2 M)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--store", choices=sorted(SERVERS), default="s3", help="default s3")
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "ca_bench")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    ap.add_argument("--matcher", default="auto", choices=("auto", "duckdb", "hyperscan"))
    args = ap.parse_args(argv)

    os.environ["AWS_ACCESS_KEY_ID"] = f"AKIABENCH{secrets.token_hex(4).upper()}"
    os.environ["AWS_SECRET_ACCESS_KEY"] = secrets.token_hex(16)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    local = corpus_dir(args.data_dir, args.rows, args.seed)
    files = sorted(local.glob("*.parquet"))
    port = _free_port()
    command, anonymous = SERVERS[args.store]
    server = subprocess.Popen(
        [sys.executable, *command, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    store = args.store
    results: dict[str, list[float]] = {"local": [], store: []}
    server_cpu: list[float] = []  # the server's CPU seconds during each store run
    client_cpu: dict[str, list[float]] = {"local": [], store: []}  # this process's
    counts: dict[str, tuple[int, int]] = {}
    try:
        _wait_for(port)
        options = storage.StoreOptions(endpoint, anonymous=anonymous)
        fs, _ = storage.filesystem(f"{store}://bench", options)
        fs.mkdir("bench")
        for f in files:
            fs.put_file(str(f), f"bench/{f.name}")
        remote = {"endpoint_url": endpoint, "anonymous": anonymous}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                for name, corpus, section in (
                    ("local", str(local / "*.parquet"), {}),
                    (store, f"{store}://bench/*.parquet", remote),
                ):
                    cpu0, own0 = _cpu_seconds(server.pid), time.process_time()
                    seconds, rows, captions, ran = _run(
                        Path(tmp) / f"{name}{i}", corpus, section, args.threads, args.matcher
                    )
                    client_cpu[name].append(round(time.process_time() - own0, 2))
                    if name == store:
                        server_cpu.append(round(_cpu_seconds(server.pid) - cpu0, 2))
                    results[name].append(seconds)
                    counts[name] = (rows, captions)
                    print(f"{name:5s} run {i}: {rows:,} rows in {seconds:.2f} s", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    if counts["local"] != counts[store]:
        print(f"MISMATCH: local {counts['local']} vs {store} {counts[store]}", file=sys.stderr)
        return 1
    rows = counts["local"][0]
    out = {
        "store": store,
        "rows": rows,
        "files": len(files),
        "threads": args.threads,
        "matcher": ran,
        "local_rows_per_s": round(rows / min(results["local"])),
        f"{store}_rows_per_s": round(rows / min(results[store])),
    }
    out["ratio"] = round(out[f"{store}_rows_per_s"] / out["local_rows_per_s"], 3)
    out["server_cpu_seconds"] = server_cpu
    out["client_cpu_seconds"] = client_cpu
    out[f"{store}_seconds"] = [round(x, 2) for x in results[store]]
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
