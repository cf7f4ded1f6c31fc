"""`corpus-audit demo` end to end on the bundled corpus: what `make demo` runs, through the CLI.

Real stages throughout (DuckDB select, spaCy + gender-guesser indicators, SBERT + FAISS
neighbours, analysis, report); the image stages have nothing to do on a captions-only corpus
and must say so. A second run must resume (skip every finished stage) and change nothing.
"""

from __future__ import annotations

import csv
import html
from pathlib import Path

import duckdb
import pytest

from corpus_audit.cli import main
from corpus_audit.demo import DEMO_SAMPLE_SIZE

TABLES = ("captions", "mentions", "samples", "indicators", "similarity_diagnostics")


def _counts(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, request):
    """One `corpus-audit demo` run in a fresh directory with an empty embedding cache."""
    root = tmp_path_factory.mktemp("demo")
    mp = pytest.MonkeyPatch()
    mp.setenv("CORPUS_AUDIT_CACHE", str(root / "cache"))
    request.addfinalizer(mp.undo)
    study = root / "demo_study"
    assert main(["-q", "demo", str(study)]) == 0
    return study


def test_demo_writes_every_output_it_announces(demo_run: Path):
    for rel in (
        "summary/indicator_summary.csv",
        "summary/indicator_summary.html",
        "summary/top_neighbors.html",
        "report/report.html",
    ):
        assert (demo_run / rel).is_file(), rel
    rows = list(csv.DictReader((demo_run / "summary/indicator_summary.csv").open()))
    by_occ = {r["occupation"]: r for r in rows}
    # Real counts of the bundled LAION 10k + COCO val2017 captions (see tests/test_select.py).
    assert int(by_occ["student"]["captions"]) == 31
    assert int(by_occ["teacher"]["captions"]) == 23
    for r in rows:
        parts = [float(r[k]) for k in ("pct_male_only", "pct_female_only", "pct_both")]
        assert sum(parts) == pytest.approx(float(r["pct_any_indicator"]), abs=0.2)


def test_demo_database_holds_real_stage_results(demo_run: Path):
    with duckdb.connect(str(demo_run / "study.duckdb"), read_only=True) as con:
        strategies = dict(
            con.execute("SELECT strategy, count(*) FROM samples GROUP BY strategy").fetchall()
        )
        assert set(strategies) == {"keyword", "no_indicators", "nn", "nn_no_indicators"}
        biggest = con.execute(
            "SELECT max(n) FROM (SELECT count(*) n FROM samples "
            "GROUP BY strategy, occupation, prompt_id)"
        ).fetchall()[0][0]
        assert biggest == DEMO_SAMPLE_SIZE
        # Where an occupation has more captions than k, nn takes the k most prompt-like ones:
        # its mean similarity is the maximum over all k-subsets, so never below keyword's
        # (equal when the random sample happens to be the same set).
        rows = con.execute(
            """
            SELECT occupation, prompt_id,
                   max(mean_similarity) FILTER (WHERE strategy = 'nn') AS nn,
                   max(mean_similarity) FILTER (WHERE strategy = 'keyword') AS kw
            FROM similarity_diagnostics
            WHERE occupation IN (SELECT occupation FROM mentions GROUP BY 1 HAVING count(*) > ?)
            GROUP BY ALL
            """,
            [DEMO_SAMPLE_SIZE],
        ).fetchall()
        assert rows and all(nn >= kw - 1e-6 for _, _, nn, kw in rows)
        assert sum(nn for _, _, nn, _ in rows) > sum(kw for _, _, _, kw in rows) + 0.1
        statuses = dict(
            con.execute(
                "SELECT stage, arg_max(status, finished_at) FROM stage_runs GROUP BY stage"
            ).fetchall()
        )
    # Captions-only corpus: the image stages run, find nothing to do, and say so.
    assert statuses["images"] == statuses["generate"] == statuses["label"] == "skipped"
    assert statuses["select"] == statuses["neighbors"] == statuses["report"] == "done"


def test_demo_pages_escape_corpus_html(demo_run: Path):
    with duckdb.connect(str(demo_run / "study.duckdb"), read_only=True) as con:
        tagged = [
            t
            for (t,) in con.execute("SELECT text FROM captions WHERE text LIKE '%<%>%'").fetchall()
        ]
    assert tagged, "the demo corpus holds captions with HTML markup (LAION scrapes)"
    pages = [
        (demo_run / rel).read_text(encoding="utf-8")
        for rel in (
            "summary/indicator_summary.html",
            "summary/top_neighbors.html",
            "report/report.html",
        )
    ]
    for text in tagged:
        for page in pages:
            assert text not in page  # never raw
    assert any(html.escape(t) in pages[2] for t in tagged)  # and shown escaped in the report


def test_demo_rerun_resumes_and_changes_nothing(demo_run: Path, capsys):
    before = _counts(demo_run / "study.duckdb")
    capsys.readouterr()
    assert main(["-q", "demo", str(demo_run)]) == 0
    out = capsys.readouterr().out
    assert "[select] skipped" in out and "[neighbors] skipped" in out
    assert "report: " in out
    assert _counts(demo_run / "study.duckdb") == before


def test_status_says_why_image_stages_were_skipped(demo_run: Path, capsys):
    capsys.readouterr()
    assert main(["status", str(demo_run / "study.toml")]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line}
    assert set(lines) >= {"stage", "select", "indicators", "neighbors", "analyze", "report"}
    assert "skipped" in lines["images"] and "no image sources configured" in lines["images"]
    assert "generate.models is empty" in lines["generate"]
