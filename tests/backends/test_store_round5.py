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
