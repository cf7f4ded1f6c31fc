"""Hugging Face Hub datasets by name, offline (:mod:`corpus_audit.backends.hub`).

A Hub cache is built in tmp in huggingface_hub's own layout (``hub_cache.py``), holding
parquet shards as ``datasets`` writes them (an ``Image`` column of ``{bytes, path}`` cells,
the features in the schema metadata) with real photos. With ``HF_HUB_OFFLINE=1`` the ``hf``
image source reads ``hf://datasets/<org>/<name>`` from there: ``images`` + ``label`` equal the
same photos read from a local folder. A dataset stored in another format is found through
its parquet export (``refs/convert/parquet``), for the image source and for ``corpus.paths``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hub_cache import add_snapshot, drop_blob, image_parquet
from image_fixtures import encode, photo, seed_captions

from corpus_audit.backends.corpus import read_file, resolve_corpus
from corpus_audit.core.errors import CorpusError, ImageSourceError
from corpus_audit.stages.images import images

pytest.importorskip("huggingface_hub")
pytest.importorskip("datasets")

NAMES = ("astronaut", "camera", "grace", "astronaut", "grace", "camera")


@pytest.fixture
def hub(tmp_path, monkeypatch) -> Path:
    """An empty Hub cache that huggingface_hub finds through ``HF_HOME`` (``$HF_HOME/hub``)."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hf_home" / "hub"
    cache.mkdir(parents=True)
    return cache


def _photos(folder: Path, seeded: list) -> list[Path]:
    """``<caption_id>.jpg`` for the seeded captions, each a real photo."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for (cid, _, _), name in zip(seeded, NAMES, strict=False):
        path = folder / f"{cid}.jpg"
        path.write_bytes(encode(photo(name), "JPEG", quality=85))
        out.append(path)
    return out


def _image_rows(study) -> list[tuple]:
    """(image_id, source, caption_id, occupation, sha of the bytes) of every image."""
    import hashlib

    rows = study.con.execute(
        "SELECT image_id, source, caption_id, occupation, path FROM images ORDER BY 1"
    ).fetchall()
    out = []
    for *head, path in rows:
        file = Path(path) if Path(path).is_absolute() else study.root / path
        out.append((*head, hashlib.sha256(file.read_bytes()).hexdigest()))
    return out


def test_hf_source_by_name_equals_a_local_folder_through_label(
    hub, make_study, laion_path, tmp_path
):
    """``kind = "hf"``, ``path = "hf://datasets/org/photos"``: the dataset's parquet shards
    (two, ``data/train-0000N-of-00002.parquet``) read from the offline cache; the image
    column is found by its ``Image`` feature (it is named ``picture``). ``images`` and
    ``label`` write the same rows as a ``dir`` source over the same photos."""
    here = make_study([laion_path], name="folder")
    there = make_study([laion_path], name="hub")
    seeded = seed_captions(here, laion_path, n=6)
    assert seed_captions(there, laion_path, n=6) == seeded
    files = _photos(tmp_path / "photos", seeded)
    ids = [cid for cid, _, _ in seeded]
    shards = {
        f"data/train-0000{i}-of-00002.parquet": image_parquet(
            {"caption_id": ids[i * 3 : i * 3 + 3], "picture": files[i * 3 : i * 3 + 3]},
            "picture",
        )
        for i in range(2)
    }
    add_snapshot(hub, "org/photos", {**shards, "README.md": b"# photos\n"})
    here.config.images.sources = [{"kind": "dir", "path": str(tmp_path / "photos")}]
    there.config.images.sources = [{"kind": "hf", "path": "hf://datasets/org/photos"}]
    for study in (here, there):
        assert images(study, progress=False).rows_out == 6
    assert _image_rows(here) == _image_rows(there)
    assert images(there, progress=False).skipped  # each shard is a unit, done once
    from corpus_audit.stages.label import label  # the real face detector and classifier

    for study in (here, there):
        assert label(study, progress=False).rows_in == 6
    for table in ("face_filter", "faces", "labels"):
        a, b = _rows(here, table), _rows(there, table)
        assert a and a == b, table


def _rows(study, table: str) -> list[tuple]:
    """A table's rows, sorted, with timestamps (when a row was written) blanked."""
    import datetime

    rows = study.con.execute(f'SELECT * FROM "{table}"').fetchall()  # a fixed table name
    blank = [tuple(None if isinstance(v, datetime.datetime) else v for v in r) for r in rows]
    return sorted(blank, key=repr)


def _labelless(seeded: list, files: list[Path], ids: slice) -> bytes:
    return image_parquet(
        {"caption_id": [c for c, _, _ in seeded[ids]], "image": files[ids]}, "image"
    )


def test_hf_source_split_config_and_a_missing_file_named(hub, make_study, laion_path, tmp_path):
    """``split`` picks ``data/test-*`` among the train and test shards; a shard whose blob is
    gone from the cache is named in the one-line error; an unknown split lists the files."""
    study = make_study([laion_path])
    seeded = seed_captions(study, laion_path, n=5)
    files = _photos(tmp_path / "p", seeded)
    snap = add_snapshot(
        hub,
        "org/split",
        {
            "data/train-00000-of-00001.parquet": _labelless(seeded, files, slice(0, 3)),
            "data/test-00000-of-00001.parquet": _labelless(seeded, files, slice(3, 5)),
        },
    )
    study.config.images.sources = [
        {"kind": "hf", "path": "hf://datasets/org/split", "split": "test"}
    ]
    assert images(study, progress=False).rows_out == 2
    got = {r[0] for r in study.con.execute("SELECT caption_id FROM images").fetchall()}
    assert got == {c for c, _, _ in seeded[3:5]}
    study.config.images.sources = [
        {"kind": "hf", "path": "hf://datasets/org/split/data/train-*.parquet"}  # a glob in it
    ]
    assert images(study, progress=False).rows_out == 3
    study.config.images.sources = [
        {"kind": "hf", "path": "hf://datasets/org/split", "split": "validation"}
    ]
    with pytest.raises(ImageSourceError, match=r"no split 'validation' in org/split@main"):
        images(study, progress=False)
    drop_blob(snap, "data/train-00000-of-00001.parquet")
    study.config.images.sources = [{"kind": "hf", "path": "hf://datasets/org/split"}]
    with pytest.raises(ImageSourceError) as err:
        images(study, progress=False)
    message = str(err.value)
    assert message.startswith("hf://datasets/org/split: data/train-00000-of-00001.parquet is ")
    assert "missing from the local Hub cache" in message and "\n" not in message
    with pytest.raises(CorpusError, match=r"data/train-00000-of-00001.parquet is missing from"):
        resolve_corpus(["hf://datasets/org/split/data/*.parquet"])  # the same resolver
    study.config.images.sources = [{"kind": "hf", "path": "hf://datasets/org/absent"}]
    with pytest.raises(ImageSourceError, match=r"org/absent is not in the local Hub cache"):
        images(study, progress=False)


def test_parquet_export_for_images_and_corpus(hub, make_study, laion_path, tmp_path):
    """A dataset whose main branch holds no parquet (a loading script and JSONL) is read
    through its parquet export, ``refs/convert/parquet``, in both layouts the Hub wrote:
    ``<config>/<split>/NNNN.parquet`` and ``<config>/<split>-NNNNN-of-NNNNN.parquet``."""
    study = make_study([laion_path])
    seeded = seed_captions(study, laion_path, n=6)
    files = _photos(tmp_path / "p", seeded)
    add_snapshot(hub, "org/scripted", {"scripted.py": b"# a loading script\n"})
    add_snapshot(
        hub,
        "org/scripted",
        {
            "default/train/0000.parquet": _labelless(seeded, files, slice(0, 2)),
            "default/validation/0000.parquet": _labelless(seeded, files, slice(2, 3)),
            "faces/train-00000-of-00001.parquet": _labelless(seeded, files, slice(3, 6)),
        },
        revision="refs/convert/parquet",
    )
    url = "hf://datasets/org/scripted"
    study.config.images.sources = [{"kind": "hf", "path": url, "split": "train"}]
    study.config.images.sources[0]["config"] = "faces"
    assert images(study, progress=False).rows_out == 3
    study.config.images.sources = [{"kind": "hf", "path": url, "config": "default"}]
    assert images(study, progress=False).rows_out == 3  # train + validation of default
    got = sorted(r[0] for r in study.con.execute("SELECT caption_id FROM images").fetchall())
    assert got == [c for c, _, _ in seeded]
    study.config.images.sources[0]["config"] = "nope"
    with pytest.raises(ImageSourceError, match=r"no config 'nope' in org/scripted@refs/conv"):
        images(study, progress=False)

    # corpus.paths: the same resolver; a split by name is the export's folder
    table = pq.read_table(laion_path)
    parts = {}
    for rel, rows in (("train/0000.parquet", (0, 6000)), ("validation/0000.parquet", (6000, 4000))):
        local = tmp_path / rel.replace("/", "_")
        pq.write_table(table.slice(*rows), local)
        parts[f"default/{rel}"] = local.read_bytes()
    add_snapshot(hub, "org/text", {"text.py": b"# script\n", "data/x.arrow": b"\x00"})
    snap = add_snapshot(hub, "org/text", parts, revision="refs/convert/parquet")
    by_name = resolve_corpus(["hf://datasets/org/text"])
    assert [f.path for f in by_name] == [
        str(snap / "default/train/0000.parquet"),
        str(snap / "default/validation/0000.parquet"),
    ]
    for spec in (
        "hf://datasets/org/text@~parquet/default/train",
        "hf://datasets/org/text@refs%2Fconvert%2Fparquet/default/train/*.parquet",
    ):
        (f,) = resolve_corpus([spec])
        assert f.path == by_name[0].path
        assert sum(b.rows for b in read_file(f)) == 6000
    with pytest.raises(CorpusError, match=r"org/text \(revision main\)|no .* files in org/t"):
        resolve_corpus(["hf://datasets/org/text@main"])
    with pytest.raises(CorpusError, match=r"org/gone is not in the local Hub cache"):
        resolve_corpus(["hf://datasets/org/gone"])
