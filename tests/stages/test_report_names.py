"""The report on hostile names: model names and corpus text are data from strangers.

A model name of 80 astral-plane characters made every figure file name longer than 255 bytes
(``report`` failed on every run); control characters (ESC, BEL, C1) and the bidi override
U+202E in model names and captions reached ``report.html`` and the SVG figures raw (an SVG with
a raw ESC is not XML). The study is the report tests' fixture (real captions, real photos)
with its two models renamed and its captions given a hostile tail.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from study_builder import build

LONG = "\U0001d52a" * 80  # MATHEMATICAL FRAKTUR SMALL M: 4 bytes each in UTF-8
HOSTILE = "evil\x1b[31m\x07\x9b\u202egpj.exe"
TAIL = " \x1b]0;pwned\x07 \u202eright-to-left"
# raw characters that must never reach a page or an SVG: C0 but tab, newline and carriage
# return, DEL, C1, the bidi controls (U+202E among them)
RAW = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _reported(root: Path, corpus: Path, model_a: str, model_b: str, tail: str) -> Path:
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.report import report
    from corpus_audit.stages.analyze import analyze

    study = init_study(
        root, [str(corpus)], overrides={"analysis": {"bootstrap": 50, "thumbnails": 2}}
    )
    try:
        build(study, [corpus])
        study.con.execute("UPDATE images SET model_id = ? WHERE model_id = 'sd-tiny-a'", [model_a])
        study.con.execute("UPDATE images SET model_id = ? WHERE model_id = 'sd-tiny-b'", [model_b])
        study.con.execute("UPDATE captions SET text = text || ?", [tail])
        analyze(study, progress=False)
        run = report(study, progress=False)
    finally:
        study.close()
    return Path(run.outputs["report"])


@pytest.fixture(scope="module")
def long_report(tmp_path_factory, laion_path) -> Path:
    root = tmp_path_factory.mktemp("long") / "study"
    return _reported(root, laion_path, LONG, "sd-tiny-b", "")


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory, laion_path) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "study"
    return _reported(root, laion_path, "sd-tiny-a", HOSTILE, TAIL)


def test_a_long_astral_model_name_gives_short_unique_stable_file_names(long_report: Path):
    html = long_report.read_text(encoding="utf-8")
    assert LONG in html  # the whole name is shown
    figures = sorted((long_report.parent / "figures").iterdir())
    names = [f.name for f in figures]
    assert all(len(n.encode("utf-8")) <= 255 for n in names), max(names, key=len)
    long_ones = [n for n in names if "\U0001d52a" in n]
    assert {n.split("_")[0] for n in long_ones} >= {"scatter", "amplification"}, names
    # cut on a character boundary, with a hash of the whole name: two names, one stem
    from corpus_audit.core.slugs import cut_bytes

    a, b = cut_bytes(LONG + "a", 100), cut_bytes(LONG + "b", 100)
    assert a != b and len(a.encode()) <= 100 and a == cut_bytes(LONG + "a", 100)
    assert cut_bytes("sd-tiny-a", 100) == "sd-tiny-a"  # short names are as before


def test_control_characters_are_shown_escaped_never_raw(hostile_report: Path):
    html = hostile_report.read_text(encoding="utf-8")
    assert not RAW.search(html), repr(RAW.search(html))
    assert "\\x1b" in html and "\\x07" in html and "\\u202e" in html
    assert "evil\\x1b[31m\\x07\\x9b\\u202egpj.exe" in html  # the model, visibly escaped
    assert "\\x1b]0;pwned\\x07 \\u202eright-to-left" in html  # a caption's tail
    svgs = sorted((hostile_report.parent / "figures").glob("*.svg"))
    assert len(svgs) >= 4
    for svg in svgs:
        text = svg.read_text(encoding="utf-8")
        ET.fromstring(text)  # well-formed XML
        assert not RAW.search(text), (svg.name, repr(RAW.search(text)))
    hostile = [s for s in svgs if "evil" in s.name]
    assert hostile and all("evil\\x1b[31m" in s.read_text(encoding="utf-8") for s in hostile)


def test_tick_labels_and_dollars_in_names_are_safe_in_every_figure(tmp_path: Path):
    """Tick labels are made again at each draw from the names (categories, label lists): they
    are escaped too; a name with dollars is shown as written, not parsed as mathtext (a model
    named ``a$\\frac$b`` made ``savefig`` raise)."""
    from corpus_audit.report import figures as figs

    rows = [
        {"occupation": HOSTILE, "n_captions": 9, "pct_any": 30.0, "pct_male": 10.0,
         "pct_female": 15.0, "pct_both": 5.0},
        {"occupation": "nurse", "n_captions": 8, "pct_any": 20.0, "pct_male": 5.0,
         "pct_female": 10.0, "pct_both": 5.0},
    ]  # fmt: skip
    layout = [{"strategy": "a$\\frac$b" + HOSTILE, "average": {"mean": 2.0, "ci_low": 1.0,
                                                               "ci_high": 3.0}}]  # fmt: skip
    for fig, name in (
        (figs.indicator_bars(rows), "indicators"),
        (figs.amplification_bars("a$\\frac$b", layout, ["average"]), "bars"),
    ):
        done = figs.save(fig, name, "", "", tmp_path)
        text = done.svg_path.read_text(encoding="utf-8")
        ET.fromstring(text)
        assert not RAW.search(text), (name, repr(RAW.search(text)))
        assert "evil\\x1b[31m\\x07\\x9b\\u202egpj.exe" in text  # matplotlib's comment of a text
    assert "<!-- Mean amplification by strategy and prompt: a$\\frac$b -->" in text  # as written
