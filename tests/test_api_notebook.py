"""The API as a notebook uses it: a study's repr and HTML view (kind, stages by state, models,
row counts), summary(), report() returning the page, query() read-only with bound parameters,
integer counts in status(), a short StageRun with its summary as a DataFrame, errors that
point at study.tables(), and a study read (status, tables, query, export, the CLI's status)
while another process holds it. Real LAION captions, real DuckDB."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from corpus_audit import CorpusAuditError, Study
from corpus_audit.cli import main


@pytest.fixture(scope="module")
def selected(tmp_path_factory, laion_path) -> Path:
    """A study whose select ran on the real LAION sample (50 captions per occupation)."""
    root = tmp_path_factory.mktemp("nb") / "study"
    with Study.create(root, [laion_path], settings={"select.sample_size": 50}) as study:
        (run,) = study.run("select", progress=False)
        assert len(repr(run)) < 300
        assert repr(run).startswith("StageRun('select', done, rows_in=10000, rows_out=")
        assert isinstance(run.summary, pd.DataFrame) and len(run.summary) > 0
    return root


def test_repr_and_html_show_kind_stages_models_and_rows(selected):
    with Study.open(selected) as study:
        captions = int(study.query("SELECT count(*) AS n FROM captions")["n"][0])
        text = repr(study)
        assert text.startswith(f"Study({str(selected)!r}, amplification; stages: done select")
        assert f"captions {captions:,}" in text and "classifier:agegender" in text
        html = study._repr_html_()
        assert "<b>Study</b>" in html and "amplification" in html
        assert f"<td>captions</td><td style='text-align:right'>{captions:,}</td>" in html
        info = study.summary()
        assert info["kind"] == "amplification" and info["stages"]["done"] == ["select"]
        assert "indicators" in info["stages"]["not run"]
        assert info["rows"]["captions"] == captions and isinstance(captions, int)
        assert all(isinstance(n, int) and n > 0 for n in info["rows"].values())
    assert repr(study) == f"Study({str(selected)!r}, closed)"


def test_a_changed_setting_shows_the_stage_stale(tmp_path, laion_path):
    with Study.create(tmp_path / "s", [laion_path], settings={"select.sample_size": 5}) as study:
        study.run("select", progress=False)
        study.set({"select.sample_size": 6})
        assert study.summary()["stages"]["stale"] == ["select"]
        assert "stale select" in repr(study)


def test_status_counts_are_integers(selected):
    with Study.open(selected) as study:
        frame = study.status()
    assert str(frame["rows_in"].dtype) == "Int64" and str(frame["rows_out"].dtype) == "Int64"
    row = frame.set_index("stage").loc["select"]
    assert row["rows_in"] == 10000 and isinstance(row["rows_in"], (int, type(row["rows_in"])))
    assert pd.isna(frame.set_index("stage").loc["indicators", "rows_in"])


def test_query_binds_parameters_and_refuses_writes(selected):
    with Study.open(selected) as study:
        got = study.query(
            "SELECT occupation, count(*) AS n FROM mentions WHERE occupation = ? GROUP BY 1",
            ["teacher"],
        )
        expect = study.table("mentions")
        assert got["n"][0] == (expect["occupation"] == "teacher").sum() > 0
        named = study.query("SELECT $x AS v", {"x": "'; DROP TABLE captions; --"})
        assert named["v"][0] == "'; DROP TABLE captions; --"  # a value, never SQL
        before = study.query("SELECT count(*) AS n FROM captions")["n"][0]
        for sql in (
            "DELETE FROM captions",
            "DROP TABLE captions",
            "INSERT INTO mentions VALUES (1, 'x', 'x')",
            "CREATE TABLE t AS SELECT 1",
            "COPY captions TO 'x.csv'",
            "SELECT 1; DELETE FROM captions",
            "ATTACH 'other.duckdb'",
        ):
            with pytest.raises(CorpusAuditError, match="query: "):
                study.query(sql)
        assert study.query("SELECT count(*) AS n FROM captions")["n"][0] == before
        with pytest.raises(CorpusAuditError, match=r"study\.tables\(\) lists the tables"):
            study.query("SELECT * FROM captionz")
        with pytest.raises(CorpusAuditError, match=r"did you mean captions.*study\.tables\(\)"):
            study.table("captionz")


def test_report_renders_and_returns_the_page(tmp_path, laion_path):
    with Study.create(tmp_path / "r", [laion_path], settings={"select.sample_size": 5}) as study:
        study.run("select", progress=False)
        page = study.report()
        assert page == tmp_path / "r" / "report" / "report.html" and page.is_file()
        assert "<html" in page.read_text(encoding="utf-8").lower()


HOLDER = """
import sys, time
from corpus_audit import Study
study = Study.open(sys.argv[1])
study.set({"select.sample_size": 51})
print("held", flush=True)
time.sleep(60)
"""


def test_a_study_is_readable_while_another_process_holds_it(selected, tmp_path, capsys):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(selected)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CorpusAuditError, match="in use by another process"):
            Study.open(selected)  # writing still needs the study to itself
        with Study.open(selected, read_only=True) as study:
            assert study.read_only and "read-only" in repr(study)
            assert study.root == selected
            assert list(study.status()["stage"])[:1] == ["select"]
            assert "captions" in study.tables(non_empty=True)
            n = study.query("SELECT count(*) AS n FROM captions")["n"][0]
            assert len(study.table("captions")) == n > 0
            result = study.export(tmp_path / "export", tables=["captions"])
            assert (tmp_path / "export" / "captions.parquet").is_file() and result.rows
            with pytest.raises(CorpusAuditError, match="read_only=True"):
                study.run("indicators", progress=False)
            with pytest.raises(CorpusAuditError, match="read_only=True"):
                study.set({"select.sample_size": 3})
        assert main(["status", str(selected)]) == 0  # the CLI reads it too
        assert "select" in capsys.readouterr().out
        assert holder.poll() is None  # the holder was not disturbed
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    with Study.open(selected) as study:  # nothing left behind: the study opens for writing
        assert study.config["select"]["sample_size"] == 51
