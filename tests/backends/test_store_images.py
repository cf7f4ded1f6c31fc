"""Image sources whose inputs lie on a store: ``dir`` (a prefix of loose image files with
their ``<key>.json``), ``hf`` (a ``save_to_disk`` folder) and ``urls`` (img2dataset writing
its output to the store). The ``images`` stage registers the same images (same ids, same
bytes, same skips) as from the local inputs: fast on ``memory://``, then on a real
S3-compatible server (moto, ``test_storage``'s fixture), where two studies with different
endpoints also run in one process without seeing each other's settings.
"""

from __future__ import annotations

import json
import secrets
import sys
import types
from pathlib import Path

import pytest
from image_fixtures import encode, photo, seed_captions
from test_hub_images import _image_rows
from test_storage import BUCKET, s3  # noqa: F401 - the moto server fixture

from corpus_audit.backends import storage
from corpus_audit.stages.images import images

NAMES = ("astronaut", "camera", "grace")


def _skips(study) -> list[tuple]:
    return study.con.execute(
        "SELECT reason, count(*) FROM image_skips GROUP BY 1 ORDER BY 1"
    ).fetchall()


def _local_inputs(folder: Path, seeded: list) -> dict[str, Path]:
    """On disk: ``photos/`` (``<caption_id>.jpg``, one keyed by its ``.json``, one ``.png``,
    a ``notes.txt``) and ``saved/`` (a ``save_to_disk`` DatasetDict, train + test)."""
    import datasets
    from PIL import Image

    photos = folder / "photos"
    (photos / "sub").mkdir(parents=True)
    for i, (cid, _url, _) in enumerate(seeded[:3]):
        (photos / f"{cid}.jpg").write_bytes(encode(photo(NAMES[i]), "JPEG", quality=80))
    cid, url, _ = seeded[3]
    (photos / "sub" / "k0001.png").write_bytes(encode(photo("grace"), "PNG"))
    (photos / "sub" / "k0001.json").write_text(json.dumps({"url": url, "key": "k0001"}))
    (photos / "notes.txt").write_text("not an image")
    rows = {
        "caption_id": [c for c, _, _ in seeded[4:8]],
        "img": [Image.fromarray(photo(NAMES[i % 3])) for i in range(4)],
    }
    ds = datasets.Dataset.from_dict(rows).cast_column("img", datasets.Image())
    datasets.DatasetDict({"train": ds.select(range(3)), "test": ds.select([3])}).save_to_disk(
        str(folder / "saved")
    )
    return {"photos": photos, "saved": folder / "saved"}


def _upload(fs, local: Path, prefix: str) -> None:
    for p in sorted(local.rglob("*")):
        if p.is_file():
            fs.put_file(str(p), f"{prefix}/{p.relative_to(local).as_posix()}")


def _same_as_local(make_study, laion_path, tmp_path, fs, root: str, url: str, endpoint: str = ""):
    """Two studies: sources on disk / the same files under ``url`` (``root`` in ``fs``)."""
    here = make_study([laion_path], name=f"here_{secrets.token_hex(3)}")
    there = make_study(
        [laion_path],
        name=f"there_{secrets.token_hex(3)}",
        storage={"endpoint_url": endpoint, "retries": 1},
    )
    seeded = seed_captions(here, laion_path, n=8)
    assert seed_captions(there, laion_path, n=8) == seeded
    local = _local_inputs(tmp_path / secrets.token_hex(3), seeded)
    for name, folder in local.items():
        _upload(fs, folder, f"{root}/{name}")
    here.config.images.sources = [
        {"kind": "dir", "path": str(local["photos"])},
        {"kind": "hf", "path": str(local["saved"])},
    ]
    there.config.images.sources = [
        {"kind": "dir", "path": f"{url}/photos/"},
        {"kind": "hf", "path": f"{url}/saved"},
    ]
    return here, there, seeded


def test_dir_and_saved_dataset_on_memory_equal_local(make_study, laion_path, tmp_path):
    pytest.importorskip("datasets")
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/img{secrets.token_hex(4)}"
    here, there, _ = _same_as_local(
        make_study, laion_path, tmp_path, fs, root, f"memory://{root.lstrip('/')}"
    )
    try:
        for study in (here, there):
            run = images(study, progress=False)
            assert run.rows_out == 8, run.dropped  # 4 loose files + 3 train + 1 test rows
        assert _image_rows(here) == _image_rows(there)
        assert _skips(here) == _skips(there)
        test_only = {**there.config.images.sources[1], "split": "test"}
        there.config.images.sources = [test_only]
        there.con.execute("DELETE FROM image_shards")
        assert images(there, progress=False).rows_in == 1  # one split of the DatasetDict
    finally:
        fs.rm(root, recursive=True)


def test_urls_source_writes_and_reads_its_output_on_a_store(make_study, laion_path, monkeypatch):
    """``output = "memory://..."``: img2dataset is handed the URL (it writes through fsspec;
    a double stands in for it, as img2dataset needs the network) and the shards are read
    back from the store."""
    import io
    import tarfile

    import fsspec
    import pyarrow.parquet as pq

    study = make_study([laion_path])
    seed_captions(study, laion_path, n=6)
    out_url = f"memory://dl{secrets.token_hex(4)}/i2d"
    calls: dict = {}

    def download(**kwargs):
        calls.update(kwargs)
        rows = pq.read_table(kwargs["url_list"]).to_pylist()
        fs, path = fsspec.core.url_to_fs(kwargs["output_folder"])
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for i, r in enumerate(rows[:3]):
                for ext, blob in (
                    (".jpg", encode(photo(NAMES[i]), "JPEG")),
                    (
                        ".json",
                        json.dumps({"url": r["url"], "caption_id": r["caption_id"]}).encode(),
                    ),
                ):
                    info = tarfile.TarInfo(f"{i:09d}{ext}")
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))
        fs.pipe(f"{path}/00000.tar", buf.getvalue())
        stats = {"count": len(rows), "successes": 3, "failed_to_download": len(rows) - 3}
        fs.pipe(f"{path}/00000_stats.json", json.dumps(stats).encode())

    monkeypatch.setitem(sys.modules, "img2dataset", types.SimpleNamespace(download=download))
    study.config.images.sources = [{"kind": "urls", "output": out_url}]
    run = images(study, progress=False)
    assert calls["output_folder"] == out_url and run.rows_out == 3
    assert not (study.root / "downloads" / "img2dataset").exists()
    failed = study.con.execute("SELECT sum(failed_to_download) FROM download_stats").fetchone()
    assert failed == (3,)


def test_dir_and_saved_dataset_on_s3_equal_local(s3, make_study, laion_path, tmp_path):  # noqa: F811
    pytest.importorskip("datasets")
    server, _ = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    here, there, _ = _same_as_local(
        make_study, laion_path, tmp_path, fs, f"{BUCKET}/img", f"s3://{BUCKET}/img", server.url
    )
    for study in (here, there):
        assert images(study, progress=False).rows_out == 8
    assert _image_rows(here) == _image_rows(there)
    assert _skips(here) == _skips(there)


def test_two_endpoints_in_one_process_do_not_interfere(s3, make_study, laion_path, tmp_path):  # noqa: F811
    """Two S3-compatible servers hold different objects under the same URL; a study per
    server, their scans interleaved (and concurrent, on threads): each reads its own."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow.parquet as pq
    from s3_server import MotoProcess

    from corpus_audit.backends.corpus import read_file, resolve_corpus
    from corpus_audit.backends.storage import StoreOptions

    server, _ = s3
    table = pq.read_table(laion_path)
    with MotoProcess() as other:  # its own process: its own objects
        for srv, rows in ((server, 3000), (other, 1000)):
            fs = storage.filesystem("s3://x", StoreOptions(srv.url, retries=1))[0]
            if not fs.exists("two"):
                fs.mkdir("two")
            with fs.open("two/part.parquet", "wb") as fh:
                pq.write_table(table.slice(0, rows), fh)
        url = ["s3://two/part.parquet"]
        (a,) = resolve_corpus(url, store=StoreOptions(server.url, retries=1))
        (b,) = resolve_corpus(url, store=StoreOptions(other.url, retries=1))
        assert a.path == b.path and a.store != b.store
        # the options travel with the URL a listing returns, not through the process
        ((ua, _),) = storage.expand(url[0], a.store)
        ((ub, _),) = storage.expand(url[0], b.store)
        assert ua == ub and storage.size(ua) != storage.size(ub)

        def rows(f) -> int:
            return sum(batch.rows for batch in read_file(f))

        assert [rows(a), rows(b), rows(a)] == [3000, 1000, 3000]
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(rows, [a, b] * 4)) == [3000, 1000] * 4
        # the stage level: two studies, one per endpoint, one process
        one = make_study(url, name="one", storage={"endpoint_url": server.url, "retries": 1})
        two = make_study(url, name="two", storage={"endpoint_url": other.url, "retries": 1})
        from corpus_audit.stages.select import select

        assert (select(one, progress=False).rows_in, select(two, progress=False).rows_in) == (
            3000,
            1000,
        )
