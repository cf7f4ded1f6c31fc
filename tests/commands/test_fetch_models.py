"""`corpus-audit fetch-models`: the verb form of `python -m corpus_audit.commands.fetch_models`.
Models already in the folder are kept (no download), so this runs offline on the real files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from corpus_audit.cli import main
from corpus_audit.commands.fetch_models import MODEL_FILES

MODEL_DIR = Path(os.environ["CORPUS_AUDIT_MODEL_DIR"])


def _have_models(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES.values():
        shutil.copyfile(MODEL_DIR / name, folder / name)


def test_the_verb_keeps_models_already_there(tmp_path, capsys, monkeypatch):
    _have_models(tmp_path / "given")
    assert main(["fetch-models", str(tmp_path / "given")]) == 0
    out = capsys.readouterr().out
    for name in MODEL_FILES.values():
        size = (MODEL_DIR / name).stat().st_size
        assert f"{tmp_path / 'given' / name} ({size} bytes)" in out
    assert "fetching" not in out  # nothing downloaded
    # without DEST: where the face detector looks ($CORPUS_AUDIT_MODEL_DIR)
    _have_models(tmp_path / "env")
    monkeypatch.setenv("CORPUS_AUDIT_MODEL_DIR", str(tmp_path / "env"))
    assert main(["fetch-models"]) == 0
    assert str(tmp_path / "env") in capsys.readouterr().out


def test_the_module_form_the_makefile_runs_still_works(tmp_path):
    _have_models(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "corpus_audit.commands.fetch_models", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert all(name in out for name in MODEL_FILES.values())
