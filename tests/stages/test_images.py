"""The `images` stage: every source kind, linking, resumability, unsafe tar members."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import types
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from image_fixtures import encode, photo, seed_captions, tar_with_traversal

from corpus_audit.backends.image_sources.base import safe_member_name
from corpus_audit.core.config import ConfigError, config_from_dict
from corpus_audit.core.errors import ImageSourceError, StageOrderError
from corpus_audit.stages.images import images


@pytest.fixture
def study(make_study, laion_path):
    s = make_study([laion_path])
    s.seeded = seed_captions(s, laion_path, n=12)
    return s


def _set_sources(study, sources):
    study.config.images.sources = sources


def _jpeg(name="astronaut") -> bytes:
    return encode(photo(name), "JPEG", quality=85)


def _rows(study, sql, params=None):
    return study.con.execute(sql, params or []).fetchall()


def test_dir_source_links_by_file_name_and_reruns_without_duplicates(study, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    seeded = study.seeded
    for cid, _, _ in seeded[:3]:
        (folder / f"{cid}.jpg").write_bytes(_jpeg())
    (folder / "999999999.jpg").write_bytes(_jpeg("camera"))  # no such caption
    (folder / "notes.txt").write_text("ignored")
    _set_sources(study, [{"kind": "dir", "path": str(folder)}])

    run = images(study, progress=False)
    assert run.rows_in == 4 and run.rows_out == 3
    assert run.dropped == {"no_matching_caption": 1}
    got = _rows(
        study, "SELECT image_id, source, caption_id, occupation, path FROM images ORDER BY 3"
    )
    assert [r[2] for r in got] == sorted(cid for cid, _, _ in seeded[:3])
    occ = {cid: o for cid, _, o in seeded}
    for image_id, source, cid, occupation, path in got:
        assert image_id == f"train:{cid}" and source == "training"
        assert occupation == occ[cid]
        assert Path(path) == (folder / f"{cid}.jpg").resolve()  # referenced where it is

    again = images(study, progress=False)
    assert again.skipped and again.rows_out == 0
    assert study.count("images") == 3


def _wds_shard(path: Path, entries: list[tuple[str, bytes, dict]]) -> Path:
    """An img2dataset-style webdataset shard: <key>.jpg, <key>.txt, <key>.json."""
    with tarfile.open(path, "w") as tar:
        for key, data, meta in entries:
            for ext, blob in (
                (".jpg", data),
                (".txt", meta.get("caption", "").encode()),
                (".json", json.dumps(meta).encode()),
            ):
                info = tarfile.TarInfo(key + ext)
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    return path


def test_webdataset_links_by_url_and_never_writes_outside(study, tmp_path):
    seeded = study.seeded
    shard_dir = tmp_path / "shards"
    shard_dir.mkdir()
    entries = [
        (f"{i:09d}", _jpeg(), {"url": url, "key": f"{i:09d}", "caption": "x"})
        for i, (_, url, _) in enumerate(seeded[:4])
    ]
    _wds_shard(shard_dir / "00000.tar", entries)
    evil = tar_with_traversal(
        shard_dir / "00001.tar",
        {"../../x.jpg": _jpeg(), "/tmp/abs_x.jpg": _jpeg(), "ok/000000100.jpg": _jpeg()},
    )
    with tarfile.open(evil, "a") as tar:  # a symlink member pointing outside
        link = tarfile.TarInfo("000000200.jpg")
        link.type = tarfile.SYMTYPE
        link.linkname = "../../../etc/passwd"
        tar.addfile(link)

    study_dir = study.root.resolve()
    before = {p for p in tmp_path.rglob("*") if not str(p.resolve()).startswith(str(study_dir))}
    _set_sources(study, [{"kind": "webdataset", "path": str(shard_dir)}])
    run = images(study, progress=False)

    assert run.rows_out == 4
    assert run.dropped["unsafe_name"] == 2 and run.dropped["not_a_file"] == 1
    skips = _rows(study, "SELECT item, reason FROM image_skips ORDER BY item")
    assert {r[1] for r in skips} == {"unsafe_name", "not_a_file"}
    assert any(r[0].endswith(":../../x.jpg") for r in skips)
    after = {p for p in tmp_path.rglob("*") if not str(p.resolve()).startswith(str(study_dir))}
    assert after == before  # nothing new outside the study directory
    assert not (study.root / ".." / ".." / "x.jpg").resolve().exists()
    assert not Path("/tmp/abs_x.jpg").exists()
    for (path,) in _rows(study, "SELECT path FROM images"):
        assert not Path(path).is_absolute() and path.startswith("images/train/")
        assert study.inside(study.root / path)
        assert (study.root / path).read_bytes() == _jpeg()
    by_url = dict(
        _rows(study, "SELECT c.url, i.caption_id FROM images i JOIN captions c USING (caption_id)")
    )
    assert set(by_url) == {url for _, url, _ in seeded[:4]}

    rerun = images(study, progress=False)  # both shards are finished: nothing read again
    assert rerun.skipped and rerun.rows_in == 0
    assert study.count("images") == 4


def test_corrupt_shard_is_recorded_not_fatal(study, tmp_path):
    shard_dir = tmp_path / "bad"
    shard_dir.mkdir()
    good = _wds_shard(
        shard_dir / "00000.tar", [("000000001", _jpeg(), {"url": study.seeded[0][1]})]
    )
    data = good.read_bytes()
    (shard_dir / "00001.tar").write_bytes(data[:700] + b"\x00garbage" * 50)
    _set_sources(study, [{"kind": "webdataset", "path": str(shard_dir)}])
    run = images(study, progress=False)
    assert run.rows_out == 1
    assert run.dropped.get("unreadable_shard") == 1
    done = {Path(r[0]).name for r in _rows(study, "SELECT shard FROM image_shards")}
    assert done == {"00000.tar"}  # the broken shard is retried on the next run


def test_img2dataset_output_keeps_download_stats(study, tmp_path):
    out = tmp_path / "i2d"
    out.mkdir()
    cid, url, _ = study.seeded[1]
    _wds_shard(out / "00000.tar", [("000000000", _jpeg("camera"), {"url": url, "caption_id": cid})])
    stats = {
        "count": 3,
        "successes": 1,
        "failed_to_download": 2,
        "failed_to_resize": 0,
        "status_dict": {"success": 1, "HTTP Error 404: Not Found": 2},
    }
    (out / "00000_stats.json").write_text(json.dumps(stats))
    _set_sources(study, [{"kind": "img2dataset", "path": str(out)}])
    run = images(study, progress=False)
    assert run.rows_out == 1
    row = _rows(
        study, "SELECT count, successes, failed_to_download, status_dict FROM download_stats"
    )
    assert row[0][:3] == (3, 1, 2)
    assert json.loads(row[0][3])["HTTP Error 404: Not Found"] == 2
    assert any("downloaded 1 of 3" in m for m in run.messages)


def test_parquet_bytes_and_hf_struct_column(study, tmp_path):
    seeded = study.seeded
    plain = pa.table(
        {
            "key": ["a", "b"],
            "url": [seeded[0][1], "http://example.invalid/none.jpg"],
            "jpg": [_jpeg(), _jpeg("camera")],
        }
    )
    pq.write_table(plain, tmp_path / "plain.parquet")
    struct = pa.table(
        {
            "caption_id": pa.array([seeded[1][0], seeded[2][0]], pa.int64()),
            "image": [
                {"bytes": encode(photo("grace"), "PNG"), "path": "g.png"},
                {"bytes": None, "path": None},
            ],
        }
    )
    pq.write_table(struct, tmp_path / "struct.parquet")
    _set_sources(
        study,
        [
            {"kind": "parquet", "path": str(tmp_path / "plain.parquet")},
            {"kind": "parquet", "path": str(tmp_path / "struct.parquet")},
        ],
    )
    run = images(study, progress=False)
    assert run.rows_out == 2
    assert run.dropped == {"no_matching_caption": 1, "no_image_bytes": 1}
    paths = dict(_rows(study, "SELECT caption_id, path FROM images"))
    assert paths[seeded[0][0]].endswith(".jpg") and paths[seeded[1][0]].endswith(".png")


def test_hf_dataset_saved_to_disk(study, tmp_path):
    import datasets
    from PIL import Image

    seeded = study.seeded
    ds = datasets.Dataset.from_dict(
        {
            "caption_id": [seeded[3][0], seeded[4][0]],
            "picture": [Image.fromarray(photo("astronaut")), Image.fromarray(photo("camera"))],
        }
    ).cast_column("picture", datasets.Image())
    ds.save_to_disk(str(tmp_path / "hfds"))
    _set_sources(study, [{"kind": "hf", "path": str(tmp_path / "hfds")}])
    run = images(study, progress=False)
    assert run.rows_out == 2
    for (path,) in _rows(study, "SELECT path FROM images"):
        assert (study.root / path).stat().st_size > 1000


def test_row_link_to_corpus_file(study, tmp_path, laion_path):
    folder = tmp_path / "by_row"
    folder.mkdir()
    cid, _, _ = study.seeded[5]
    row = cid & ((1 << 40) - 1)
    (folder / f"{row:09d}.jpg").write_bytes(_jpeg())
    _set_sources(
        study, [{"kind": "dir", "path": str(folder), "link": "row", "corpus_file": str(laion_path)}]
    )
    run = images(study, progress=False)
    assert run.rows_out == 1
    assert _rows(study, "SELECT caption_id FROM images") == [(cid,)]


def test_urls_without_img2dataset_says_how_to_install(study, monkeypatch):
    monkeypatch.setitem(sys.modules, "img2dataset", None)  # import fails as when not installed
    _set_sources(study, [{"kind": "urls"}])
    with pytest.raises(ImageSourceError, match="pip install img2dataset"):
        images(study, progress=False)
    assert study.count("images") == 0
    exported = pq.read_table(study.root / "downloads" / "urls.parquet")
    assert sorted(exported.column("caption_id").to_pylist()) == [c for c, _, _ in study.seeded]


def test_urls_download_through_img2dataset(study, monkeypatch):
    """img2dataset itself needs the network; a double stands in for it and writes the output
    img2dataset would (webdataset shard with save_additional_columns + stats)."""
    calls = {}

    def download(**kwargs):
        calls.update(kwargs)
        table = pq.read_table(kwargs["url_list"]).to_pylist()
        out = Path(kwargs["output_folder"])
        entries = [
            (f"{i:09d}", _jpeg(), {"url": r["url"], "caption_id": r["caption_id"]})
            for i, r in enumerate(table[:2])
        ]
        _wds_shard(out / "00000.tar", entries)
        stats = {"count": len(table), "successes": 2, "failed_to_download": len(table) - 2}
        (out / "00000_stats.json").write_text(json.dumps({**stats, "status_dict": {}}))

    monkeypatch.setitem(sys.modules, "img2dataset", types.SimpleNamespace(download=download))
    _set_sources(study, [{"kind": "urls", "image_size": 256}])
    run = images(study, progress=False)
    assert calls["save_additional_columns"] == ["caption_id"]
    assert calls["image_size"] == 256 and calls["incremental_mode"] == "incremental"
    assert study.inside(Path(calls["output_folder"]))
    assert run.rows_out == 2
    assert _rows(study, "SELECT sum(failed_to_download) FROM download_stats")[0][0] == 10


def test_stage_order_and_config_errors(make_study, laion_path, tmp_path):
    s = make_study([laion_path], name="empty")
    _set_sources(s, [{"kind": "dir", "path": str(tmp_path)}])
    with pytest.raises(StageOrderError, match="select"):
        images(s, progress=False)
    with pytest.raises(ConfigError, match=r"images.sources\[0\].kind"):
        config_from_dict({"images": {"sources": [{"kind": "ftp", "path": "x"}]}}, tmp_path)
    with pytest.raises(ConfigError, match="needs a path"):
        config_from_dict({"images": {"sources": [{"kind": "dir"}]}}, tmp_path)


def test_safe_member_name():
    assert safe_member_name("00000/000000001.jpg")
    for bad in ("../../x.jpg", "/etc/x.jpg", "a/../../b.jpg", "a\\..\\b.jpg", ""):
        assert safe_member_name(bad) is None


def test_no_sources_is_a_skip(make_study, laion_path):
    s = make_study([laion_path], name="nosrc")
    run = images(s, progress=False)
    assert run.skipped and "images.sources" in run.messages[0]


def test_img2dataset_files_and_parquet_output_formats(study, tmp_path):
    """img2dataset's `files` format (NNNNN/<key>.jpg + .json, a metadata parquet without
    images) and its `parquet` format (image bytes in a `jpg` column) are both recognised."""
    seeded = study.seeded
    files_out = tmp_path / "i2d_files"
    (files_out / "00000").mkdir(parents=True)
    (files_out / "00000" / "000000000.jpg").write_bytes(_jpeg())
    (files_out / "00000" / "000000000.json").write_text(json.dumps({"url": seeded[6][1]}))
    (files_out / "00000" / "000000000.txt").write_text("caption")
    pq.write_table(
        pa.table({"key": ["000000000"], "url": [seeded[6][1]]}), files_out / "00000.parquet"
    )
    parquet_out = tmp_path / "i2d_parquet"
    parquet_out.mkdir()
    pq.write_table(
        pa.table({"key": ["000000000"], "url": [seeded[7][1]], "jpg": [_jpeg("camera")]}),
        parquet_out / "00000.parquet",
    )
    _set_sources(
        study,
        [
            {"kind": "img2dataset", "path": str(files_out)},
            {"kind": "img2dataset", "path": str(parquet_out)},
        ],
    )
    run = images(study, progress=False)
    assert [r["registered"] for r in run.summary] == [1, 1]
    paths = dict(_rows(study, "SELECT caption_id, path FROM images"))
    assert Path(paths[seeded[6][0]]) == (files_out / "00000" / "000000000.jpg").resolve()
    assert (study.root / paths[seeded[7][0]]).read_bytes() == _jpeg("camera")
