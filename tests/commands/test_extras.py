"""A stage whose optional library is missing stops before it writes anything, in one line that
names the extra to install (exit 2). The library is hidden (``sys.modules[name] = None``, what
Python's import system reads as "not installed"); the wheel test (test_demo.py) checks the
same on a real install without the extra."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import duckdb
import pytest

from corpus_audit.cli import main
from corpus_audit.core.extras import EXTRAS, installed, missing


def _state(root: Path) -> tuple[str, str]:
    """A digest of the study's files and its stage runs."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix not in {".wal", ".lock"}:
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
        runs = con.execute("SELECT count(*) FROM stage_runs").fetchall()[0][0]
    return h.hexdigest(), runs


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_every_extra_is_installed_in_the_test_environment():
    assert missing(EXTRAS) == []


@pytest.mark.parametrize(
    ("hidden", "verb", "extra"),
    [("spacy", "indicators", "text"), ("faiss", "neighbors", "embed"), ("spacy", "run", "text")],
)
def test_a_stage_without_its_library_stops_before_writing(
    make_study, laion_path, monkeypatch, capsys, hidden, verb, extra
):
    study = make_study([laion_path])
    root = study.root
    study.close()
    before = _state(root)
    monkeypatch.setitem(sys.modules, hidden, None)
    assert not installed(hidden)
    args = [verb, str(root)] + (["--until", "neighbors"] if verb == "run" else [])
    assert main(["-q", *args]) == 2
    err = _one_line(capsys)
    assert f"pip install 'corpus_audit[{extra}]'" in err, err
    assert _state(root) == before  # nothing written: no select either when `run` stops


def test_the_demo_without_its_libraries_names_the_demo_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    assert main(["-q", "demo", str(tmp_path / "demo_study")]) == 2
    err = _one_line(capsys)
    assert err == (
        "error: corpus-audit demo needs sentence-transformers, not installed: "
        "pip install 'corpus_audit[demo]'"
    )
    assert not (tmp_path / "demo_study").exists()


def test_the_api_checks_too(make_study, laion_path, monkeypatch):
    from corpus_audit.api import Study
    from corpus_audit.core.extras import MissingExtraError

    root = make_study([laion_path]).root
    monkeypatch.setitem(sys.modules, "gender_guesser", None)
    with Study.open(root) as study, pytest.raises(MissingExtraError, match=r"\[text\]"):
        study.run("indicators")
