"""The "who and how" section of the report, and the page ``corpus-audit texts`` writes.

:func:`who_how_section` gathers the ``who_how`` tables into plain data; the template
``report/templates/_who_how.html.j2`` shows it (in the study report, and alone in
``<dir>/report/who_how.html`` for a text corpus): per occupation the marked words of each
side in a table sorted by |z| with a bar for z, the decile figure, the % women per occupation
against the labour statistics, and the SRBS comparison. Everything that came from the texts
(words, examples, occupation names) is escaped by the template (Jinja2 autoescape on).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit import __version__
from corpus_audit.core.slugs import cut_bytes, slug
from corpus_audit.core.store import Study, dicts
from corpus_audit.report.figures import save
from corpus_audit.report.findings import split_word_groups
from corpus_audit.report.render import render
from corpus_audit.report.who_how_figures import decile_figure, who_scatter
from corpus_audit.tables.read import rows as _rows

WORDS_SHOWN = 10  # marked words per side and occupation
OCCUPATIONS_SHOWN = 40  # occupations with compared texts, most texts first
PAGE_DIR = "report"
PAGE_NAME = "who_how.html"


def who_how_section(study: Study, figures_dir: Path | None = None) -> dict[str, Any]:
    """The section's data; ``ran`` False when the stage has not written its tables."""
    if not study.table_exists("texts_associations") or not study.count("texts_associations"):
        return {"ran": False}
    words = dicts(study.sql("who_how/60_report_words", shown=WORDS_SHOWN))
    groups = dicts(study.sql("who_how/61_report_groups", shown=OCCUPATIONS_SHOWN))
    for group in groups:
        mine = [
            w
            for w in words
            if (w["model"], w["comparison"], w["scope"], w["occupation"])
            == (group["model"], group["comparison"], group["scope"], group["occupation"])
        ]
        top = max((abs(w["z"]) for w in mine), default=1.0)
        for w in mine:
            w["bar"] = round(100.0 * abs(w["z"]) / top, 1)
            w["example"] = (w["examples"] or [""])[0]
        group["female"] = [w for w in mine if w["side"] == "female"]
        group["male"] = [w for w in mine if w["side"] == "male"]
    section = {
        "ran": True,
        "source": study.config.texts.source,
        "z_threshold": study.config.texts.z_threshold,
        "associations": _rows(
            study,
            "SELECT association, count(*) AS texts FROM texts_associations GROUP BY ALL "
            "ORDER BY ALL",
        ),
        "agreement": _rows(
            study, "SELECT * FROM texts_agreement ORDER BY model NULLS FIRST, specified_by, gender"
        ),
        "groups": groups,
        "who": _rows(
            study,
            "SELECT * FROM texts_who WHERE associated > 0 "
            "ORDER BY model NULLS FIRST, labels, associated DESC, occupation",
        ),
        "srbs": _rows(
            study, "SELECT * FROM texts_srbs ORDER BY model NULLS FIRST, scope, occupation, side"
        ),
        "srbs_tests": _rows(
            study, "SELECT * FROM texts_srbs_tests ORDER BY model NULLS FIRST, scope"
        ),
        "figures": _figures(study, figures_dir),
        "min_associated": study.config.texts.min_associated,
    }
    split_word_groups(section)  # the report and the texts page show empty comparisons as one line
    return section


def model_file_name(model: str) -> str:
    """An LLM's name as part of a figure's file name: its slug, cut to 80 bytes with a hash of
    the whole name when longer (a file name is bounded in bytes)."""
    return cut_bytes(slug(model), 80, whole=model)


def decile_figure_name(model: str, labels: str) -> str:
    """``who_deciles_[<model>_]<labels>``: the name of a decile figure (report and API)."""
    return f"who_deciles_{model_file_name(model) + '_' if model else ''}{labels}"


def _figures(study: Study, out_dir: Path | None) -> list[dict[str, str]]:
    """The decile figure for each kind of label that places an occupation."""
    out = []
    deciles = study.con.execute(
        "SELECT * FROM texts_deciles ORDER BY model NULLS FIRST, labels, decile"
    ).df()
    deciles["model"] = deciles["model"].fillna("")
    for (model, labels), frame in deciles.groupby(["model", "labels"], sort=False):
        what = "associated texts" if labels == "association" else "specified texts"
        of = f"{model}, " if model else ""  # LLM texts: one figure per model
        fig = decile_figure(pd.DataFrame(frame).drop(columns="model"), what)
        if fig is None:  # no occupation in any decile: nothing to draw
            continue
        rendered = save(
            fig,
            decile_figure_name(model, labels),
            f"Occupations per decile of % women ({of}{what})",
            "Occupations with enough labelled texts, split by the side of 50 % their labour "
            "statistic lies on.",
            out_dir,
        )
        out.append(_figure_entry(rendered))
    if study.config.texts.source == "llm":  # the paper's Figure 1, per model
        out.extend(_who_scatters(study, out_dir))
    return out


def _figure_entry(rendered: Any) -> dict[str, str]:
    uri = "data:image/png;base64," + base64.b64encode(rendered.png).decode("ascii")
    return {"name": rendered.name, "title": rendered.title, "uri": uri, "caption": rendered.caption}


def _who_scatters(study: Study, out_dir: Path | None) -> list[dict[str, str]]:
    """Per model of an LLM study: % women of the texts associated with a gender (prompts
    without one) against the labour statistic, one point per occupation with its interval."""
    who = study.con.execute(
        "SELECT * FROM texts_who WHERE labels = 'association' AND model IS NOT NULL "
        "ORDER BY model, occupation"
    ).df()
    out = []
    for model, frame in who.groupby("model", sort=True):
        fig = who_scatter(frame, 1, f"associated texts of {model}")
        if fig is None:  # no occupation with a labour statistic: nothing to draw
            continue
        rendered = save(
            fig,
            f"who_vs_labour_{model_file_name(model)}",
            f"% women vs labour statistics ({model})",
            "Per occupation: % women among the texts of prompts without a gender that the rule "
            "associates with a gender (Wilson interval), against the labour statistic; the "
            "dashed line is parity with it.",
            out_dir,
        )
        out.append(_figure_entry(rendered))
    return out


def write_page(study: Study) -> Path:
    """Write ``<study>/report/who_how.html`` (the section alone, self-contained)."""
    out = study.path(PAGE_DIR, PAGE_NAME)
    ctx = {
        "name": study.config.study.name,
        "root": str(study.root.resolve()),
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "who_how": who_how_section(study, out.parent / "figures"),
        # the level of the interval columns, as the study report states it (the stage's
        # Wilson intervals are at analysis.confidence)
        "level": f"{study.config.analysis.confidence * 100:g} %",
    }
    html = render(ctx, "who_how.html.j2")
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
