"""Corpora over plain HTTP(S) (fsspec's HTTP file system): a loopback server that honours
``Range`` (``http_range_server.py``) serves the real LAION sample. ``select`` over its URL
writes the same tables as over the local file, every GET being a range request; a refused
connection reads as "cannot connect to", not as a missing object."""

from __future__ import annotations

import shutil

import pytest
from http_range_server import RangeServer
from s3_server import free_port
from test_storage import _study, _tables

from corpus_audit.backends.corpus import read_file, resolve_corpus
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.errors import CorpusError

pytest.importorskip("aiohttp")
NAME = "laion400m_sample_10k.parquet"


def test_select_over_http_range_requests_equals_local(make_study, laion_path, tmp_path):
    from corpus_audit.stages.select import select

    served = tmp_path / "www"
    served.mkdir()
    shutil.copy(laion_path, served / NAME)
    with RangeServer(served) as server:
        here = _study(make_study, [str(served / NAME)], "here")
        there = _study(make_study, [f"{server.url}/{NAME}"], "there")
        for study in (here, there):
            assert select(study, progress=False).rows_in == 10_000
        a = _tables(here, f"{served}/")
        b = _tables(there, f"{server.url}/")
        assert a["captions"] and [n for n in a if a[n] != b[n]] == []
        gets = [r for r in server.served.requests if r[0] == "GET"]
        assert gets and all(rng and status == 206 for _, _, rng, status, _ in gets)
        sent = sum(r[4] for r in gets)
        assert sent <= 2 * (served / NAME).stat().st_size  # no whole-file re-reads
        assert select(there, progress=False).skipped  # same ETag and size: up to date


def test_refused_connection_is_cannot_connect(laion_path, tmp_path, monkeypatch):
    port = free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}/{NAME}"
    with pytest.raises(CorpusError) as err:
        resolve_corpus([url])
    message = str(err.value)
    assert message.startswith(f"{url}: cannot connect to http://127.0.0.1:{port} (")
    assert "no such object" not in message and "\n" not in message
    pytest.importorskip("s3fs")  # an S3 endpoint that refuses: botocore's own error class
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATESTREFUSED")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "refused-secret-value")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    refusing = StoreOptions(f"http://127.0.0.1:{port}", retries=0)
    with pytest.raises(CorpusError) as err:
        resolve_corpus(["s3://b/x.parquet"], store=refusing)
    assert str(err.value).startswith(
        f"s3://b/x.parquet: cannot connect to http://127.0.0.1:{port} ("
    )
    served = tmp_path / "www"
    served.mkdir()
    shutil.copy(laion_path, served / NAME)
    with RangeServer(served) as server:  # a server that answers 404 is a missing object
        with pytest.raises(CorpusError, match=r"/nope.parquet: cannot list \(no such object"):
            resolve_corpus([f"{server.url}/nope.parquet"])
        (f,) = resolve_corpus([f"{server.url}/{NAME}"])
        assert sum(b.rows for b in read_file(f)) == 10_000


def test_select_over_https_equals_local(make_study, laion_path, tmp_path):
    """The same over HTTPS: the server's certificate is signed by a test CA that the
    ``corpus-audit select`` process trusts through ``SSL_CERT_FILE`` (its own environment,
    as a real deployment trusts its CAs); nothing is verified less than usual."""
    import os
    import subprocess
    import sys

    from http_range_server import make_certificates

    from corpus_audit.core.store import Study
    from corpus_audit.stages.select import select

    pytest.importorskip("cryptography")
    served = tmp_path / "www"
    served.mkdir()
    shutil.copy(laion_path, served / NAME)
    ca, cert, key = make_certificates(tmp_path)
    here = _study(make_study, [str(served / NAME)], "here")
    select(here, progress=False)
    with RangeServer(served, tls=(cert, key)) as server:
        assert server.url.startswith("https://")
        there = _study(make_study, [f"{server.url}/{NAME}"], "there")
        root = there.root
        there.close()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SSL_CERT_FILE": str(ca)}
        done = subprocess.run(
            [sys.executable, "-m", "corpus_audit.cli", "-q", "select", str(root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        gets = [r for r in server.served.requests if r[0] == "GET"]
        assert gets and all(rng and status == 206 for _, _, rng, status, _ in gets)
        # without the CA the certificate is refused: one line naming the URL and why
        env.pop("SSL_CERT_FILE")
        refused = subprocess.run(
            [sys.executable, "-m", "corpus_audit.cli", "-q", "select", str(root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    with Study.open(root) as again:
        a = _tables(here, f"{served}/")
        b = _tables(again, f"{server.url}/")
        assert a["captions"] and [n for n in a if a[n] != b[n]] == []
    lines = (refused.stdout + refused.stderr).strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: {server.url}/{NAME}: cannot connect to {server.url} (")
    assert "CERTIFICATE_VERIFY_FAILED" in lines[0]
