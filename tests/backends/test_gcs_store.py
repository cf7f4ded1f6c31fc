"""``gs://`` corpora and images against a REAL GCS-compatible server: gcp-storage-emulator (its
own process on 127.0.0.1, a free port, started and stopped here) reached through the study's
``storage.endpoint_url``, unsigned (``storage.anonymous``). The checks are those of the S3
tests (``test_storage``'s helpers): ``select`` + ``indicators`` over ``gs://corpora/*.parquet``
equal the same study over the local files, table by table; a changed object makes ``select``
stale (its generation, ETag and size); a missing object or bucket, a denied object: one line
naming the URL, exit 2, the study unchanged; image shards on ``gs://`` equal local ones.
What the emulator does not exercise: Google's authentication and gcsfs's gRPC paths (zonal /
hierarchical buckets).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_storage import (
    BUCKET,
    CORPORA,
    _cli_select,
    _study,
    _tables,
    changed_object_makes_select_stale,
    images_equal_local,
    select_and_indicators_equal_local,
)

from corpus_audit.backends import storage

ROOT = f"gs://{BUCKET}"


@pytest.fixture(scope="module")
def gcs(shared_data: Path, tmp_path_factory):
    """The emulator with the real corpora uploaded; no Google credentials in the environment
    (the requests are unsigned, as for a public bucket)."""
    pytest.importorskip("gcp_storage_emulator")
    pytest.importorskip("gcsfs")
    from gcs_server import GcsEmulator

    mp = pytest.MonkeyPatch()
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST"):
        mp.delenv(name, raising=False)
    log = tmp_path_factory.mktemp("gcs") / "emulator.log"
    with GcsEmulator(str(log)) as server:
        fs = storage.filesystem(ROOT, storage.StoreOptions(server.url, anonymous=True))[0]
        fs.mkdir(BUCKET)
        for name in CORPORA:
            fs.put_file(str(shared_data / name), f"{BUCKET}/{name}")
        yield server
    mp.undo()


def test_the_endpoint_gets_gcsfs_json_api_client(gcs, monkeypatch) -> None:
    """With an endpoint (the study's, or gcsfs's own ``STORAGE_EMULATOR_HOST``), gcsfs's plain
    JSON-API file system (not its gRPC-probing default, which waits 60 s per bucket on a
    server that has no gRPC), unsigned when anonymous; an object's identity holds the store's
    generation, ETag and size."""
    from gcsfs.core import GCSFileSystem

    url = f"{ROOT}/{CORPORA[0]}"
    options = storage.StoreOptions(gcs.url, anonymous=True)
    fs, path = storage.filesystem(url, options)
    assert type(fs) is GCSFileSystem and path == f"{BUCKET}/{CORPORA[0]}"
    assert fs._location == gcs.url and fs.credentials.token == "anon"
    ident = storage.identity(storage.bind(url, options))
    assert ident["size"] > 0 and {"generation", "etag"} <= set(ident)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.url.removeprefix("http://"))
    anonymous = storage.StoreOptions(anonymous=True, retries=2)  # no endpoint_url
    fs = storage.filesystem(url, anonymous)[0]
    assert type(fs) is GCSFileSystem and fs._location == gcs.url
    assert storage.identity(url, anonymous) == ident


def test_503s_are_retried(gcs, make_study) -> None:
    """gcsfs retries a 503 itself (its own fixed schedule: 6 attempts, 1 s, 2 s, ... of
    backoff; ``storage.retries`` does not change it), then the scan goes on."""
    from s3_server import FaultProxy

    from corpus_audit.stages.select import select

    with FaultProxy(gcs.port) as proxy:
        proxy.faults.slow_down = 2
        url = f"{ROOT}/{CORPORA[1]}"
        study = _study(make_study, [url], "r", proxy.url, anonymous=True)
        run = select(study, progress=False)
        assert proxy.faults.served_503 == 2 and run.rows_in > 0


def test_select_and_indicators_over_gs_equal_local(gcs, make_study, shared_data, tmp_path):
    select_and_indicators_equal_local(
        make_study, shared_data, tmp_path, ROOT, gcs.url, anonymous=True
    )


def test_changed_object_makes_select_stale(gcs, make_study, laion_path):
    url = f"{ROOT}/changing/laion.parquet"
    changed_object_makes_select_stale(make_study, laion_path, url, gcs.url, anonymous=True)


def test_missing_object_bucket_and_denied_object_exit_2_study_unchanged(gcs, make_study, capsys):
    from s3_server import FaultProxy

    from corpus_audit.core.store import Study
    from corpus_audit.stages.select import select

    with FaultProxy(gcs.port) as proxy:
        study = _study(make_study, [f"{ROOT}/{CORPORA[0]}"], "f", proxy.url, anonymous=True)
        select(study, progress=False)
        before = _tables(study)
        root = study.root
        study.close()
        toml = root / "study.toml"
        text = toml.read_text()
        for wrong in (f"{ROOT}/missing.parquet", "gs://no-such-bucket/x.parquet"):
            toml.write_text(text.replace(f"{ROOT}/{CORPORA[0]}", wrong))
            code, out = _cli_select(root, capsys)
            assert code == 2
            assert out.strip().splitlines() == [
                f"error: {wrong}: cannot list (no such object or bucket)"
            ]
        toml.write_text(text)
        proxy.faults.deny = "laion400m"  # the store answers 403 Forbidden for this object
        code, out = _cli_select(root, capsys)
        assert code == 2 and len(out.strip().splitlines()) == 1
        assert f"{ROOT}/{CORPORA[0]}" in out and "access denied" in out
        with Study.open(root) as reopened:
            assert _tables(reopened) == before


def test_an_error_gcsfs_logs_is_still_one_line_in_a_fresh_process(gcs, make_study) -> None:
    """gcsfs logs a request it gives up on (``logger.exception``: a traceback); in a process
    that configured no logging (the CLI) that must not reach stderr beside the one-line
    error. A fresh process, since pytest's own log handlers hide what Python's last-resort
    handler would print."""
    import os
    import subprocess
    import sys

    from s3_server import FaultProxy

    url = f"{ROOT}/{CORPORA[0]}"
    with FaultProxy(gcs.port) as proxy:
        proxy.faults.reject = "laion400m"  # a 400 gcsfs does not retry, but logs
        study = _study(make_study, [url], "bad", proxy.url, anonymous=True)
        root = study.root
        study.close()
        proc = subprocess.run(
            [sys.executable, "-m", "corpus_audit.cli", "-q", "select", str(root)],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1, lines[:5]
    assert lines[0].startswith(f"error: {url}: cannot list (HttpError: ") and "400" in lines[0]


def test_images_from_shards_and_parquet_on_gs_equal_local(gcs, make_study, laion_path, tmp_path):
    images_equal_local(make_study, laion_path, tmp_path, ROOT, gcs.url, anonymous=True)
