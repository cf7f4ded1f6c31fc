"""The console is quiet by default: `select` on a real corpus prints its counts and notes in
a few lines, and its table per occupation only with `-v` (global, before or after the verb)."""

from __future__ import annotations

import pytest

from corpus_audit.cli import main
from corpus_audit.commands.verbs.output import set_verbose


@pytest.fixture(autouse=True)
def _quiet_again():
    yield
    set_verbose(False)  # the flag is per command; do not leak it into other tests


def test_select_prints_at_most_ten_lines_and_the_table_with_v(tmp_path, laion_path, capsys):
    study = tmp_path / "study"
    assert main(["init", str(study), "--corpus", str(laion_path)]) == 0
    capsys.readouterr()
    assert main(["-q", "select", str(study)]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[0].startswith("[select] done: 10000 in, ")
    assert len(quiet) <= 10, quiet
    assert any(line.startswith("  (a table of ") and "-v prints it" in line for line in quiet)
    occupations = {"accountant", "nurse", "teacher"}
    assert not [line for line in quiet if line.split("  ")[0].strip() in occupations]

    # -v after the verb: the same (skipped) run, with its table of every occupation
    assert main(["select", "-q", "-v", str(study)]) == 0
    loud = capsys.readouterr().out.splitlines()
    rows = {line.split("  ")[0].strip() for line in loud}
    assert occupations <= rows and len(loud) > 50
    # and -v before the verb
    assert main(["-v", "-q", "select", str(study)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(loud)
