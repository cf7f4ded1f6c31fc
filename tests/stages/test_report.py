"""The HTML report: tables present, numbers from the database, corpus text escaped, nothing
external; the caption-only (demo) case; reruns; the paper-tables notebook."""

from __future__ import annotations

import base64
import io
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from study_builder import HREF_PREFIX, SCRIPT_CAPTION, build_reported

from corpus_audit.core.store import Study

REPO = Path(__file__).resolve().parents[2]


class Page(HTMLParser):
    """Collects tags, attributes, ids and text of a page."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def ids(self) -> set[str]:
        return {a["id"] for _, a in self.tags if a.get("id")}

    def attr_values(self, name: str) -> list[str]:
        return [a[name] or "" for _, a in self.tags if name in a]


@pytest.fixture(scope="module")
def full_report(tmp_path_factory, shared_data) -> Path:
    corpus = [
        shared_data / "laion400m_sample_10k.parquet",
        shared_data / "coco_val2017_captions.parquet",
    ]
    return build_reported(tmp_path_factory.mktemp("full") / "study", corpus)


@pytest.fixture(scope="module")
def caption_report(tmp_path_factory, shared_data) -> Path:
    corpus = [
        shared_data / "laion400m_sample_10k.parquet",
        shared_data / "coco_val2017_captions.parquet",
    ]
    return build_reported(tmp_path_factory.mktemp("captions") / "study", corpus, with_images=False)


def _section(html: str, start_id: str, end_marker: str) -> str:
    start = html.index(f'id="{start_id}"')
    return html[start : html.index(end_marker, start)]


def test_report_has_results_tables_and_figures(full_report: Path):
    html = full_report.read_text(encoding="utf-8")
    page = Page(html)
    ids = page.ids()
    for needed in (
        "results-table",
        "excluded-pairs",
        "indicator-summary",
        "similarity-summary",
        "stage-funnel",
        "image-funnel",
        "percent-table",
        "indicator-match",
        "provenance",
        "limitations",
        "versions",
    ):
        assert needed in ids, needed
    results = _section(html, "results-table", "</table>")
    for name in (
        "sd-tiny-a",
        "sd-tiny-b",
        "keyword",
        "no_indicators",
        "nn",
        "nn_no_indicators",
        "captions_as_prompts",
        "prompt #1",
        "prompt #4",
        "average",
    ):
        assert name in results, name
    # Figures: PNG data URIs that decode, with their PNG + SVG files beside the report.
    from PIL import Image

    figures = [
        a
        for t, a in page.tags
        if t == "img" and (a.get("src") or "").startswith("data:image/png;base64,")
    ]
    assert len(figures) >= 6  # 2 scatter grids, 2 bar charts, indicators, correlation, similarity
    for img in figures:
        data = base64.b64decode(img["src"].split(",", 1)[1])
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "PNG" and im.width > 200
    fig_dir = full_report.parent / "figures"
    for name in ("scatter_sd-tiny-a", "amplification_sd-tiny-b", "indicators", "similarity"):
        assert (fig_dir / f"{name}.png").is_file() and (fig_dir / f"{name}.svg").is_file()
        assert "<svg" in (fig_dir / f"{name}.svg").read_text(encoding="utf-8")[:2000]
    thumbs = [
        a
        for t, a in page.tags
        if t == "img" and (a.get("src") or "").startswith("data:image/jpeg;base64,")
    ]
    assert len(thumbs) >= 10
    with Image.open(io.BytesIO(base64.b64decode(thumbs[0]["src"].split(",", 1)[1]))) as im:
        assert max(im.size) <= 96  # downscaled before inlining
    text = " ".join(page.text)
    assert "binary" in text and "perceived" in text  # the limitations note
    assert "many_faces" in html and "small_face" in html and "no_face" in html  # funnel reasons
    assert "[analysis]" in html  # provenance: the config
    percent = _section(html, "percent-table", "</thead>")
    assert "<th>captions</th><th>images</th>" in percent  # captions behind each %female


def test_numbers_in_report_come_from_the_tables(full_report: Path):
    html = full_report.read_text(encoding="utf-8")
    with Study.open(full_report.parents[1], read_only=True) as study:
        rows = study.con.execute(
            "SELECT model_id, strategy, template_id, mean_amplification, ci_low, ci_high "
            "FROM amplification_summary WHERE mean_amplification IS NOT NULL"
        ).fetchall()
        excluded = study.count("amplification", "excluded")
        corr = study.con.execute("SELECT r FROM indicator_correlation").fetchone()[0]
    results = _section(html, "results-table", "</table>")
    assert rows
    for _model, _strategy, _template, mean, lo, hi in rows:
        assert f"{mean:+.1f}" in results
        assert f"[{lo:+.1f}, {hi:+.1f}]" in results
    assert f"Excluded pairs ({excluded})" in html
    assert f"{corr:.3f}" in html


def test_corpus_text_is_escaped_and_nothing_is_external(full_report: Path, caption_report: Path):
    for report in (full_report, caption_report):
        html = report.read_text(encoding="utf-8")
        # The script caption is shown as text, never as a tag.
        assert "Teacher of the year &lt;script&gt;alert(1)&lt;/script&gt; award" in html
        assert re.search(r"<\s*script", html, re.IGNORECASE) is None
        # The real LAION caption with an <a href> tag is text too.
        assert "&lt;a href=&#39;http://nymetroparents.com" in html
        assert HREF_PREFIX not in html
        page = Page(html)
        assert SCRIPT_CAPTION in " ".join(page.text)
        assert not [
            t
            for t, _ in page.tags
            if t in ("script", "iframe", "object", "embed", "link", "base", "form")
        ]
        assert [t for t, _ in page.tags if t == "a"] and not [
            a for t, a in page.tags if t == "a" and not (a.get("href") or "").startswith("#")
        ]
        for value in page.attr_values("src") + page.attr_values("href"):
            assert value.startswith(("data:", "#")), value[:80]
        style = html[html.index("<style>") : html.index("</style>")]
        assert "url(" not in style and "@import" not in style
        # Every attribute that carries corpus text stays inside its quotes.
        for _tag, attrs in page.tags:
            assert not any(k.startswith("on") for k in attrs)


def test_caption_only_report_says_which_image_stages_did_not_run(caption_report: Path):
    html = caption_report.read_text(encoding="utf-8")
    page = Page(html)
    ids = page.ids()
    assert "image-stages" in ids and "results-table-missing" in ids
    assert "results-table" not in ids
    notes = _section(html, "image-stages", "</div>")
    assert "images</strong> did not run" in notes
    assert "[images] sources is empty" in notes
    assert "[generate] models is empty" in notes
    assert "label</strong> did not run" in notes and "no images to label" in notes
    # Caption-side results are there: indicator summary, similarity, top NN captions.
    assert {"indicator-summary", "similarity-summary"} <= ids
    summary = _section(html, "indicator-summary", "</table>")
    for occupation in ("chef", "cook", "doctor", "student", "teacher"):
        assert f"<td>{occupation}</td>" in summary
    assert "Top nearest-neighbour captions" in html
    assert "A photo of the face of a teacher" in html
    figures = [a for t, a in page.tags if t == "img"]
    assert len(figures) == 2  # indicators + similarity; nothing needs images


def test_report_stage_records_and_skips(tmp_path: Path, shared_data: Path):
    from study_builder import build

    from corpus_audit.core.pipeline import init_study
    from corpus_audit.report import report
    from corpus_audit.stages.analyze import analyze

    corpus = [shared_data / "laion400m_sample_10k.parquet"]
    study = init_study(
        tmp_path / "s", [str(corpus[0])], overrides={"analysis": {"bootstrap": 50, "thumbnails": 0}}
    )
    build(study, corpus)
    before = report(study, progress=False)  # before analyze: no results, a clear note
    assert any("analyze stage has not run" in m for m in before.messages)
    html = Path(before.outputs["report"]).read_text(encoding="utf-8")
    assert "has not run: no results tables yet" in html
    analyze(study, progress=False)
    first = report(study, progress=False)
    assert not first.skipped and first.rows_out == 1
    assert not any("older than" in m for m in first.messages)
    assert study.last_run("report")["provenance"]["report_path"] == first.outputs["report"]
    again = report(study, progress=False)
    assert again.skipped
    assert "data:image/jpeg" not in Path(first.outputs["report"]).read_text(encoding="utf-8")
    # New labels make the analysis stale: the report says so instead of showing old numbers.
    study.con.execute("UPDATE labels SET label = 'male' WHERE label = 'female'")
    stale = report(study, progress=False)
    assert not stale.skipped and any("older than" in m for m in stale.messages)
    assert "The analysis is older than" in Path(stale.outputs["report"]).read_text("utf-8")
    study.close()


def test_report_cli(full_report: Path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", "-q", "report", str(full_report.parents[1])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[report]" in proc.stdout and str(full_report) in proc.stdout


def test_the_api_gives_the_report_figures_and_table3(full_report: Path):
    """What notebooks/paper_tables.ipynb did on a finished study before it moved to the
    published tables (tests/e2e/test_notebooks.py): the report's figures and the Table 3 rows,
    now through the public API."""
    from corpus_audit import Study as ApiStudy

    with ApiStudy.open(full_report.parents[1]) as study:
        figures = study.figures()
        summary = study.table("amplification_summary")
    assert {"scatter_sd-tiny-a", "scatter_sd-tiny-b"} <= set(figures)
    assert {"amplification_sd-tiny-a", "amplification_sd-tiny-b"} <= set(figures)
    assert all(len(fig.axes) >= 1 for fig in figures.values())
    overall = summary[summary["template_id"].isna()].set_index(["model_id", "strategy"])
    with Study.open(full_report.parents[1], read_only=True) as study:
        avg = study.con.execute(
            "SELECT mean_amplification FROM amplification_summary WHERE model_id = 'sd-tiny-a' "
            "AND strategy = 'keyword' AND template_id IS NULL"
        ).fetchone()[0]
    assert overall.loc[("sd-tiny-a", "keyword"), "mean_amplification"] == pytest.approx(avg)


def test_indicator_headline_gives_the_mean_over_occupations_and_the_pooled_share(
    full_report: Path,
):
    """The paper's statistic is the mean over occupations; the pooled share is named apart."""
    html = full_report.read_text(encoding="utf-8")
    with Study.open(full_report.parents[1], read_only=True) as study:
        labels = dict(study.con.execute("SELECT caption_id, label FROM indicators").fetchall())
        pairs = study.con.execute("SELECT DISTINCT occupation, caption_id FROM mentions").fetchall()
    per_occ: dict[str, list[str]] = {}
    for occ, cid in pairs:
        per_occ.setdefault(occ, []).append(labels[cid])
    mean = sum(100 * sum(v != "none" for v in ls) / len(ls) for ls in per_occ.values()) / len(
        per_occ
    )
    pooled_n = sum(v != "none" for v in labels.values())
    headline = " ".join(Page(_section(html, "indicator-headline", "</p>")).text)
    headline = " ".join(headline.split())
    assert f"{mean:.1f} % on average over {len(per_occ)} occupations" in headline
    assert f"pooled over the {len(labels)} distinct occupation captions, {pooled_n} (" in headline
    assert f"({100 * pooled_n / len(labels):.1f} %)" in headline


def test_header_lists_the_settings_that_differ_from_the_paper(full_report: Path):
    """Expected: the paper preset file and the study's study.toml, compared here key by key."""
    import tomllib

    paper = tomllib.loads(
        (REPO / "corpus_audit/core/presets/paper.toml").read_text(encoding="utf-8")
    )
    paper.pop("preset")
    study = tomllib.loads((full_report.parents[1] / "study.toml").read_text(encoding="utf-8"))
    differ = [
        f"{section}.{key}"
        for section, keys in paper.items()
        for key, value in keys.items()
        if study[section][key] != value
    ]
    assert "label.classifier" in differ and "indicators.spacy_model" in differ
    html = full_report.read_text(encoding="utf-8")
    start = html.index('id="paper-settings"')
    header = html[start : html.index("</div>", start)]
    assert f"Not comparable with the paper in {len(differ)} setting(s)" in header
    rows = re.findall(r"<tr><td><code>([a-z_.]+)</code></td>", header)
    assert rows == differ
    assert "split, as in the paper" in header and "the paper's rule" in header
    assert 'id="untrained-banner"' not in html  # its labels name the ViT-L-14/openai weights
    assert html.index('id="paper-settings"') < html.index('id="results"')  # in the header


def test_report_without_validation_labels_says_no_correction(full_report: Path):
    html = full_report.read_text(encoding="utf-8")
    page = Page(html)
    assert {"correction", "results-table"} <= page.ids()
    section = _section(html, "correction", "</figure>")
    assert "misclassification correction: no correction (no validation labels)" in section
    # issue 41: no table of dashes (error rates and a corrected column nobody computed)
    assert not {"classifier-errors", "correction-table"} & page.ids()
    assert "fig-correction-1" not in page.ids()  # nothing corrected: no corrected scatter


def test_report_shows_corrected_next_to_uncorrected(tmp_path: Path, shared_data: Path):
    from study_builder import build

    from corpus_audit.core.pipeline import init_study
    from corpus_audit.report import report
    from corpus_audit.stages.analyze import analyze

    corpus = [shared_data / "laion400m_sample_10k.parquet"]
    study = init_study(
        tmp_path / "s",
        [str(corpus[0])],
        overrides={"analysis": {"bootstrap": 50, "thumbnails": 0, "correction": "pooled"}},
    )
    build(study, corpus)
    # every labelled image validated; its human label is the classifier's, but one image in
    # five of those labelled female is a man
    labelled = study.con.execute(
        "SELECT image_id, label FROM labels WHERE label IN ('female', 'male') ORDER BY image_id"
    ).fetchall()
    for i, (image_id, label) in enumerate(labelled):
        truth = "male" if label == "female" and i % 5 == 0 else label
        study.con.execute(
            "INSERT INTO human_labels (image_id, annotator, label, source_file) "
            "VALUES (?, 'ann', ?, 'sheet.csv')",
            [image_id, truth],
        )
    run = analyze(study, progress=False)
    assert run.provenance["correction"]["sources"] == {"pooled": "applied"}
    html = Path(report(study, progress=False).outputs["report"]).read_text(encoding="utf-8")
    page = Page(html)
    errors = _section(html, "classifier-errors", "</table>")
    assert "<td>pooled</td>" in errors and "<td>yes</td>" in errors
    table = _section(html, "correction-table", "</table>")
    summary = study.con.execute(
        "SELECT c.mean_amplification, u.mean_amplification FROM amplification_summary_corrected c "
        "JOIN amplification_summary u USING (model_id, strategy) "
        "WHERE c.template_id IS NULL AND u.template_id IS NULL AND c.mean_amplification "
        "IS NOT NULL ORDER BY model_id, strategy LIMIT 1"
    ).fetchone()
    assert summary is not None
    assert f"{summary[0]:+.1f}" in table and f"{summary[1]:+.1f}" in table
    figures = [
        a for t, a in page.tags if t == "figure" and "correction-scatter" in (a.get("class") or "")
    ]
    assert figures
    scatter = _section(html, "fig-correction-1", "</figure>")
    assert scatter.count("<img") == 2  # the uncorrected scatter beside the corrected one
    study.close()
