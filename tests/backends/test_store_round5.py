"""Issue 44, part B (reliability round 5) on object stores: a planted symbolic link in a
study's import mirror (H4), a key part too long for a local name (M11), listings planned in
bounded time (M12), a server without Range support (M10), an object replaced during
``select`` and an ``endpoint_url`` with a path or a query. Against the REAL S3-compatible
server of :func:`test_storage.s3` (moto on 127.0.0.1) where the finding was on S3, else on
fsspec's ``memory://`` store (fast)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from test_storage import BUCKET, _study, s3  # noqa: F401 - s3: the fixture

from corpus_audit.backends import storage


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_a_planted_symlink_in_the_mirror_deletes_nothing_outside(
    s3,  # noqa: F811
    make_study,
    laion_path,
    tmp_path,
    capsys,
):
    """H4: ``<study>/imports/<hash>/d2`` is a link to a folder of files outside the study (a
    study received from someone else): ``import-images s3://.../d2/`` leaves that folder
    as it was (before: every file in it deleted, the mirror written there) and says so in
    one line, exit 2, nothing imported."""
    from corpus_audit.cli import main
    from corpus_audit.core.store import Study
    from corpus_audit.stages.select import select

    server, _ = s3
    fs = storage.filesystem("s3://x", storage.StoreOptions(server.url, retries=1))[0]
    fs.pipe(f"{BUCKET}/d2/a prompt/0.png", b"x" * 100)
    victim = tmp_path / "precious"
    (victim / "deep").mkdir(parents=True)
    (victim / "thesis.tex").write_text("years of work")
    (victim / "deep" / "data.csv").write_text("a,b\n1,2\n")
    before = _files(victim)
    study = _study(make_study, [str(laion_path)], "h4", server.url, retries=1)
    select(study, progress=False)
    root = study.root
    study.close()
    url = f"s3://{BUCKET}/d2"
    mirror = root / "imports" / hashlib.sha256(url.encode()).hexdigest()[:16] / "d2"
    mirror.parent.mkdir(parents=True)
    mirror.symlink_to(victim, target_is_directory=True)
    capsys.readouterr()
    assert main(["-q", "import-images", str(root), f"{url}/", "--model", "m"]) == 2
    out = capsys.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert len(lines) == 1 and "is a symbolic link" in lines[0] and "d2" in lines[0], lines
    assert _files(victim) == before  # nothing deleted, nothing written there
    assert mirror.is_symlink()
    # a link deeper in the mirror (a prompt folder pointing out) is refused the same way
    mirror.unlink()
    (mirror / "a prompt").parent.mkdir(parents=True)
    (mirror / "a prompt").symlink_to(victim, target_is_directory=True)
    assert main(["-q", "import-images", str(root), f"{url}/", "--model", "m"]) == 2
    assert "a prompt: is a symbolic link" in capsys.readouterr().err
    assert _files(victim) == before
    with Study.open(root, read_only=True) as reopened:
        assert reopened.con.execute("SELECT count(*) FROM images").fetchone() == (0,)


def test_a_key_part_too_long_for_a_local_name_is_one_line(make_study, laion_path, capsys):
    """M11: a folder on a store whose key has a part over 255 bytes (a long prompt as folder
    name; S3 keys may have 1,024): one line naming the key, exit 2, nothing imported (before:
    an ENAMETOOLONG traceback)."""
    import secrets

    import fsspec

    from corpus_audit.cli import main

    fs = fsspec.filesystem("memory")
    root = f"/long{secrets.token_hex(4)}"
    fs.pipe(f"{root}/gen/{'a nurse at work ' * 20}/0.png", b"x" * 10)
    study = _study(make_study, [str(laion_path)], "m11")
    where = study.root
    study.close()
    try:
        capsys.readouterr()
        url = f"memory://{root.lstrip('/')}/gen"
        assert main(["-q", "import-images", str(where), url, "--model", "m"]) == 2
        out = capsys.readouterr()
        lines = (out.out + out.err).strip().splitlines()
        assert len(lines) == 1 and "an object key part of 320 bytes" in lines[0], lines
        assert "Traceback" not in out.err
    finally:
        fs.rm(root, recursive=True)


PLANNED_OBJECTS = 20_000


def test_a_prefix_of_20000_objects_is_planned_in_bounded_time(tmp_path):
    """M12: ``select``'s planning of a prefix (listing, fingerprints, each file's units) over
    20,000 parquet objects on ``memory://`` takes under 10 s of CPU (before: quadratic, 71 s for
    8,000, over 300 s for 20,000): the listing's sizes and content markers are used instead
    of one request per object, and nothing scans the whole store per object."""
    import io
    import secrets
    import time

    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq
    from fsspec.implementations.memory import MemoryFile

    from corpus_audit.backends.corpus import fingerprint_entry, resolve_corpus
    from corpus_audit.stages.select.scan import plan_units

    buf = io.BytesIO()
    pq.write_table(pa.table({"caption": ["a nurse at work", "a chef"], "url": ["u", "v"]}), buf)
    fs = fsspec.filesystem("memory")
    root = f"/plan{secrets.token_hex(4)}"
    for i in range(PLANNED_OBJECTS):  # as fs.pipe would, without its own per-key scan
        key = f"{root}/part-{i:06d}.parquet"
        fs.store[key] = MemoryFile(fs, key, buf.getvalue())
    try:
        # CPU seconds of this process: the work planning does, whatever else the machine runs
        start = time.process_time()
        files = resolve_corpus([f"memory://{root.lstrip('/')}/"])
        fingerprints = [fingerprint_entry(f) for f in files]
        plan = plan_units(files)
        seconds = time.process_time() - start
        assert len(files) == len(plan.units) == PLANNED_OBJECTS
        assert fingerprints[0]["object"]["size"] == len(buf.getvalue())
        assert seconds < 10, f"planning {PLANNED_OBJECTS} objects took {seconds:.1f} s"
        # the listing's markers are what a fresh request says (a fingerprint stays valid)
        from corpus_audit.backends import storage as st

        fresh = st.identity(f"memory://{root.lstrip('/')}/part-000007.parquet")
        assert fingerprints[7]["object"] == fresh
    finally:
        for key in [k for k in fs.store if k.startswith(root + "/")]:
            del fs.store[key]


def test_an_object_replaced_while_select_reads_it_is_changed_not_corrupt(
    s3,  # noqa: F811
    laion_path,
    tmp_path,
):
    """Low: the object is replaced on the store after ``select`` planned it (its listing's
    size and ETag) and before a unit is read: one line saying it changed since the run
    started (the read asks for the planned ETag: a 412), not that the file is corrupt."""
    import pyarrow.parquet as pq
    import pytest

    from corpus_audit.backends.corpus import iter_clean_batches, resolve_corpus
    from corpus_audit.core.errors import CorpusError
    from corpus_audit.stages.select.scan import plan_units

    server, _ = s3
    options = storage.StoreOptions(server.url, retries=0)
    fs = storage.filesystem("s3://x", options)[0]
    key = f"{BUCKET}/replaced/laion.parquet"
    fs.put_file(str(laion_path), key)
    (file,) = resolve_corpus([f"s3://{BUCKET}/replaced/"], store=options)
    plan = plan_units([file])
    smaller = tmp_path / "smaller.parquet"
    pq.write_table(pq.read_table(laion_path).slice(0, 100), smaller)
    fs.put_file(str(smaller), key)  # a new version: other size, other ETag
    (_, work), *_ = plan.units
    with pytest.raises(CorpusError) as err:
        for _batch in iter_clean_batches(file, work.unit, work.columns):
            pass
    message = str(err.value)
    assert "changed since the run started" in message and "\n" not in message, message


def test_a_server_without_range_requests_is_one_line(make_study, laion_path, tmp_path, capsys):
    """M10: a corpus on an HTTP server that ignores ``Range`` (``python -m http.server``):
    ``select`` says so in one line, exit 2 (before: an fsspec ValueError traceback)."""
    import shutil
    import subprocess
    import sys
    import time

    from s3_server import HOST, free_port

    from corpus_audit.cli import main

    folder = tmp_path / "served"
    folder.mkdir()
    shutil.copy(laion_path, folder / "laion.parquet")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", HOST, "-d", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import socket

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the server listens
            try:
                with socket.create_connection((HOST, port), timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        study = make_study([f"http://{HOST}:{port}/laion.parquet"], name="norange")
        root = study.root
        study.close()
        capsys.readouterr()
        assert main(["-q", "select", str(root)]) == 2
        out = capsys.readouterr()
        lines = (out.out + out.err).strip().splitlines()
        assert len(lines) == 1 and "does not answer HTTP range requests" in lines[0], lines
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_an_endpoint_with_a_path_or_a_query_is_refused(make_study, laion_path, capsys):
    """Low: ``storage.endpoint_url`` with a path, a query or a fragment (joined to every
    request's URL differently by each SDK) is refused in one line naming the part, the value
    not repeated; a plain ``http://host:port`` (with or without a final slash) is kept."""
    from corpus_audit.cli import main

    study = make_study([laion_path], name="endpoint")
    root = study.root
    study.close()
    key = "storage.endpoint_url"
    assert main(["-q", "config", "set", str(root), f"{key}=http://127.0.0.1:9000/"]) == 0
    before = (root / "study.toml").read_bytes()
    for value, part in (
        ("http://127.0.0.1:9000/bucket/sub", "a path"),
        ("http://127.0.0.1:9000/?token=Zq9secret", "a query"),
        ("http://127.0.0.1:9000#frag", "a fragment"),
    ):
        capsys.readouterr()
        assert main(["-q", "config", "set", str(root), f"{key}={value}"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"this one has {part}" in err, err
        assert "Zq9secret" not in err
        assert (root / "study.toml").read_bytes() == before
