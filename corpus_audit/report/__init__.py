"""The ``report`` stage: one self-contained HTML page (``<study>/report/report.html``).

The page needs nothing but itself: figures are PNG ``data:`` URIs (their PNG and SVG files are
also written to ``<study>/report/figures/``), image thumbnails are downscaled JPEG ``data:``
URIs, the style sheet is inline, there is no script and no external URL, so it opens from
disk offline. It is rendered by Jinja2 with autoescape on: every caption, prompt, occupation
and path (text that came from a corpus or a user) is HTML-escaped.

Idempotent: the run records a fingerprint of what the page shows (analysis tables, stage
runs, config, template); a rerun with the same fingerprint and the file in place is skipped.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.report.render import render

REPORT_DIR = "report"
REPORT_NAME = "report.html"


@stage_body("report")
def report(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Write ``<study>/report/report.html``; its path goes in ``run.outputs['report']``."""
    out = study.path(REPORT_DIR, REPORT_NAME)
    fingerprint = report_fingerprint(study)
    last = study.last_run("report")
    run.provenance["fingerprint"] = fingerprint
    run.provenance["report_path"] = str(out)
    run.outputs["report"] = str(out)
    if last is not None and last["provenance"].get("fingerprint") == fingerprint and out.is_file():
        return run.skip("nothing changed since the last report; file kept")
    # not at the top: config validation imports this package (report.imports), and the
    # context pulls pandas, the figures and every section
    from corpus_audit.report.context import build_context

    ctx = build_context(study, figures_dir=out.parent / "figures", progress=progress)
    html = render(ctx)
    write_text_atomic(out, html)
    run.rows_in = sum(len(b["rows"]) for b in ctx["results"]["blocks"])
    run.rows_out = 1
    labour = [ctx["labour_figure"]["name"]] if ctx["labour_figure"] else []
    run.provenance["figures"] = [f["name"] for f in ctx["figures"]] + labour
    run.provenance["bytes"] = len(html.encode("utf-8"))
    unreadable = sum(o["unreadable"] for o in ctx["occupations"])
    if unreadable:
        run.drop("thumbnail_unreadable", unreadable)
    for note in ctx["image_notes"]:
        run.messages.append(f"{note['stage']} {note['state']}: {note['reason']}")
    if ctx["analysis"]["stale"]:
        run.messages.append(
            "the analysis is older than the study's tables: run `corpus-audit analyze` "
            "and then the report again"
        )
    elif not ctx["analysis"]["ran"]:
        run.messages.append("the analyze stage has not run: the report shows no results")
    run.messages.append(
        f"{len(run.provenance['figures'])} figures (PNG + SVG in {out.parent / 'figures'})"
    )
    return run


def report_fingerprint(study: Study) -> str:
    """Hash of what the report shows: analysis tables, stage runs, config and template."""
    # not at the top: config validation imports the report package (report.imports)
    from corpus_audit.tables.analysis import ANALYSIS_TABLES, VARIANT_TABLES

    parts: dict[str, Any] = {"config": study.config.section_hash()}

    extra = ("category_distribution", "preference_ratings", "preference_pairs", "battles")
    extra += ("arena_votes", "arena_ratings", "arena_pairs")
    for table in (
        *ANALYSIS_TABLES,
        "similarity_diagnostics",
        "images",
        "face_filter",
        "labels",
        *extra,
        *VARIANT_TABLES.values(),
    ):
        parts[table] = study.fingerprint(table)
    row = study.con.execute(
        "SELECT count(*), max(finished_at)::VARCHAR FROM stage_runs WHERE stage <> 'report'"
    ).fetchone()
    parts["stage_runs"] = [int(row[0]), row[1]] if row else [0, None]
    templates = resources.files("corpus_audit.report").joinpath("templates")
    parts["template"] = hashlib.sha256(
        b"".join(t.read_bytes() for t in sorted(templates.iterdir(), key=lambda t: t.name))
    ).hexdigest()
    here = Path(__file__).parent
    code = [
        here / n
        for n in (
            "context.py",
            "findings.py",
            "figures.py",
            "labour_figure.py",
            "__init__.py",
            "preference_section.py",
            "preference_figures.py",
            "arena_section.py",
            "leaderboard_page.py",
            "render.py",
            "variants_section.py",
            "visible.py",
        )
    ]
    # column headers and arrows: metrics.py and its columns file
    code += [here.parent / "core" / "metrics.py", here.parent / "core" / "columns.csv"]
    parts["code"] = hashlib.sha256(b"".join(p.read_bytes() for p in code)).hexdigest()
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
