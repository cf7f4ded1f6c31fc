"""Corpora read from object stores (:mod:`corpus_audit.backends.storage`).

Fast unit tests use fsspec's ``memory://`` store; the rest run against a REAL S3-compatible
server (moto's server mode on 127.0.0.1, a free port, started and stopped here) holding the
real corpora of ``../shared/data``: ``select`` + ``indicators`` over ``s3://bucket/*.parquet``
equal the same study over the local files, table by table; faults (missing object, denied
access, 503s retried, a changed object) and the credentials never reaching the study.
"""

from __future__ import annotations

import datetime
import importlib.util
import secrets
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_audit.backends import storage
from corpus_audit.backends.corpus import fingerprint_entry, read_file, resolve_corpus
from corpus_audit.core.errors import CorpusError

BUCKET = "corpora"
CORPORA = ("laion400m_sample_10k.parquet", "coco_val2017_captions.parquet")  # ../shared/data


# -- memory:// (fast) -------------------------------------------------------------------------
@pytest.fixture
def memory_corpus(laion_path: Path):
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/t{secrets.token_hex(4)}"
    fs.pipe(f"{root}/laion.parquet", laion_path.read_bytes())
    fs.pipe(f"{root}/sub/extra.csv", b"caption,url\na nurse at work,http://x/1\n,http://x/2\n")
    fs.pipe(f"{root}/README", b"not a corpus file")
    fs.pipe(f"{root}/_hidden/skip.csv", b"caption\nnever read\n")
    yield f"memory://{root.lstrip('/')}"
    fs.rm(root, recursive=True)


def test_memory_prefix_glob_and_rows(memory_corpus: str, laion_path: Path) -> None:
    files = resolve_corpus([f"{memory_corpus}/"])
    assert [(f.path, f.format) for f in files] == [
        (f"{memory_corpus}/laion.parquet", "parquet"),
        (f"{memory_corpus}/sub/extra.csv", "csv"),
    ]
    assert [f.path for f in resolve_corpus([f"{memory_corpus}/*.parquet"])] == [files[0].path]
    remote = pa.concat_tables(b.table for b in read_file(files[0]))
    local = pa.concat_tables(b.table for b in read_file(resolve_corpus([str(laion_path)])[0]))
    assert remote.equals(local)  # same rows, same numbers, same cleaning
    csv_rows = list(read_file(files[1]))
    assert sum(b.rows for b in csv_rows) == 2 and sum(b.null_text for b in csv_rows) == 1


def test_memory_identity_changes_with_the_object(memory_corpus: str) -> None:
    import fsspec

    (f,) = resolve_corpus([f"{memory_corpus}/sub/extra.csv"])
    before = fingerprint_entry(f)
    assert before["object"]["size"] == 51 and "mtime" not in before["object"]
    fsspec.filesystem("memory").pipe(
        f"/{memory_corpus.split('://')[1]}/sub/extra.csv", b"caption\nanother\n"
    )
    assert fingerprint_entry(f) != before


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("memory://nowhere/*.parquet", "memory://nowhere/*.parquet: the glob matches no object"),
        ("memory://nowhere/x.parquet", "memory://nowhere/x.parquet: cannot list (no such object"),
        ("ftp2://host/x.parquet", "unknown store 'ftp2://'"),
        # HF_HUB_OFFLINE=1 (conftest): the Hub is not asked, its local cache is, and says so
        ("hf://datasets/org/name/*.parquet", "org/name is not in the local Hub cache"),
    ],
)
def test_memory_errors_name_the_url(spec: str, message: str) -> None:
    with pytest.raises(CorpusError, match=None) as err:
        resolve_corpus([spec])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_file_urls_and_plain_paths_are_local(laion_path: Path) -> None:
    (a,) = resolve_corpus([f"file://{laion_path}"])
    (b,) = resolve_corpus([str(laion_path)])
    assert a == b and a.store is None


def test_credentials_are_redacted(monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-xyz")
    err = storage.store_error("s3://b/k", OSError("signature s3cr3t-value-xyz mismatch"))
    assert "s3cr3t" not in str(err) and str(err).startswith("s3://b/k: cannot read")


# -- a real S3-compatible server ----------------------------------------------------------------
@pytest.fixture(scope="module")
def s3(shared_data: Path):
    """moto's S3 server on 127.0.0.1 with the real corpora uploaded; test credentials (unique
    values, searched for later) in the environment only, as a store's SDK reads them."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    from s3_server import MotoServer

    mp = pytest.MonkeyPatch()
    creds = {
        "AWS_ACCESS_KEY_ID": f"AKIATEST{secrets.token_hex(6).upper()}",
        "AWS_SECRET_ACCESS_KEY": f"secret-{secrets.token_hex(12)}",
    }
    for k, v in creds.items():
        mp.setenv(k, v)
    mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
    mp.delenv("AWS_PROFILE", raising=False)
    mp.delenv("AWS_ENDPOINT_URL", raising=False)
    with MotoServer() as server:
        fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
        if not fs.exists(BUCKET):  # moto's objects are per process: another module's server
            fs.mkdir(BUCKET)
        for name in CORPORA:
            fs.put_file(str(shared_data / name), f"{BUCKET}/{name}")
        yield server, creds
    mp.undo()


def _study(
    make_study,
    corpus: list[str],
    name: str,
    endpoint: str = "",
    retries: int = 3,
    anonymous: bool = False,
    matcher: str = "auto",
    **over,
):
    return make_study(
        corpus,
        name=name,
        select={"sample_size": 20, "matcher": matcher},
        study={"seed": 5},
        storage={"endpoint_url": endpoint, "retries": retries, "anonymous": anonymous},
        **over,
    )


def _tables(study, *prefixes: str) -> dict[str, list[tuple]]:
    """Every table of the study but the run log, rows sorted, with the corpus location
    (local folder or ``s3://bucket/``) cut from every string and timestamps blanked."""
    names = [
        r[0]
        for r in study.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "AND table_type = 'BASE TABLE' ORDER BY 1"
        ).fetchall()
    ]
    out = {}
    for name in names:
        if name in ("stage_runs", "schema_version") or name.startswith("_"):
            continue  # the run log and migration times
        # select's fingerprint hashes the corpus paths (where the files lie): path-derived
        cut = " EXCLUDE (select_fingerprint)" if name == "indicator_settings" else ""
        rows = study.con.execute(f'SELECT *{cut} FROM "{name}"').fetchall()  # DuckDB's names

        def norm(v):
            if isinstance(v, datetime.datetime):
                return None  # when a row was written
            if isinstance(v, str):
                for p in prefixes:
                    v = v.replace(p, "")
            return v

        out[name] = sorted((tuple(norm(v) for v in r) for r in rows), key=repr)
    return out


def select_and_indicators_equal_local(
    make_study, shared_data: Path, tmp_path: Path, root: str, endpoint: str, **storage_over
):
    """``select`` + ``indicators`` over the real :data:`CORPORA` copied to a local folder
    and over ``<root>/*.parquet`` (``root``: ``s3://corpora`` on a store holding them, reached
    at ``endpoint``): every table equal but for the location. Returns the store's study."""
    from corpus_audit.stages.indicators import indicators
    from corpus_audit.stages.select import select

    local_dir = tmp_path / "local"
    local_dir.mkdir()
    for name in CORPORA:
        shutil.copy(shared_data / name, local_dir / name)
    over = {"indicators": {"use_names": False}, **storage_over}
    here = _study(make_study, [str(local_dir / "*.parquet")], "here", **over)
    there = _study(make_study, [f"{root}/*.parquet"], "there", endpoint, **over)
    for study in (here, there):
        run = select(study, progress=False)
        assert run.rows_in == 35_014
        indicators(study, progress=False)
    a = _tables(here, f"{local_dir}/")
    b = _tables(there, f"{root}/")
    assert set(a) == set(b) and {"captions", "mentions", "samples", "indicators"} <= set(a)
    assert len(a["indicators"]) > 200 and len(a["samples"]) > 100
    assert [n for n in a if a[n] != b[n]] == []
    paths = [r[0] for r in there.con.execute("SELECT path FROM corpus_files ORDER BY 1").fetchall()]
    assert paths == [f"{root}/{name}" for name in sorted(CORPORA)]
    return there


def test_select_and_indicators_over_s3_equal_local(s3, make_study, shared_data, tmp_path):
    server, creds = s3
    there = select_and_indicators_equal_local(
        make_study, shared_data, tmp_path, f"s3://{BUCKET}", server.url
    )
    # the credentials the store read from the environment are nowhere in the study, its
    # rendered report (HTML, figures) included
    from corpus_audit.report import report

    page = Path(report(there, progress=False).outputs["report"])
    assert page.is_file() and f"s3://{BUCKET}/" in page.read_text(encoding="utf-8")
    there.con.execute("CHECKPOINT")
    files = [p for p in there.root.rglob("*") if p.is_file()]
    assert any(p.parent.name == "report" for p in files)
    blobs = [p.read_bytes() for p in files]
    for value in creds.values():
        assert not any(value.encode() in blob for blob in blobs)


def changed_object_makes_select_stale(
    make_study, laion_path: Path, url: str, endpoint: str, **storage_over
) -> None:
    """``select`` over the object ``url`` (written from ``laion_path``) is skipped when run
    again, and runs again once the object is rewritten (its size, ETag / generation change)."""
    from corpus_audit.stages.select import select

    options = storage.StoreOptions(endpoint, retries=1, **storage_over)
    fs, path = storage.filesystem(url, options)
    fs.put_file(str(laion_path), path)
    study = _study(make_study, [url], "stale", endpoint, **storage_over)
    first = select(study, progress=False)
    assert not first.skipped and select(study, progress=False).skipped  # same object: skipped
    table = pq.read_table(laion_path).slice(0, 5000)  # a new version of the object
    with fs.open(path, "wb") as fh:
        pq.write_table(table, fh)
    again = select(study, progress=False)
    assert not again.skipped and again.rows_in == 5000


def test_changed_object_makes_select_stale(s3, make_study, laion_path):
    server, _ = s3
    url = f"s3://{BUCKET}/changing/laion.parquet"
    changed_object_makes_select_stale(make_study, laion_path, url, server.url)


def _cli_select(root: Path, capsys) -> tuple[int, str]:
    from corpus_audit.cli import main

    capsys.readouterr()
    code = main(["select", str(root), "-q"])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_missing_object_and_denied_access_exit_2_study_unchanged(s3, make_study, capsys):
    from s3_server import FaultProxy

    from corpus_audit.stages.select import select

    server, creds = s3
    with FaultProxy(server.port) as proxy:
        study = _study(make_study, [f"s3://{BUCKET}/laion400m_sample_10k.parquet"], "f", proxy.url)
        select(study, progress=False)
        before = _tables(study)
        root = study.root
        study.close()
        toml = root / "study.toml"
        text = toml.read_text()
        toml.write_text(text.replace("laion400m_sample_10k.parquet", "missing.parquet"))
        code, out = _cli_select(root, capsys)
        assert code == 2
        assert out.strip().splitlines() == [
            f"error: s3://{BUCKET}/missing.parquet: cannot list (no such object or bucket)"
        ]
        toml.write_text(text)
        proxy.faults.deny = "laion400m"
        code, out = _cli_select(root, capsys)
        assert code == 2 and len(out.strip().splitlines()) == 1
        assert f"s3://{BUCKET}/laion400m_sample_10k.parquet" in out and "access denied" in out
        assert not any(v in out for v in creds.values())
        from corpus_audit.core.store import Study

        with Study.open(root) as reopened:
            assert _tables(reopened) == before


def test_503s_are_retried_with_backoff(s3, make_study):
    from s3_server import FaultProxy

    from corpus_audit.stages.select import select

    server, _ = s3
    with FaultProxy(server.port) as proxy:
        proxy.faults.slow_down = 3
        study = _study(make_study, [f"s3://{BUCKET}/coco_val2017_captions.parquet"], "r", proxy.url)
        run = select(study, progress=False)
        assert proxy.faults.served_503 == 3 and run.rows_in > 0
        proxy.faults.slow_down = 10_000  # a store that never recovers: bounded, then an error
        fresh = _study(
            make_study, [f"s3://{BUCKET}/laion400m_sample_10k.parquet"], "r2", proxy.url, 1
        )
        served = proxy.faults.served_503
        with pytest.raises(CorpusError, match=r"s3://corpora/laion400m_sample_10k.parquet"):
            select(fresh, progress=False)
        assert 2 <= proxy.faults.served_503 - served <= 8  # retries happen and are bounded


def test_ray_scan_tasks_read_the_store_themselves(s3, make_study, laion_path, monkeypatch):
    """On the Ray engine every scan unit (a row group) is read by a Ray worker process from
    the store; the tables equal the local engine's over the local file."""
    pytest.importorskip("ray")
    from corpus_audit.stages.select import scan as scan_mod
    from corpus_audit.stages.select import select

    server, _ = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    table = pq.read_table(laion_path)
    with fs.open(f"{BUCKET}/groups/laion400m_sample_10k.parquet", "wb") as fh:
        pq.write_table(table, fh, row_group_size=2500)  # 4 units
    local = laion_path.parent / "laion400m_sample_10k.parquet"
    # the reference: local files, the DuckDB matcher; over S3 on Ray, the multi-pattern
    # matcher when installed (inside each scan task): the same tables either way
    here = _study(make_study, [str(local)], "ray_here", matcher="duckdb")
    there = _study(
        make_study,
        [f"s3://{BUCKET}/groups/laion400m_sample_10k.parquet"],
        "ray_there",
        server.url,
        engine={"engine": "ray", "threads": 2},
    )
    workers: list[str] = []
    real = scan_mod.scan_into

    def spy(*args, **kwargs):
        kwargs["on_unit"] = lambda key, unit: workers.append(unit.worker)
        return real(*args, **kwargs)

    monkeypatch.setattr(scan_mod, "scan_into", spy)
    select(here, progress=False)
    driver = set(workers)
    workers.clear()
    select(there, progress=False)
    assert len(workers) == 4 and not set(workers) & driver  # Ray processes, not this one
    ran = there.con.execute(
        "SELECT provenance->>'matcher' FROM stage_runs WHERE stage = 'select'"
    ).fetchone()[0]
    assert ran == ("hyperscan" if importlib.util.find_spec("hyperscan") else "duckdb")
    a = _tables(here, f"{local.resolve().parent}/")
    b = _tables(there, f"s3://{BUCKET}/groups/")
    assert [n for n in a if a[n] != b[n]] == []


def test_kill_9_mid_scan_then_rerun_gives_identical_tables(s3, make_study, tmp_path):
    """A ``corpus-audit select`` process killed (SIGKILL) while it reads the store leaves the
    study as it was; the rerun writes the same tables as an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from s3_server import FaultProxy

    from corpus_audit.core.store import Study
    from corpus_audit.stages.select import select

    server, _ = s3
    corpus = [f"s3://{BUCKET}/*.parquet"]
    reference = _study(make_study, corpus, "reference", server.url)
    select(reference, progress=False)
    with FaultProxy(server.port) as proxy:
        study = _study(make_study, corpus, "killed", proxy.url)
        root = study.root
        study.close()
        proxy.faults.delay_s = 0.5  # a slow store: the scan is surely under way when killed
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "corpus_audit.cli", "-q", "select", str(root)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while proxy.faults.gets < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None and proxy.faults.gets >= 3  # reading the objects
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        proxy.faults.delay_s = 0.0
        with Study.open(root) as again:
            assert again.last_run("select") is None
            run = select(again, progress=False)
            assert not run.skipped
            assert _tables(again) == _tables(reference)


def test_truncated_object_is_one_line_naming_the_url(s3, make_study, laion_path):
    from corpus_audit.stages.select import select

    server, _ = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    data = laion_path.read_bytes()
    fs.pipe(f"{BUCKET}/cut/laion.parquet", data[: len(data) // 2])
    study = _study(make_study, [f"s3://{BUCKET}/cut/laion.parquet"], "cut", server.url)
    with pytest.raises(CorpusError) as err:
        select(study, progress=False)
    message = str(err.value)
    assert message.startswith(f"s3://{BUCKET}/cut/laion.parquet: not a readable parquet file")
    assert "\n" not in message and study.last_run("select") is None


def images_equal_local(
    make_study, laion_path: Path, tmp_path: Path, root: str, endpoint: str, **storage_over
):
    """img2dataset output (webdataset shards + ``*_stats.json``) and a parquet with image
    bytes, on disk and uploaded under ``root`` (``s3://corpora``, a store reached at
    ``endpoint``): the ``images`` stage registers the same images (same bytes) and the same
    download stats; finished shards are not read again. Returns the two studies."""
    import io
    import json
    import tarfile

    from image_fixtures import encode, photo, seed_captions

    from corpus_audit.stages.images import images

    options = storage.StoreOptions(endpoint, retries=1, **storage_over)
    fs, base = storage.filesystem(root, options)
    here = _study(make_study, [str(laion_path)], "img_here")
    there = _study(make_study, [str(laion_path)], "img_there", endpoint, **storage_over)
    seeded = seed_captions(here, laion_path, n=8)
    assert seed_captions(there, laion_path, n=8) == seeded
    local = tmp_path / "i2d"
    local.mkdir()
    with tarfile.open(local / "00000.tar", "w") as tar:
        for i, (_cid, url, _) in enumerate(seeded[:4]):
            for ext, blob in (
                (".jpg", encode(photo(("astronaut", "camera", "grace")[i % 3]), "JPEG")),
                (".json", json.dumps({"url": url, "key": f"{i:09d}"}).encode()),
            ):
                info = tarfile.TarInfo(f"{i:09d}{ext}")
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    stats = {"count": 5, "successes": 4, "failed_to_download": 1, "failed_to_resize": 0}
    (local / "00000_stats.json").write_text(json.dumps(stats))
    pq.write_table(
        pa.table(
            {
                "caption_id": pa.array([c for c, _, _ in seeded[4:6]], pa.int64()),
                "jpg": [encode(photo("grace"), "JPEG"), encode(photo("camera"), "JPEG")],
            }
        ),
        tmp_path / "bytes.parquet",
    )
    for f in ("00000.tar", "00000_stats.json"):
        fs.put_file(str(local / f), f"{base}/i2d/{f}")
    fs.put_file(str(tmp_path / "bytes.parquet"), f"{base}/pq/bytes.parquet")
    here.config.images.sources = [
        {"kind": "img2dataset", "path": str(local)},
        {"kind": "parquet", "path": str(tmp_path / "bytes.parquet")},
    ]
    there.config.images.sources = [
        {"kind": "img2dataset", "path": f"{root}/i2d/"},
        {"kind": "parquet", "path": f"{root}/pq/*.parquet"},
    ]
    for study in (here, there):
        run = images(study, progress=False)
        assert run.rows_out == 6
    a = _tables(here, f"{local}/", f"{tmp_path}/")
    b = _tables(there, f"{root}/i2d/", f"{root}/pq/")
    assert a["download_stats"] and a["images"]
    for n in a:
        assert a[n] == b[n], (n, a[n][:2], b[n][:2])
    for (path,) in here.con.execute("SELECT path FROM images").fetchall():
        assert (here.root / path).read_bytes() == (there.root / path).read_bytes()
    assert images(there, progress=False).skipped  # finished shards are not read again
    return here, there


def test_images_from_shards_and_parquet_on_s3_equal_local(s3, make_study, laion_path, tmp_path):
    """:func:`images_equal_local` on S3, and ``label`` writes the same rows."""
    server, _ = s3
    here, there = images_equal_local(make_study, laion_path, tmp_path, f"s3://{BUCKET}", server.url)
    from corpus_audit.stages.label import label  # the real face detector and classifier

    for study in (here, there):
        assert label(study, progress=False).rows_in == 6
    a, b = _tables(here), _tables(there)
    assert len(a["face_filter"]) == 6 and a["labels"]
    for n in ("face_filter", "faces", "labels"):
        assert a[n] == b[n], n


def test_hf_urls_offline_read_the_local_hub_cache(tmp_path, monkeypatch, laion_path):
    """With HF_HUB_OFFLINE=1 an ``hf://datasets/...`` corpus is read from the Hub's cache
    (huggingface_hub's own layout: snapshots linking to blobs), keeping the file names (and
    so the samples); a file or a dataset missing from the cache is one line saying so."""
    pytest.importorskip("huggingface_hub")
    import os

    cache = tmp_path / "hub"
    repo = cache / "datasets--laion--tiny"
    revision = "0123456789abcdef0123456789abcdef01234567"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "f00d").write_bytes(laion_path.read_bytes())
    snap = repo / "snapshots" / revision / "data"
    snap.mkdir(parents=True)
    os.symlink(repo / "blobs" / "f00d", snap / "laion400m_sample_10k.parquet")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (f,) = resolve_corpus(["hf://datasets/laion/tiny/data/*.parquet"])
    assert f.path == str(snap / "laion400m_sample_10k.parquet") and f.format == "parquet"
    assert sum(b.rows for b in read_file(f)) == 10_000
    assert resolve_corpus(["hf://datasets/laion/tiny"]) == [f]  # a dataset by name: its files
    with pytest.raises(CorpusError, match=r"hf://datasets/laion/tiny/data/x.parquet: not in "):
        resolve_corpus(["hf://datasets/laion/tiny/data/x.parquet"])
    with pytest.raises(CorpusError, match=r"laion/other is not in the local Hub cache"):
        resolve_corpus(["hf://datasets/laion/other/*.parquet"])


def test_import_images_of_a_manifest_on_s3(s3, make_study, laion_path, tmp_path):
    """``import-images s3://.../manifest.csv``: the manifest and the files it names are
    mirrored into the study, then imported as from a local manifest (same image ids, same
    drop reasons: a file missing on the store is ``missing_file``)."""
    import csv

    from image_fixtures import encode, photo

    from corpus_audit.stages.import_images import import_images
    from corpus_audit.stages.select import select

    server, _ = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    here = _study(make_study, [str(laion_path)], "imp_here")
    there = _study(make_study, [str(laion_path)], "imp_there", server.url)
    for study in (here, there):
        select(study, progress=False)
    query = "SELECT prompt_id FROM prompts ORDER BY 1 LIMIT 2"
    pids = [r[0] for r in here.con.execute(query).fetchall()]
    folder = tmp_path / "dalle"
    (folder / "img").mkdir(parents=True)
    rows = []
    for i, (pid, name) in enumerate(zip(pids, ("astronaut", "grace"), strict=True)):
        (folder / "img" / f"{i}.png").write_bytes(encode(photo(name), "PNG"))
        rows.append({"file": f"img/{i}.png", "prompt_id": pid, "model": "dall-e-3"})
    rows.append({"file": "img/gone.png", "prompt_id": pids[0], "model": "dall-e-3"})
    with (folder / "manifest.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for rel in ("manifest.csv", "img/0.png", "img/1.png"):
        fs.put_file(str(folder / rel), f"{BUCKET}/dalle/{rel}")
    local = import_images(here, [str(folder / "manifest.csv")])
    remote = import_images(there, [f"s3://{BUCKET}/dalle/manifest.csv"])
    assert (
        (local.rows_out, local.dropped)
        == (remote.rows_out, remote.dropped)
        == (
            2,
            {"missing_file": 1},
        )
    )
    query = "SELECT image_id, model_id, prompt_id, path FROM images ORDER BY 1"
    got = there.con.execute(query).fetchall()
    assert [r[:3] for r in got] == [r[:3] for r in here.con.execute(query).fetchall()]
    for *_, path in got:  # inside the study, where label reads it
        assert not Path(path).is_absolute() and path.startswith("imports/")
        assert (there.root / path).is_file()
    with pytest.raises(Exception, match=r"s3://corpora/dalle/nope.csv: no such manifest"):
        import_images(there, [f"s3://{BUCKET}/dalle/nope.csv"])


def test_a_bound_url_carries_its_options() -> None:
    """``bind``: a URL with the options it is opened with; it is the plain URL otherwise
    (equal, hashed, printed the same), survives pickling (a Ray task's argument) and an
    explicit ``options=`` wins over what it carries."""
    import pickle

    a = storage.StoreOptions("http://127.0.0.1:1", retries=0)
    b = storage.StoreOptions("http://127.0.0.1:2", retries=0)
    url = storage.bind("s3://bucket/key.parquet", a)
    assert url == "s3://bucket/key.parquet" and hash(url) == hash("s3://bucket/key.parquet")
    assert f"{url}" == "s3://bucket/key.parquet" and type(f"{url}") is str
    assert pickle.loads(pickle.dumps(url)).options == a
    assert storage.options_of(url) == a and storage.options_of(url, b) == b
    assert storage.options_of("s3://bucket/key.parquet") == storage.StoreOptions()
    assert storage.bind("s3://x", None) == "s3://x" and not hasattr(
        storage.bind("s3://x", None), "options"
    )
