"""Corpus inputs beyond ``select`` read from object stores: ``pst_captions`` (the Paired
Stereotype Test's caption side), ``who_how``'s text corpus (``corpus-audit texts``) and
``import-images`` of a folder. Each against fsspec's ``memory://`` (fast) and a REAL
S3-compatible server (moto's server mode on 127.0.0.1, :func:`test_storage.s3`), reached
only through the study's ``[storage]`` options: the results equal those over the same local
files, and a rewritten object makes the stage run again.
"""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_storage import BUCKET, _study, _tables, s3  # noqa: F401 - s3: the fixture

from corpus_audit.backends import storage
from corpus_audit.core.errors import ManifestError

SMALL_ROWS = 1500  # LAION captions in the small corpus (about 30 name a PST role)


@pytest.fixture(scope="module")
def small_corpus(laion_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first :data:`SMALL_ROWS` real LAION captions as one parquet file."""
    path = tmp_path_factory.mktemp("small") / "laion_small.parquet"
    pq.write_table(pq.read_table(laion_path).slice(0, SMALL_ROWS), path)
    return path


@pytest.fixture
def memory_root():
    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/inputs{secrets.token_hex(4)}"
    yield fs, root, f"memory://{root.lstrip('/')}"
    if fs.exists(root):
        fs.rm(root, recursive=True)


# -- pst_captions -----------------------------------------------------------------------------
def _pst_tables(study) -> dict[str, list[tuple]]:
    q = {
        "files": "SELECT * FROM pst_caption_files ORDER BY ALL",
        "mentions": "SELECT * FROM pst_caption_mentions ORDER BY ALL",
    }
    return {k: study.con.execute(v).fetchall() for k, v in q.items()}


def pst_captions_equal_local_and_stale(make_study, small_corpus: Path, url: str, endpoint: str):
    """``pst_captions`` over the object ``url`` (a copy of ``small_corpus``, reached with the
    study's ``[storage]`` options at ``endpoint``) writes what it writes over the local file;
    a second run is skipped, and one after the object is rewritten is not."""
    from corpus_audit.stages.pst_captions import pst_captions

    options = storage.StoreOptions(endpoint, retries=1)
    fs, path = storage.filesystem(url, options)
    fs.put_file(str(small_corpus), path)
    here = _study(make_study, [str(small_corpus)], "pst_here")
    there = _study(make_study, [url], "pst_there", endpoint, retries=1)
    runs = [pst_captions(s, progress=False) for s in (here, there)]
    assert [r.rows_in for r in runs] == [SMALL_ROWS, SMALL_ROWS] and runs[0].rows_out > 10
    a, b = _pst_tables(here), _pst_tables(there)
    assert a == b and len(a["mentions"]) == runs[0].rows_out
    assert pst_captions(there, progress=False).skipped  # the same object: mentions kept
    with fs.open(path, "wb") as fh:  # a new version of the object: fewer rows
        pq.write_table(pq.read_table(small_corpus).slice(0, 500), fh)
    again = pst_captions(there, progress=False)
    assert not again.skipped and again.rows_in == 500


def test_pst_captions_over_memory_equal_local_and_stale(make_study, small_corpus, memory_root):
    _fs, _root, base = memory_root
    pst_captions_equal_local_and_stale(make_study, small_corpus, f"{base}/laion_small.parquet", "")


def test_pst_captions_over_s3_equal_local_and_stale(s3, make_study, small_corpus):  # noqa: F811
    server, _ = s3
    url = f"s3://{BUCKET}/pst/laion_small.parquet"
    pst_captions_equal_local_and_stale(make_study, small_corpus, url, server.url)


def test_pst_captions_reads_the_corpus_format_as_select(tmp_path, small_corpus, memory_root):
    """``corpus.format`` applies to ``pst_captions`` as to ``select``: CSV files named
    ``.txt`` (no format by name) on a store are read as CSV, as the local copy is."""
    import pyarrow.csv as pacsv

    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.pst_captions import pst_captions
    from corpus_audit.stages.select import select

    fs, root, base = memory_root
    local = small_corpus.parent / "captions.txt"
    pacsv.write_csv(pq.read_table(small_corpus, columns=["TEXT", "URL"]), local)
    fs.put_file(str(local), f"{root}/captions.txt")
    csv = {"corpus": {"format": "csv"}}  # (make_study's own argument is named corpus)
    tables = []
    for name, path in (("here", str(local)), ("there", f"{base}/captions.txt")):
        with init_study(tmp_path / name, [path], overrides=csv) as study:
            assert select(study, progress=False).rows_in == SMALL_ROWS
            assert pst_captions(study, progress=False).rows_in == SMALL_ROWS
            tables.append(_pst_tables(study))
    assert tables[0] == tables[1] and tables[0]["mentions"]


def test_pst_captions_fingerprint_is_selects(make_study, small_corpus) -> None:
    """A local file's identity in ``pst_captions``' key is ``select``'s (path, size, mtime
    through :func:`~corpus_audit.backends.corpus.fingerprint_entry`): touching the file
    (same bytes, new mtime) makes the stage run again, as it makes ``select`` run again."""
    import os

    from corpus_audit.stages.pst_captions import corpus_key

    copy = small_corpus.parent / "touched.parquet"
    shutil.copy(small_corpus, copy)
    study = _study(make_study, [str(copy)], "pst_key")
    key = corpus_key(study)
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert corpus_key(study) != key


# -- who_how's text corpus (corpus-audit texts) -----------------------------------------------
def _bios(path: Path) -> Path:
    """Short biographies with an occupation and a specified gender, one JSON object a line."""
    people = [
        ("She is a nurse who works nights at the hospital.", "nurse", "female"),
        ("He is a nurse and a father of two.", "nurse", "male"),
        ("The nurse said she loved her patients.", "nurse", "female"),
        ("He worked as an engineer, designing bridges.", "engineer", "male"),
        ("She is an engineer at a car company.", "engineer", "female"),
        ("An engineer, he builds robots in his garage.", "engineer", "male"),
        ("They are a teacher of mathematics.", "teacher", ""),
        ("She has been a teacher for twenty years.", "teacher", "female"),
        ("He is a teacher and a coach.", "teacher", "male"),
        ("", "teacher", ""),
    ]
    lines = [json.dumps({"bio": text, "job": occ, "gender": g}) for text, occ, g in people * 3]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _texts_tables(root: Path, location: str) -> dict[str, list[tuple]]:
    from corpus_audit.core.store import Study

    with Study.open(root, read_only=True) as study:
        tables = _tables(study, location)
    # the settings hash the files' identities (where they lie): location-derived
    return {k: v for k, v in tables.items() if k.startswith("texts_") and k != "texts_settings"}


def texts_over_store_equal_local(tmp_path: Path, url: str, endpoint: str) -> Path:
    """``corpus-audit texts <url> --out DIR`` equals the same over the local file; a rerun is
    skipped (nothing changed) and a rewritten object is read again. The store is reached at
    ``endpoint`` only through the study's ``[storage]`` section (``DIR`` made over the local
    file first, then ``config set storage.endpoint_url``; nothing in the environment)."""
    from corpus_audit.cli import main

    local = _bios(tmp_path / "bios.jsonl")
    fs, path = storage.filesystem(url, storage.StoreOptions(endpoint, retries=1))
    fs.put_file(str(local), path)
    flags = ["--text-column", "bio", "--occupation-column", "job", "--gender-column", "gender"]
    here, there = tmp_path / "here", tmp_path / "there"
    assert main(["-q", "texts", str(local), "--out", str(here), *flags]) == 0
    assert main(["-q", "texts", str(local), "--out", str(there), *flags]) == 0
    for setting in (f"storage.endpoint_url={endpoint}", "storage.retries=1"):
        assert main(["-q", "config", "set", str(there), setting]) == 0
    assert main(["-q", "texts", url, "--out", str(there), *flags]) == 0
    a = _texts_tables(here, str(local))
    b = _texts_tables(there, url)
    assert {"texts_documents", "texts_occupations", "texts_who"} <= set(a)
    assert len(a["texts_documents"]) == 27  # 30 lines, 3 empty texts
    assert [n for n in a if a[n] != b[n]] == []
    sources = {r[1] for r in _texts_tables(there, "")["texts_documents"]}
    assert sources == {url}  # the old local rows are gone
    assert main(["-q", "texts", url, "--out", str(there), *flags]) == 0  # skipped
    fs.pipe(path, "\n".join(local.read_text().splitlines()[:10]).encode() + b"\n")
    assert main(["-q", "texts", url, "--out", str(there), *flags]) == 0
    return there


def test_texts_over_memory_equal_local(tmp_path, memory_root):
    _fs, _root, base = memory_root
    there = texts_over_store_equal_local(tmp_path, f"{base}/bios.jsonl", "")
    assert len(_texts_tables(there, "")["texts_documents"]) == 9  # the rewritten object


def test_texts_over_s3_equal_local(s3, tmp_path):  # noqa: F811
    server, _ = s3
    url = f"s3://{BUCKET}/texts/bios.jsonl"
    there = texts_over_store_equal_local(tmp_path, url, server.url)
    assert len(_texts_tables(there, "")["texts_documents"]) == 9


# -- import-images of a folder on a store ----------------------------------------------------
def _prompt_folders(study, folder: Path) -> Path:
    """A folder per prompt (``<prompt text>/<n>.png``) of two of the study's prompts, with a
    file that is not an image and a hidden folder (skipped)."""
    from image_fixtures import encode, photo

    texts = [
        r[0] for r in study.con.execute("SELECT text FROM prompts ORDER BY 1 LIMIT 2").fetchall()
    ]
    for i, (text, name) in enumerate(zip(texts, ("astronaut", "camera"), strict=True)):
        (folder / text).mkdir(parents=True)
        (folder / text / "0.png").write_bytes(encode(photo(name), "PNG"))
        (folder / text / "1.png").write_bytes(encode(photo(name)[::2, ::2], "PNG"))
        if i == 0:
            (folder / text / "2.png").write_bytes(b"not an image at all")
            (folder / text / "notes.txt").write_text("not read")
    (folder / ".cache" / texts[0]).mkdir(parents=True)
    (folder / ".cache" / texts[0] / "0.png").write_bytes(encode(photo("camera"), "PNG"))
    return folder


def _bafis(study, folder: Path) -> Path:
    """A BAFIS folder: ``metadata.json`` naming ``0.png`` (here) and ``1.png`` (missing)."""
    from image_fixtures import encode, photo

    (text,) = [
        r[0]
        for r in study.con.execute("SELECT text FROM prompts ORDER BY 1 DESC LIMIT 1").fetchall()
    ]
    folder.mkdir(parents=True)
    meta = {k: {"model": "bafis-model", "prompt": text} for k in ("0", "1")}
    (folder / "metadata.json").write_text(json.dumps(meta), encoding="utf-8")
    (folder / "0.png").write_bytes(encode(photo("astronaut")[::3, ::3], "PNG"))
    return folder


def _upload(fs, local: Path, prefix: str) -> None:
    for f in sorted(local.rglob("*")):
        if f.is_file():
            fs.put_file(str(f), f"{prefix}/{f.relative_to(local).as_posix()}")


def _images(study) -> list[tuple]:
    query = "SELECT image_id, model_id, prompt_id FROM images ORDER BY 1"
    return study.con.execute(query).fetchall()


def test_import_images_of_folders_on_s3_equal_local(s3, make_study, laion_path, tmp_path):  # noqa: F811
    """``import-images s3://.../folder/`` (a folder per prompt; a BAFIS folder) imports what
    the same local folder imports: the same image ids, the same drop reasons (a file that is
    not an image; a file the metadata names and the store lacks: ``missing_file``)."""
    from corpus_audit.stages.import_images import import_images
    from corpus_audit.stages.select import select

    server, _ = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    here = _study(make_study, [str(laion_path)], "fold_here")
    there = _study(make_study, [str(laion_path)], "fold_there", server.url, retries=1)
    for study in (here, there):
        select(study, progress=False)
    per_prompt = _prompt_folders(here, tmp_path / "dalle")
    bafis = _bafis(here, tmp_path / "bafis")
    _upload(fs, per_prompt, f"{BUCKET}/gen/dalle")
    _upload(fs, bafis, f"{BUCKET}/gen/bafis")
    local = import_images(here, [str(per_prompt), str(bafis)], model="dall-e-3")
    remote = import_images(
        there, [f"s3://{BUCKET}/gen/dalle/", f"s3://{BUCKET}/gen/bafis"], model="dall-e-3"
    )
    assert (local.rows_out, local.dropped) == (remote.rows_out, remote.dropped)
    assert local.rows_out == 5 and set(local.dropped) == {"missing_file", "not_an_image"}
    assert _images(there) == _images(here) and len(_images(here)) == 5
    query = "SELECT layout, source_sha256 FROM image_imports ORDER BY 1"
    assert there.con.execute(query).fetchall() == here.con.execute(query).fetchall()
    paths = [r[0] for r in there.con.execute("SELECT path FROM images").fetchall()]
    assert all(p.startswith("imports/") and (there.root / p).is_file() for p in paths)
    assert not list(there.root.glob("imports/*/dalle/.cache"))  # hidden: not mirrored
    # the store changes: the mirror follows it (a deleted object leaves the mirror)
    gone = next(f for f in fs.find(f"{BUCKET}/gen/dalle") if f.endswith("/1.png"))
    fs.rm(gone)
    again = import_images(there, [f"s3://{BUCKET}/gen/dalle"], model="dall-e-3")
    assert again.rows_out == 0 and again.skipped  # the rest was imported before
    mirror = next(there.root.glob("imports/*/dalle"))
    mirrored = {p.relative_to(mirror).as_posix() for p in mirror.rglob("*") if p.is_file()}
    prompt = gone.rsplit("/", 2)[-2]
    assert len(mirrored) == 4 and f"{prompt}/0.png" in mirrored  # 5 images, 2.png included
    assert f"{prompt}/1.png" not in mirrored and f"{prompt}/notes.txt" not in mirrored


def _folder_study(make_study, laion_path: Path):
    return _study(make_study, [str(laion_path)], "fold_mem")


def test_import_images_of_a_folder_refuses_odd_keys_and_too_much(
    make_study, laion_path, memory_root, monkeypatch, capsys
):
    """Refused before anything is copied, one line naming the folder: a key with a ``..``
    part, a folder over the caps, a URL naming one object that is no manifest, no object."""
    from corpus_audit.backends import import_remote
    from corpus_audit.stages.import_images import import_images

    fs, root, base = memory_root
    study = _folder_study(make_study, laion_path)
    fs.pipe(f"{root}/ok/a prompt/0.png", b"x" * 10)
    fs.pipe(f"{root}/ok/a prompt/1.png", b"x" * 10)
    fs.pipe(f"{root}/odd/a prompt/../../escape.png", b"x")
    with pytest.raises(ManifestError, match=r"odd/a prompt/\.\./\.\./escape\.png: an object key"):
        import_images(study, [f"{base}/odd"], model="m")
    monkeypatch.setattr(import_remote, "MAX_FOLDER_FILES", 1)
    with pytest.raises(ManifestError, match=r"/ok: 2 files of 20 bytes to mirror, more than"):
        import_images(study, [f"{base}/ok/"], model="m")
    monkeypatch.setattr(import_remote, "MAX_FOLDER_FILES", 10)
    monkeypatch.setattr(import_remote, "MAX_FOLDER_BYTES", 15)
    with pytest.raises(ManifestError, match=r"limit \(10 files, 15 bytes\)"):
        import_images(study, [f"{base}/ok"], model="m")
    with pytest.raises(ManifestError, match=r"0\.png: a source on a store is a manifest file"):
        import_images(study, [f"{base}/ok/a prompt/0.png"], model="m")
    with pytest.raises(ManifestError, match=r"/nowhere: no such folder on the store"):
        import_images(study, [f"{base}/nowhere"], model="m")
    from corpus_audit.cli import main  # the command: exit status 2, one line

    capsys.readouterr()
    assert main(["-q", "import-images", str(study.root), f"{base}/odd", "--model", "m"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "an object key with an empty, '.' or '..' part" in err
    assert not (study.root / "imports").exists() or not any(
        p.is_file() for p in (study.root / "imports").rglob("*")
    )
    assert study.con.execute("SELECT count(*) FROM images").fetchone() == (0,)


def test_import_images_of_a_folder_with_a_denied_object(s3, make_study, laion_path, capsys):  # noqa: F811
    """An object of the folder the store refuses (403, injected by the fault proxy): one
    line naming it, exit status 2, nothing imported, no partial file left in the mirror."""
    from s3_server import FaultProxy

    from corpus_audit.cli import main

    server, creds = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    fs.pipe(f"{BUCKET}/denied/a prompt/0.png", b"x" * 100)
    fs.pipe(f"{BUCKET}/denied/a prompt/1-refused.png", b"x" * 100)
    with FaultProxy(server.port) as proxy:
        study = _study(make_study, [str(laion_path)], "deny", proxy.url, retries=0)
        root = study.root
        study.close()
        proxy.faults.deny = "refused"
        capsys.readouterr()
        url = f"s3://{BUCKET}/denied"
        assert main(["-q", "import-images", str(root), url, "--model", "m"]) == 2
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert len(lines) == 1 and "1-refused.png" in lines[0] and "access denied" in lines[0]
    assert not any(v in lines[0] for v in creds.values())
    assert not list(root.glob("imports/**/*.part"))
    from corpus_audit.core.store import Study

    with Study.open(root, read_only=True) as reopened:
        assert reopened.con.execute("SELECT count(*) FROM image_imports").fetchone() == (0,)
