"""The report of a model-only study (issue 41) in real headless Chromium at 1400 x 900: it opens
with the findings (the model's %female with its Wilson interval against the labour statistics,
the most and least skewed occupations, the images dropped and why), then the per-prompt table
with the labour statistic beside each row (equal to a recount of the labels) and the
generated-vs-labour figure; nothing of an amplification or caption study (no empty table, no
empty figure, no corpus stage), and "Not comparable with the paper" knows the images were
imported. Real photos imported, labelled by the real MediaPipe detector and classifier.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from report_frame import assert_reader_frame, frame_probe
from test_model_only import recount, table, write_photos

from corpus_audit.cli import main

IMPORTS = {
    "paper:1:nurse": ["astronaut", "grace", "camera", None],
    "paper:1:engineer": ["camera", "camera", "grace"],
    "paper:2:engineer": ["camera"],
}


@pytest.fixture(scope="module")
def model_only(tmp_path_factory) -> Path:
    """A model-only study (init --kind images) of imported photos, labelled, analyzed and
    reported."""
    base = tmp_path_factory.mktemp("model_only_report")
    root = base / "audit"
    assert main(["-q", "init", str(root), "--kind", "images"]) == 0
    settings = ["label.face_model=full_range", "engine.device=cpu"]
    assert main(["-q", "config", "set", str(root), *settings]) == 0
    manifest = write_photos(base / "photos", IMPORTS, model="sd-test")
    for argv in (["import-images", str(root), str(manifest)], ["label", str(root)]):
        assert main(["-q", *argv]) == 0
    assert main(["-q", "analyze", str(root)]) == 0
    assert main(["-q", "report", str(root)]) == 0
    return root


def test_model_only_report_leads_with_the_models_findings(model_only: Path, tmp_path: Path):
    out = frame_probe(model_only / "report" / "report.html", tmp_path)
    print(f"model-only report: {out['height']} px high at 1400 px wide")
    assert_reader_frame(out)
    text = out["findings_text"]
    assert "sd-test:" in text and "% female [" in text and "(95 % Wilson)" in text
    assert "Most skewed:" in text and "least skewed:" in text and "labour" in text
    assert "dropped (no_face: 1)" in text  # the grey picture: dropped by the face filter
    # the first section after the findings is the model's table and figure, nothing else
    assert out["sections"][0] == "generated"
    assert not {"results", "figures", "captions", "who-how"} & set(out["sections"])
    assert out["figures"] == ["fig-generated_vs_labour"]


def test_model_only_report_table_equals_a_recount_with_the_labour_statistic(
    model_only: Path, tmp_path: Path
):
    out = frame_probe(model_only / "report" / "report.html", tmp_path)
    shown = {row[2]: row for row in out["generated"]}  # prompt -> the row's cells
    stored = table(model_only)
    assert len(out["generated"]) == len(stored) == len(IMPORTS) + 2  # + nurse, engineer pooled
    for prompt_id, (n, f, m, a, d) in recount(model_only).items():
        row = shown[prompt_id]
        assert [int(x) for x in row[3:8]] == [n, f, m, a, d]  # images, f, m, ambiguous, dropped
        pf = None if f + m == 0 else 100.0 * f / (f + m)
        assert row[8] == ("–" if pf is None else f"{pf:.1f}")
    sources = sorted({r["labour_source"] for r in stored})  # numbered notes under the table
    for r in stored:
        pooled = [x for x in out["generated"] if x[2] == "all prompts" and x[1] == r["occupation"]]
        row = shown[r["prompt_id"]] if r["prompt_id"] else pooled[0]
        assert row[10] == f"{r['labour_percent_female']:.1f}"
        assert row[11] == f"[{sources.index(r['labour_source']) + 1}]"
    page = (model_only / "report" / "report.html").read_text(encoding="utf-8")
    assert all(html.escape(src) in page for src in sources)
    assert "generate.models" not in page and "imported" in page  # the note knows the imports
    assert "<td>select</td>" not in page and "<td>indicators</td>" not in page  # no corpus stages
    assert "95 % Wilson interval</th>" in page  # the interval column states level and method
