"""`corpus-audit demo` end to end on the bundled corpus: what `make demo` runs, through the CLI.

Real stages throughout (DuckDB select, spaCy + gender-guesser indicators, SBERT + FAISS
neighbours, analysis, report) on real LAION, COCO and CC3M captions; the image stages have
nothing to do on a captions-only corpus and must say so. A second run must resume (skip every
finished stage) and change nothing. The second page replays the paper's published tables; it
is rendered in headless Chromium (the harness of test_report_browser.py).
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import re
from pathlib import Path

import duckdb
import pytest

from corpus_audit.cli import main
from corpus_audit.commands.demo import DEMO_FILES, DEMO_SAMPLE_SIZE

DEMO_DATA = Path(__file__).resolve().parents[2] / "corpus_audit" / "demo_data"
CAPTION_COLUMN = {"laion400m_sample_10k.parquet": "TEXT"}  # the others: caption

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
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["-q", "demo", str(study)]) == 0
    (root / "stdout.txt").write_text(printed.getvalue(), encoding="utf-8")  # what a user sees
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
    # Captions of the three bundled files that name the occupation (singular or plural, word
    # boundaries), counted here with one regex per file.
    for occ in ("student", "teacher"):
        expected = 0
        for name in DEMO_FILES:
            column = CAPTION_COLUMN.get(name, "caption")
            expected += duckdb.sql(
                f"SELECT count(*) FROM read_parquet('{DEMO_DATA / name}') "
                f"WHERE regexp_matches(lower({column}), '\\b{occ}s?\\b')"
            ).fetchall()[0][0]
        assert int(by_occ[occ]["captions"]) == expected > 20, occ
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


def test_final_lines_name_both_pages(demo_run: Path):
    printed = (demo_run.parent / "stdout.txt").read_text(encoding="utf-8")
    tail = printed[printed.index("[demo] done") :]
    report = demo_run / "report" / "report.html"
    page = demo_run / "published" / "amplification.html"
    assert f"page 1, the caption audit of the demo corpus: {report}" in tail
    assert (
        "page 2, amplification from the paper's published tables (published numbers, not a "
        f"new measurement): {page}"
    ) in tail
    assert report.is_file() and page.is_file()


def test_amplification_page_replays_the_published_tables(demo_run: Path, shared_data: Path):
    """Page 2: the recomputed means (checked against the shared copy of the tables in
    test_published.py), the paper's Table 3 beside them, labelled as published numbers."""
    page = (demo_run / "published" / "amplification.html").read_text(encoding="utf-8")
    assert "Published numbers, not a new measurement" in page
    for name in ("percent_female_sd14.tsv", "percent_female_sd15.tsv"):
        bundled = DEMO_DATA / "published" / name
        assert bundled.read_bytes() == (shared_data / "seed003_published" / name).read_bytes()
    tables = re.findall(
        r'<table id="amplify-table-\d" class="amplify-table">(.*?)</table>', page, re.S
    )
    assert len(tables) == 2
    # recomputed (two decimals) and published, prompt 3 of SD 1.5 and the averages
    assert re.search(
        r"<td>prompt3</td>.*?11\.14</td>\s*<td class=\"n\">11\.15</td>", tables[1], re.S
    )
    assert re.search(
        r"average \(4 prompts\).*?12\.07</td>\s*<td class=\"n\">12\.07</td>", tables[1], re.S
    )
    assert re.search(
        r"average \(4 prompts\).*?12\.56</td>\s*<td class=\"n\">12\.57</td>", tables[0], re.S
    )
    assert "Stable Diffusion 1.4" in page and "Stable Diffusion 1.5" in page
    assert page.count('<details class="excluded">') == 2


def test_amplification_page_renders_in_chromium(demo_run: Path, tmp_path: Path):
    """Headless Chromium shows both per-prompt tables and both scatter figures, decoded."""
    from test_report_browser import HEAD_PROBE, chromium, console_lines, run_chromium

    chromium()
    probe = """<script>
window.addEventListener('load', function () {
  var out = {tables: [], figures: []};
  document.querySelectorAll('table.amplify-table').forEach(function (t) {
    out.tables.push({rows: t.querySelectorAll('tbody tr').length,
                     height: t.getBoundingClientRect().height});
  });
  document.querySelectorAll('figure[id^="fig-amplify-"] img').forEach(function (i) {
    out.figures.push({ok: i.complete && i.naturalWidth > 0,
                      width: i.getBoundingClientRect().width});
  });
  out.note = (document.getElementById('page-note') || {}).textContent || '';
  out.external = Array.prototype.slice.call(document.querySelectorAll('[src],[href]'))
    .map(function (e) { return e.getAttribute('src') || e.getAttribute('href'); })
    .filter(function (u) { return !(u.indexOf('data:') === 0 || u.indexOf('#') === 0); });
  var pre = document.createElement('pre');
  pre.id = 'probe-result';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""
    import html as html_lib
    import json

    page = (demo_run / "published" / "amplification.html").read_text(encoding="utf-8")
    copy = tmp_path / "probed.html"
    copy.write_text(
        page.replace("<head>", "<head>" + HEAD_PROBE, 1).replace("</body>", probe + "</body>", 1),
        encoding="utf-8",
    )
    proc = run_chromium(["--dump-dom", copy.as_uri()], tmp_path / "profile")
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found, proc.stdout[-1500:]
    out = json.loads(html_lib.unescape(found.group(1)))
    assert console_lines(proc.stderr) == []
    assert [t["rows"] for t in out["tables"]] == [5, 5]  # 4 prompts + the average, per model
    assert all(t["height"] > 100 for t in out["tables"])
    assert len(out["figures"]) == 2 and all(f["ok"] and f["width"] > 400 for f in out["figures"])
    assert out["note"].startswith("Published numbers, not a new measurement")
    assert out["external"] == []


def test_demo_report_leads_with_its_findings(demo_run: Path, tmp_path: Path):
    """Issue 41: the demo report opens with its findings inside the first 1400 x 900 screen,
    says in one line what it could not measure (no images: no amplification, no empty figure),
    shows no table or column of dashes, no stage of another study kind, and is at most 8,000 px
    high at 1400 px wide (16,024 px before)."""
    from report_frame import assert_reader_frame, frame_probe

    out = frame_probe(demo_run / "report" / "report.html", tmp_path)
    print(f"demo report: {out['height']} px high at 1400 px wide")
    assert_reader_frame(out)
    assert out["height"] <= 8000, out["height"]
    assert "Captions with an explicit gender indicator" in out["findings_text"]
    assert "(95 % Wilson)" in out["findings_text"]
    assert "Amplification by selection strategy: not measured" in out["findings_text"]
    # no images: no amplification scatter or bars (empty axes), the caption figures drawn
    assert not [f for f in out["figures"] if f.startswith(("fig-scatter_", "fig-amplif"))]
    assert {"fig-indicators", "fig-similarity"} <= set(out["figures"])
    assert out["sections"].index("results") > out["sections"].index("captions")
    page = (demo_run / "report" / "report.html").read_text(encoding="utf-8")
    assert page.count("no word reaches") <= 1  # the empty marked-word tables: one line
    assert "<td>pst_" not in page  # PST stages are not this study's
    assert '<details class="note" id="paper-settings">' in page  # a collapsed note
