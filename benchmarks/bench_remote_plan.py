"""Seconds and requests ``select`` spends *planning* a corpus prefix of many small objects on
an S3-compatible server (issue 44, M12): listing the prefix, the files' fingerprints and each
file's units (its parquet footer), before any row is read.

Usage::

    python benchmarks/bench_remote_plan.py --objects 10000 [--upload-threads 32]

Starts moto's S3 server on 127.0.0.1 (a free port, its own process) behind a counting proxy
(``tests/backends/s3_server.FaultProxy``, no fault injected), uploads ``--objects`` parquet
files of two rows each under ``s3://plan/<n>/``, then times :func:`resolve_corpus`,
:func:`fingerprint_entry` for every file and :func:`plan_units`, and prints the seconds and
the requests the proxy saw (GETs: footers; the rest: listings and HEADs). Credentials are
test values set here for moto only.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "backends"))
from s3_server import FaultProxy, free_port  # noqa: E402


def main() -> None:
    import faulthandler

    faulthandler.dump_traceback_later(int(os.environ.get("BENCH_DUMP_S", "0")) or 10**6, exit=True)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--upload-threads", type=int, default=32)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench-secret")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from corpus_audit.backends import storage
    from corpus_audit.backends.corpus import fingerprint_entry, resolve_corpus
    from corpus_audit.stages.select.scan import plan_units

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        buf = io.BytesIO()
        pq.write_table(pa.table({"caption": ["a nurse at work", "a chef"], "url": ["u", "v"]}), buf)
        data = buf.getvalue()
        with FaultProxy(port) as proxy:
            options = storage.StoreOptions(proxy.url, retries=1)
            direct = storage.StoreOptions(f"http://127.0.0.1:{port}", retries=1)
            fs, _ = storage.filesystem("s3://plan", direct)  # uploads: not through the proxy
            fs.mkdir("plan")
            prefix = f"plan/{args.objects}"
            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.upload_threads) as pool:
                list(
                    pool.map(
                        lambda i: fs.pipe_file(f"{prefix}/part-{i:06d}.parquet", data),
                        range(args.objects),
                    )
                )
            upload = time.perf_counter() - t0
            storage.filesystem("s3://plan", options)[0].invalidate_cache()
            before, gets = proxy.faults.requests, proxy.faults.gets
            t0 = time.perf_counter()
            files = resolve_corpus([f"s3://{prefix}/"], store=options)
            t1 = time.perf_counter()
            for f in files:
                fingerprint_entry(f)
            t2 = time.perf_counter()
            plan = plan_units(files)
            t3 = time.perf_counter()
            requests = proxy.faults.requests - before
            footers = proxy.faults.gets - gets
        assert len(plan.units) == args.objects
        print(
            f"objects {args.objects}  upload {upload:.1f} s  |  plan: list {t1 - t0:.2f} s, "
            f"fingerprints {t2 - t1:.2f} s, units {t3 - t2:.2f} s, total {t3 - t0:.2f} s  |  "
            f"requests {requests} (GET {footers}, other {requests - footers}; "
            f"{requests / args.objects:.2f} per object)"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
