"""Issue 23, item 5 (and the Low items on messages): raw tracebacks where one line is promised.

A missing table is covered by ``tests/core/test_untrusted_study.py`` (status, report, select, battles
export, run); a roles field over 128 KiB by ``test_lexicon_strict.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from corpus_audit.cli import main
from corpus_audit.core.store import open_error
from corpus_audit.methods.lexicon import LexiconError
from corpus_audit.methods.lexicon.pst import load_templates

TEMPLATES = Path(__file__).parents[2] / "corpus_audit" / "methods" / "lexicon" / "data" / "pst"


def _templates(tmp_path: Path, old: str, new: str) -> Path:
    text = (TEMPLATES / "templates_en.toml").read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "templates.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize("placeholder", ["{role:d}", "{role:>20000000}", "{role!r}", "{role!s:>9}"])
def test_template_format_specs_and_conversions_are_refused_at_load(tmp_path, placeholder):
    text = (TEMPLATES / "templates_en.toml").read_text(encoding="utf-8")
    single = next(line for line in text.splitlines() if line.startswith("single ="))
    path = _templates(tmp_path, single, single.replace("{role}", placeholder))
    with pytest.raises(LexiconError, match=r"templates\.single: placeholder .* format spec"):
        load_templates(str(path))


@pytest.mark.parametrize(
    ("key", "placeholder"),
    [("role", "{nope}"), ("finding", "{role.__class__}"), ("instruction", "{role}")],
)
def test_feedback_placeholders_are_checked_at_load(tmp_path, key, placeholder):
    text = (TEMPLATES / "templates_en.toml").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith(f"{key} = "))
    path = _templates(tmp_path, line, line[:-1] + " " + placeholder + '"')
    with pytest.raises(LexiconError, match=rf"feedback\.{key}: unknown placeholder"):
        load_templates(str(path))


def test_feedback_format_spec_is_refused_at_load(tmp_path):
    path = _templates(tmp_path, "{percent}%", "{percent:>99999999}%")
    with pytest.raises(LexiconError, match=r"feedback\.finding: placeholder .* format spec"):
        load_templates(str(path))


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_texts_out_naming_a_file_is_one_line_and_the_file_is_kept(tmp_path, capsys):
    corpus = _jsonl(tmp_path / "bios.jsonl", [{"occupation": "nurse", "text": "She works."}])
    out = tmp_path / "existing.txt"
    out.write_text("keep me", encoding="utf-8")
    code = main(
        ["-q", "texts", str(corpus), "--out", str(out), "--occupation-column", "occupation"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "--out names a file" in err and str(out) in err
    assert out.read_text(encoding="utf-8") == "keep me"


def test_failed_first_texts_run_in_an_existing_folder_keeps_only_what_was_there(tmp_path, capsys):
    corpus = _jsonl(
        tmp_path / "bios.jsonl",
        [
            {"occupation": "nurse", "text": "She works nights.", "gender": "female"},
            {"occupation": "nurse", "text": "He works days.", "gender": "man"},
        ],
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    argv = ["-q", "texts", str(corpus), "--out", str(out), "--occupation-column", "occupation"]
    code = main([*argv, "--gender-column", "gender"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "bios.jsonl: line 2: gender" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    # the same command without the bad column then works in that folder
    assert main(argv) == 0
    assert (out / "study.toml").exists() and (out / "notes.txt").read_text() == "mine"


def test_texts_does_not_rewrite_the_config_of_a_study_a_stage_is_running(tmp_path, capsys):
    """``texts`` on an existing study rewrites its ``study.toml``: like ``config set``, it is
    refused while a stage of the study holds the run lock (issue 33, H5), the file unchanged."""
    from corpus_audit.core.study_lock import run_lock

    corpus = _jsonl(tmp_path / "bios.jsonl", [{"occupation": "nurse", "text": "She works."}])
    out = tmp_path / "out"
    argv = ["-q", "texts", str(corpus), "--out", str(out), "--occupation-column", "occupation"]
    assert main(argv) == 0
    capsys.readouterr()
    before = (out / "study.toml").read_bytes()
    with run_lock(out):  # a stage of this study running (another open file: flock conflicts)
        code = main([*argv[:-1], "occ"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "run of this study is in progress" in err
    assert (out / "study.toml").read_bytes() == before


def test_out_of_memory_on_open_is_not_reported_as_a_lock(tmp_path):
    exc = duckdb.OutOfMemoryException(
        "Out of Memory Error: failed to allocate data of size 16.0 MiB (1.9 GiB/2.0 GiB used)"
    )
    message = open_error(tmp_path / "study.duckdb", exc)
    assert "not enough memory" in message and "another process" not in message
    locked = duckdb.IOException(
        'IO Error: Could not set lock on file "x": Conflicting lock is held in python (PID 1)'
    )
    assert "in use by another process" in open_error(tmp_path / "study.duckdb", locked)
