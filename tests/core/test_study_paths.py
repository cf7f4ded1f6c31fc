"""Issue 44, part B: a file where a study's folder should be (M5) and a symbolic link inside a
study (H4) are one line each, never a traceback, and nothing is written through the link."""

from __future__ import annotations

import pytest

from corpus_audit.cli import main
from corpus_audit.core.errors import StudyError


def test_init_on_a_file_is_one_line(tmp_path, laion_path, capsys):
    """M5: ``init FILE`` and ``init FILE/sub`` (before: NotADirectoryError tracebacks) and the
    API's ``Study.create(FILE)``: one line naming the file, exit 2, the file unchanged."""
    from corpus_audit import Study

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for target in (a_file, a_file / "sub"):
        capsys.readouterr()
        assert main(["-q", "init", str(target), "--corpus", str(laion_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "notes.txt: is a file, not a folder" in err
    with pytest.raises(StudyError, match="is a file, not a folder"):
        Study.create(a_file, corpus=[str(laion_path)])
    assert a_file.read_text() == "mine"


def test_study_paths_never_lead_through_a_link(make_study, laion_path, tmp_path):
    """H4: ``<study>/report`` a link to a folder outside: the report's path (every output a
    stage writes under the study goes through ``Study.path``) is refused in one line naming
    the link, and nothing is created in the linked folder."""
    study = make_study([laion_path])
    victim = tmp_path / "outside"
    victim.mkdir()
    (study.root / "report").symlink_to(victim, target_is_directory=True)
    with pytest.raises(StudyError, match=r"report: is a symbolic link") as err:
        study.path("report", "assets", "report.html")
    assert "\n" not in str(err.value)
    assert list(victim.iterdir()) == []
    assert study.path("elsewhere", "x.txt").parent.is_dir()  # a plain path still works
