"""``hf://`` read ONLINE, through huggingface_hub's real ``HfFileSystem``, against a loopback
test double of the Hub's HTTP API (``hub_server.py``: repository info, tree listings with
pagination, ``resolve`` with a 302 to the storage and ``Range`` requests, the
Hub's error codes); the real Hub cannot be reached here.

huggingface_hub reads ``HF_ENDPOINT`` and ``HF_HUB_OFFLINE`` once, when it is imported, and
this test process imported it offline (``conftest.py``), so every online run is a fresh
``corpus-audit`` process with ``HF_ENDPOINT`` at the double and ``HF_HUB_OFFLINE=0`` (the
CLI's default is offline), as a user runs it; no token (``HF_TOKEN`` removed, ``HF_HOME`` in
tmp). The local studies and the comparisons run here (``test_storage``'s helpers).

- ``select`` + ``indicators`` over ``hf://datasets/org/captions/*.parquet`` (the real LAION
  sample split in two files, and COCO) equal the study over the same local files, table by
  table; every byte comes by range requests, and COCO's columns ``select`` does not read are
  not fetched at all;
- the parquet export (``@~parquet/<config>/<split>``) likewise;
- the ``hf`` image source by name (parquet shards with an ``Image`` column of real photos)
  writes the same ``images`` rows and bytes as a local folder of the photos;
- a missing repository, a private one, a gated one, a missing revision, a missing file, an
  unreachable endpoint: one line naming the URL and what the Hub answered, exit 2, the study
  unchanged;
- a changed file (a new commit: new blob id and sha256) makes ``select`` stale; a study
  pinned to the old commit still reads the old bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_storage import _study, _tables

from corpus_audit.core.store import Study

pytest.importorskip("huggingface_hub")
REPO = "hf://datasets/org/captions"


@pytest.fixture(scope="module")
def hub():
    """The Hub double on 127.0.0.1 (a free port), 2 entries per listing page so that
    ``HfFileSystem`` follows the pagination (the Hub's: 1000)."""
    from hub_server import HubDouble

    with HubDouble(page_size=2) as server:
        yield server
    assert server.unknown == []  # every request was one the Hub serves
    downloads = [r for r in server.seen.requests if r.path.startswith("/blobs/")]
    assert all(r.range for r in downloads)  # never a whole-file GET


def _online(endpoint: str, verb: str, root: Path, home: Path) -> subprocess.CompletedProcess:
    """``corpus-audit -q <verb> <root>`` in a fresh process reading the Hub at ``endpoint``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HF_TOKEN_PATH")
    }
    env.update(
        PYTHONPATH=os.pathsep.join(sys.path),
        HF_ENDPOINT=endpoint,
        HF_HUB_OFFLINE="0",
        HF_HOME=str(home),  # huggingface_hub's files (a token, a registry cache) in tmp
    )
    return subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", "-q", verb, str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _runs(root: Path, stage: str = "select") -> list[tuple[str, int]]:
    """``(status, rows_in)`` of every finished run of ``stage``, oldest first."""
    with Study.open(root) as study:
        return study.con.execute(
            "SELECT status, rows_in FROM stage_runs WHERE stage = ? ORDER BY finished_at",
            [stage],
        ).fetchall()


def _chunks(path: Path) -> dict[str, tuple[int, int]]:
    """Each column's byte range ``[start, end)`` in a one-row-group parquet file."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    out = {}
    for i in range(group.num_columns):
        col = group.column(i)
        start = min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o)
        out[col.path_in_schema] = (start, start + col.total_compressed_size)
    return out


def _fetched(requests: list) -> list[tuple[int, int]]:
    """The byte ranges ``[start, end)`` the requests fetched (each one a ``Range`` GET)."""
    out = []
    for r in requests:
        start, _, end = r.range.removeprefix("bytes=").partition("-")
        out.append((int(start), int(end) + 1))
    return out


def test_select_and_indicators_over_hf_equal_local(
    hub, make_study, laion_path, coco_path, tmp_path
):
    """The repository ``org/captions`` holds the LAION sample in two files and COCO; the
    same files in a local folder are the reference study."""
    from corpus_audit.stages.indicators import indicators
    from corpus_audit.stages.select import select

    folder = tmp_path / "captions"
    folder.mkdir()
    table = pq.read_table(laion_path)
    pq.write_table(table.slice(0, 6000), folder / "laion-00000-of-00002.parquet")
    pq.write_table(table.slice(6000), folder / "laion-00001-of-00002.parquet")
    shutil.copy(coco_path, folder / coco_path.name)
    (folder / "README.md").write_text("# captions\n")
    hub.commit("org/captions", folder)

    over = {"indicators": {"use_names": False}}
    here = _study(make_study, [str(folder / "*.parquet")], "here", **over)
    select(here, progress=False)
    indicators(here, progress=False)
    there = _study(make_study, [f"{REPO}/*.parquet"], "there", **over)
    root = there.root
    there.close()
    for verb in ("select", "indicators"):
        done = _online(hub.url, verb, root, tmp_path / "hf_home")
        assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    assert _runs(root) == [("done", 35_014)]

    a = _tables(here, f"{folder}/")
    with Study.open(root) as again:
        b = _tables(again, f"{REPO}/")
        paths = again.con.execute("SELECT path FROM corpus_files ORDER BY 1").fetchall()
    assert {"captions", "mentions", "samples", "indicators"} <= set(a) == set(b)
    assert len(a["indicators"]) > 200 and len(a["samples"]) > 100
    assert [n for n in a if a[n] != b[n]] == []
    assert [p for (p,) in paths] == [f"{REPO}/{p.name}" for p in sorted(folder.glob("*.parquet"))]
    assert any("cursor=" in r.path for r in hub.seen.requests)  # pages of listings followed

    # every file is read by range requests on its storage (after the Hub's 302), never whole
    for part in sorted(folder.glob("*.parquet")):
        reads = hub.seen.blob_reads(part.read_bytes())
        assert reads and all(r.range and r.status == 206 for r in reads), part.name
    coco = folder / coco_path.name
    fetched = _fetched(hub.seen.blob_reads(coco.read_bytes()))
    assert sum(e - s for s, e in fetched) < coco.stat().st_size
    untouched = {
        name
        for name, (start, end) in _chunks(coco).items()
        if not any(s < end and start < e for s, e in fetched)
    }
    assert "caption" not in untouched and {"coco_url", "file_name", "image_id"} <= untouched


def test_parquet_export_online_equals_local(hub, make_study, laion_path, tmp_path):
    """A dataset kept as a loading script: its parquet export (``refs/convert/parquet``,
    ``<config>/<split>/NNNN.parquet``) read by config and split."""
    from corpus_audit.stages.select import select

    script = tmp_path / "script"
    script.mkdir()
    (script / "scripted.py").write_text("# a loading script\n")
    hub.commit("org/scripted", script)
    export = tmp_path / "export"
    (export / "default" / "train").mkdir(parents=True)
    (export / "default" / "validation").mkdir()
    table = pq.read_table(laion_path)
    pq.write_table(table.slice(0, 4000), export / "default" / "train" / "0000.parquet")
    pq.write_table(table.slice(4000, 4000), export / "default" / "train" / "0001.parquet")
    pq.write_table(table.slice(8000), export / "default" / "validation" / "0000.parquet")
    hub.commit("org/scripted", export, revision="refs/convert/parquet")

    train = export / "default" / "train"
    here = _study(make_study, [str(train / "*.parquet")], "here")
    select(here, progress=False)
    url = "hf://datasets/org/scripted@~parquet/default/train"
    there = _study(make_study, [url], "there")
    root = there.root
    there.close()
    done = _online(hub.url, "select", root, tmp_path / "hf_home")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _runs(root) == [("done", 8000)]
    export_url = "hf://datasets/org/scripted@refs%2Fconvert%2Fparquet/default/train/"
    a = _tables(here, f"{train}/")
    with Study.open(root) as again:
        b = _tables(again, export_url)
    assert a["captions"] and [n for n in a if a[n] != b[n]] == []
    assert [r[1] for r in b["corpus_files"]] == ["0000.parquet", "0001.parquet"]
    tree = [r.path for r in hub.seen.requests if "/tree/refs%2Fconvert%2Fparquet" in r.path]
    assert tree  # listed at the export's revision, as huggingface_hub quotes it


def test_hf_image_source_online_equals_a_local_folder(hub, make_study, laion_path, tmp_path):
    """``kind = "hf"`` by name: the dataset's two parquet shards (an ``Image`` column named
    ``picture``) read through the Hub; the same ``images`` rows and bytes as the photos in a
    local folder."""
    pytest.importorskip("datasets")
    from hub_cache import image_parquet
    from image_fixtures import seed_captions
    from test_hub_images import _image_rows, _photos

    from corpus_audit.stages.images import images

    here = make_study([laion_path], name="folder")
    seeded = seed_captions(here, laion_path, n=6)
    files = _photos(tmp_path / "photos", seeded)
    ids = [cid for cid, _, _ in seeded]
    repo = tmp_path / "photos_repo"
    (repo / "data").mkdir(parents=True)
    for i in range(2):
        shard = repo / "data" / f"train-0000{i}-of-00002.parquet"
        cells = {"caption_id": ids[i * 3 : i * 3 + 3], "picture": files[i * 3 : i * 3 + 3]}
        shard.write_bytes(image_parquet(cells, "picture"))
    (repo / "README.md").write_text("# photos\n")
    hub.commit("org/photos", repo)

    here.config.images.sources = [{"kind": "dir", "path": str(tmp_path / "photos")}]
    assert images(here, progress=False).rows_out == 6
    source = {"kind": "hf", "path": "hf://datasets/org/photos"}
    there = make_study([laion_path], name="hub", images={"sources": [source]})
    assert seed_captions(there, laion_path, n=6) == seeded
    root = there.root
    there.close()
    done = _online(hub.url, "images", root, tmp_path / "hf_home")
    assert done.returncode == 0, done.stderr[-2000:]
    with Study.open(root) as again:
        assert _image_rows(here) == _image_rows(again) != []
    for shard in sorted((repo / "data").iterdir()):
        reads = hub.seen.blob_reads(shard.read_bytes())
        assert reads and all(r.range and r.status == 206 for r in reads), shard.name


def test_missing_private_gated_repo_missing_file_exit_2_study_unchanged(
    hub, make_study, laion_path, tmp_path
):
    """Each one line naming the URL and what the Hub answered, exit 2, nothing written."""
    from corpus_audit.stages.select import select

    folder = tmp_path / "gated"
    folder.mkdir()
    shutil.copy(laion_path, folder / "laion.parquet")
    hub.commit("org/gated", folder)
    hub.gated.add("org/gated")  # listed, but its files answer 401 GatedRepo
    hub.commit("org/private", folder)
    hub.private.add("org/private")  # 401 RepoNotFound to a client without its token
    local = (folder / "laion.parquet").resolve()  # as study.toml writes it
    study = _study(make_study, [str(local)], "errors")
    select(study, progress=False)
    before = _tables(study)
    root = study.root
    study.close()
    toml = root / "study.toml"
    text = toml.read_text()
    cases = {
        "hf://datasets/org/nowhere/*.parquet": (
            "cannot list (no such repository on the Hub, or a private one: set HF_TOKEN)"
        ),
        "hf://datasets/org/private/laion.parquet": (
            "cannot list (no such repository on the Hub, or a private one: set HF_TOKEN)"
        ),
        "hf://datasets/org/gated/laion.parquet": (
            "cannot read (access denied: a gated repository, accept its conditions and set "
            "HF_TOKEN)"
        ),
        "hf://datasets/org/gated/nope.parquet": "cannot list (no such file in the repository)",
        "hf://datasets/org/gated@v9/laion.parquet": (
            "cannot list (no such revision of the repository)"
        ),
    }
    for url, problem in cases.items():
        assert str(local) in text
        toml.write_text(text.replace(str(local), url))
        done = _online(hub.url, "select", root, tmp_path / "hf_home")
        lines = (done.stdout + done.stderr).strip().splitlines()
        assert done.returncode == 2 and lines == [f"error: {url}: {problem}"], lines[:5]
    # a dataset by name with no corpus file on its branch and no parquet export
    script = tmp_path / "scriptonly"
    script.mkdir()
    (script / "scriptonly.py").write_text("# a loading script\n")
    hub.commit("org/scriptonly", script)
    url = "hf://datasets/org/scriptonly"
    toml.write_text(text.replace(str(local), url))
    done = _online(hub.url, "select", root, tmp_path / "hf_home")
    (line,) = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and line.startswith(f"error: {url}: no .parquet/")
    assert line.endswith(" files in org/scriptonly@main; no parquet export (refs/convert/parquet)")
    toml.write_text(text)
    statuses = {r.status for r in hub.seen.requests if "/org/gated/resolve/" in r.path}
    assert statuses == {401}
    with Study.open(root) as again:
        assert _tables(again) == before


def test_a_new_commit_makes_select_stale(hub, make_study, laion_path, tmp_path):
    """``select`` is skipped while the file is unchanged; a commit that changes it (new blob
    id, sha256 and size) makes it run again, reading the new bytes. A study pinned to the
    first commit (``@<commit id>``) still reads the old bytes."""
    folder = tmp_path / "changing"
    folder.mkdir()
    shutil.copy(laion_path, folder / "laion.parquet")
    first = hub.commit("org/changing", folder)
    pinned = _study(make_study, [f"hf://datasets/org/changing@{first}/laion.parquet"], "pinned")
    pinned_root = pinned.root
    pinned.close()
    study = _study(make_study, ["hf://datasets/org/changing/laion.parquet"], "stale")
    root = study.root
    study.close()
    for _ in range(2):
        assert _online(hub.url, "select", root, tmp_path / "hf_home").returncode == 0
    pq.write_table(pq.read_table(laion_path).slice(0, 5000), folder / "laion.parquet")
    hub.commit("org/changing", folder)
    assert _online(hub.url, "select", root, tmp_path / "hf_home").returncode == 0
    assert _runs(root) == [("done", 10_000), ("skipped", 10_000), ("done", 5000)]
    assert _online(hub.url, "select", pinned_root, tmp_path / "hf_home").returncode == 0
    assert _runs(pinned_root) == [("done", 10_000)]


def test_an_unreachable_hub_is_cannot_connect(make_study, laion_path, tmp_path) -> None:
    """``HF_ENDPOINT`` where nothing listens: one line naming the URL and the endpoint."""
    from s3_server import free_port

    nowhere = f"http://127.0.0.1:{free_port()}"
    url = "hf://datasets/org/captions/*.parquet"
    study = _study(make_study, [url], "down")
    root = study.root
    study.close()
    done = _online(nowhere, "select", root, tmp_path / "hf_home")
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines[:5]
    assert lines[0].startswith(f"error: {url}: cannot connect to {nowhere} (")
