"""The face models live in one folder outside the working directory: `label` run from three
working directories finds them in the user's cache (platformdirs, here under XDG_CACHE_HOME),
and without them the error names `corpus-audit fetch-models`. Real MediaPipe and agegender."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from image_fixtures import encode, photo, seed_captions

from corpus_audit.cli import main
from corpus_audit.commands.fetch_models import MODEL_FILES
from corpus_audit.core.model_dir import model_dir, user_model_dir
from corpus_audit.core.store import Study
from corpus_audit.stages.images import images

REPO_MODELS = model_dir()  # the test session's folder ($CORPUS_AUDIT_MODEL_DIR of conftest)


def _study_with_a_photo(make_study, laion_path, tmp_path: Path, name: str) -> Path:
    study = make_study([laion_path], name=name)
    (cid, _, _) = seed_captions(study, laion_path, n=1)[0]
    folder = tmp_path / f"{name}_photos"
    folder.mkdir()
    (folder / f"{cid}.png").write_bytes(encode(photo("astronaut"), "PNG"))
    study.config.images.sources = [{"kind": "dir", "path": str(folder)}]
    images(study, progress=False)
    study.close()
    return study.root


@pytest.fixture
def user_cache(tmp_path, monkeypatch) -> Path:
    """No $CORPUS_AUDIT_MODEL_DIR; the user cache under tmp_path, holding the two models."""
    monkeypatch.delenv("CORPUS_AUDIT_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = user_model_dir()
    assert folder == tmp_path / "xdg" / "corpus_audit" / "models"
    assert model_dir() == folder
    return folder


def test_label_from_three_working_directories_finds_the_face_model(
    make_study, laion_path, tmp_path, user_cache, monkeypatch, capsys
):
    user_cache.mkdir(parents=True)
    for name in MODEL_FILES.values():
        shutil.copyfile(REPO_MODELS / name, user_cache / name)
    cwds = [tmp_path / "a", tmp_path / "b" / "deeper", Path("/")]
    for i, cwd in enumerate(cwds):
        root = _study_with_a_photo(make_study, laion_path, tmp_path, f"s{i}")
        cwd.mkdir(parents=True, exist_ok=True)
        monkeypatch.chdir(cwd)
        assert main(["-q", "label", str(root)]) == 0, capsys.readouterr().err
        with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
            kept = con.execute("SELECT count(*) FROM face_filter WHERE kept").fetchall()[0][0]
        assert kept == 1, cwd  # the astronaut's one face was found: the model was read
        assert not (cwd / ".cache").exists()


def test_without_the_models_the_error_names_fetch_models(
    make_study, laion_path, tmp_path, user_cache, capsys
):
    root = _study_with_a_photo(make_study, laion_path, tmp_path, "none")
    assert main(["-q", "label", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "corpus-audit fetch-models" in err and str(user_cache) in err
    assert "make install" not in err


def test_the_model_dir_setting_wins(make_study, laion_path, tmp_path, user_cache, capsys):
    """label.model_dir names another folder: the models are read there (none in the cache)."""
    mine = tmp_path / "my models"
    mine.mkdir()
    for name in MODEL_FILES.values():
        shutil.copyfile(REPO_MODELS / name, mine / name)
    root = _study_with_a_photo(make_study, laion_path, tmp_path, "setting")
    assert main(["config", "set", str(root), f"label.model_dir={mine}"]) == 0
    assert main(["-q", "label", str(root)]) == 0, capsys.readouterr().err
    with Study.open(root) as study:
        assert study.count("labels") == 1
