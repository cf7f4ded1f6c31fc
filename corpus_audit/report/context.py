"""Everything the report template shows, gathered from the study's tables into plain data.

Each ``*_section`` function reads only tables (and ``stage_runs``) and returns lists/dicts;
nothing here formats HTML (the template does, with autoescape on). Sections whose tables
are empty return empty data and the template says what did not run and why.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from corpus_audit import __version__
from corpus_audit.backends.openai_images import status_lines as api_lines
from corpus_audit.core.catalogue import RUN_ORDERS, STAGE_NAMES
from corpus_audit.core.config import dump_toml
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.metrics import METRICS
from corpus_audit.core.preset import paper_differences
from corpus_audit.core.slugs import cut_bytes
from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.amplification import strategy_sort_key
from corpus_audit.methods.image_similarity import summary as image_summary
from corpus_audit.report import figures as figs
from corpus_audit.report import findings as fnd
from corpus_audit.report.arena_section import arena_figures, arena_section
from corpus_audit.report.attributes_section import attributes_section
from corpus_audit.report.correction_section import correction_section
from corpus_audit.report.imports import status_lines as import_lines
from corpus_audit.report.labour_figure import NO_DATA, labour_figure_for
from corpus_audit.report.preference_section import (
    categories_section,
    preference_figures,
    preferences_section,
)
from corpus_audit.report.thumbs import resolve, thumbnail_uri
from corpus_audit.report.variants_section import variants_section
from corpus_audit.report.who_how import who_how_section
from corpus_audit.tables.analysis import input_fingerprint, untrained_classifiers
from corpus_audit.tables.corpora import corpus_rows
from corpus_audit.tables.read import amplification_pairs, rows, table3
from corpus_audit.tables.subsets import SHORTFALL_TEXT

IMAGE_STAGES = ("images", "generate", "label")
TOP_NEIGHBOR_OCCUPATIONS = 4
TOP_NEIGHBORS = 5
EXAMPLE_CAPTIONS = 3


def build_context(study: Study, *, figures_dir: Path | None, progress: bool) -> dict[str, Any]:
    """The template context (see ``templates/report.html.j2``)."""
    analysis_run = study.last_run("analyze")
    ctx: dict[str, Any] = {
        "name": study.config.study.name,
        "root": str(study.root.resolve()),
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "metrics": METRICS,
        "analysis": analysis_section(study, analysis_run),
        "stages": stages_section(study),
        "image_notes": image_stage_notes(study),
        "image_funnel": image_funnel(study, (analysis_run or {}).get("provenance", {})),
    }
    ctx["kind"] = study_kind(study.config)
    ctx["comparability"] = comparability_section(study)
    ctx["results"] = results_section(study)
    ctx["excluded"] = [p for p in amplification_pairs(study) if p["excluded"]]
    # a set without images is a row of zeros: the table keeps the sets that have images
    ctx["percent"] = [r for r in dicts(study.sql("report/percent")) if _imaged(r)]
    ctx["indicator_match"] = rows(
        study, "SELECT * FROM indicator_match ORDER BY model_id, kind, reference, indicator"
    )
    ctx["indicators"] = indicators_section(study)
    ctx["similarity"] = similarity_section(study)
    ctx["neighbors"] = top_neighbors(study)
    ctx["categories"] = categories_section(study)
    ctx["preferences"] = preferences_section(study)
    ctx["arena"] = arena_section(study)
    ctx["variants"] = variants_section(study)
    confidence = float(study.config.analysis.confidence)
    ctx["level"] = f"{confidence * 100:g} %"  # the level of every interval column
    ctx["sections"] = {
        "results": fnd.amplification_section(ctx, ctx["kind"]),
        "generated": fnd.generated_section(study, ctx),
        "captions": fnd.indicators_findings(ctx, confidence),
        "attributes": attributes_section(study, confidence, figures_dir),
    }
    ctx["indicator_columns"] = fnd.filled_columns(ctx["indicators"]["rows"], INDICATOR_COLUMNS)
    ctx["figures"] = figures_section(study, ctx, figures_dir, progress)
    ctx["labour_figure"], ctx["no_figures"] = _labour_figure(study, ctx, figures_dir)

    ctx["correction"] = correction_section(study, ctx, figures_dir, _cell, _file_name)
    ctx["occupations"] = occupations_section(study, progress)

    ctx["who_how"] = who_how_section(study, figures_dir)  # empty word groups split there
    ctx["provenance"] = provenance_section(study)
    ctx["findings"] = findings_summary(ctx)
    return ctx


#: the indicator table's value columns, in order (a column "–" in every row is left out)
INDICATOR_COLUMNS = [
    "pct_any",
    "pct_male",
    "pct_female",
    "pct_both",
    "training_pf",
    "pct_marked_female_images",
    "pct_marked_male_images",
]


def findings_summary(ctx: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's opening box: per section with data (in the order the page shows them), its
    title, anchor and findings; then one line per section without data saying why."""
    order = ["generated", "results", "captions"] if ctx["kind"] == "images" else None
    order = order or ["results", "generated", "attributes", "captions"]
    sections = [ctx["sections"][k] for k in order]
    if ctx["kind"] == "images":  # no corpus, no training images: the generated side only
        sections = [s for s in sections if s.key == "generated"]
    elif not ctx["sections"]["generated"].has_data:
        sections = [s for s in sections if s.key != "generated"]
    full = [s for s in sections if s.has_data and s.findings]
    empty = [s for s in sections if not s.has_data]
    out = [{"key": s.key, "title": s.title, "lines": s.findings, "empty": None} for s in full]
    out += [{"key": s.key, "title": s.title, "lines": [], "empty": s.empty} for s in empty]
    return out


def _labour_figure(
    study: Study, ctx: dict[str, Any], out_dir: Path | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The generated-vs-labour figure (model-only results) as a figure entry, or None; and the
    "no data" lines of figures the study does not draw."""
    no_figures = []
    if not ctx["sections"]["results"].has_data and ctx["kind"] != "images":
        no_figures.append(
            "Amplification figures (per-occupation scatter, mean bars): not drawn, no "
            "amplification results (see below)."
        )
    if not ctx["sections"]["generated"].has_data:
        return None, no_figures
    _rows, saved = labour_figure_for(study, out_dir)
    if saved is None:
        return None, [*no_figures, f"Generated vs labour %female: no data ({NO_DATA})."]
    uri = "data:image/png;base64," + base64.b64encode(saved.png).decode("ascii")
    entry = {"name": saved.name, "title": saved.title, "caption": saved.caption, "uri": uri}
    return entry, no_figures


# -- comparability with the paper ------------------------------------------------------------
def comparability_section(study: Study) -> dict[str, Any]:
    """Settings that differ from the paper's, labels from untrained weights, how the training
    subsets were drawn and cut, and the subsets that fall short of N."""
    cfg = study.config
    short = dicts(study.sql("report/shortfall"))
    elsewhere = [*import_lines(study), *api_lines(study)]  # imported or API images
    differences = paper_differences(cfg)
    if elsewhere:  # the images came from elsewhere: no generate.models to compare
        differences = [d for d in differences if not str(d["key"]).startswith("generate.")]
    return {
        "differences": differences,
        "elsewhere": elsewhere,
        "untrained": untrained_classifiers(study),
        "sample_unit": cfg.select.sample_unit,
        "sample_size": cfg.select.sample_size,
        "k": cfg.neighbors.k,
        "overdraw": cfg.select.overdraw,
        "no_indicator_sample": cfg.indicators.no_indicator_sample,
        "parity_side": cfg.analysis.parity_side,
        "shortfall": short,
        "shortfall_text": SHORTFALL_TEXT,
    }


# -- stages ---------------------------------------------------------------------------------
def stages_section(study: Study) -> list[dict[str, Any]]:
    """The latest run of every stage (the report's own previous runs aside): the funnel."""
    own = set(RUN_ORDERS[study_kind(study.config)])
    out = []
    for name in STAGE_NAMES:
        if name == "report":
            continue
        last = study.last_run(name)
        if last is None and name not in own:
            continue  # a stage of another study kind (PST stages in a non-PST study)
        if last is None:
            out.append(
                {
                    "stage": name,
                    "status": "not run",
                    "rows_in": None,
                    "rows_out": None,
                    "dropped": [],
                    "finished_at": None,
                }
            )
            continue
        out.append(
            {
                "stage": name,
                "status": last["status"],
                "rows_in": last["rows_in"],
                "rows_out": last["rows_out"],
                "dropped": sorted(last["dropped"].items(), key=lambda kv: (-kv[1], kv[0])),
                "finished_at": str(last["finished_at"])[:19],
            }
        )
    return out


def image_stage_notes(study: Study) -> list[dict[str, str]]:
    """For each image stage that did not run or produced nothing: what happened and why."""
    cfg = study.config
    counts = {
        "images": study.count("images", "source = 'training'"),
        "generate": study.count("images", "source = 'generated'"),
        "label": study.count("labels"),
    }
    default_reason = {
        "images": "no training image sources are configured ([images] sources is empty in "
        "study.toml), so no training image was registered"
        if not cfg.images.sources
        else "the configured image sources matched none of the selected captions",
        "generate": "no text-to-image model is configured ([generate] models is empty in "
        "study.toml), so no image was generated"
        if not cfg.generate.models
        else "no image was generated",
        "label": "there are no images to label"
        if not (counts["images"] or counts["generate"])
        else "no image got a perceived-gender label",
    }
    notes = []
    own = RUN_ORDERS[study_kind(cfg)]
    for stage in (s for s in IMAGE_STAGES if s in own):
        last = study.last_run(stage)
        if counts[stage] > 0:  # it has results (imported images need no generate run)
            continue
        stated = _stated_reason(last)
        if last is None:
            state = "did not run"
        elif last["status"] == "skipped":
            state = "ran and skipped"
        else:
            state = "ran and produced nothing"
        notes.append({"stage": stage, "state": state, "reason": stated or default_reason[stage]})
    return notes


def _stated_reason(last: dict[str, Any] | None) -> str | None:
    """A reason a stage recorded in its provenance (``messages``/``reason``), if any."""
    if not last:
        return None
    prov = last.get("provenance") or {}
    for key in ("skip_reason", "reason", "note"):
        if isinstance(prov.get(key), str) and prov[key]:
            return prov[key]
    messages = prov.get("messages")
    if isinstance(messages, list) and messages:
        return "; ".join(str(m) for m in messages)
    return None


def image_funnel(study: Study, analysis_prov: dict[str, Any]) -> list[dict[str, Any]]:
    """Per image source: registered -> face filter (drop reasons) -> labels by class."""
    classifier = analysis_prov.get("classifier")
    out = []
    for source in ("training", "generated"):
        n = study.count("images", "source = ?", [source])
        if not n:
            continue
        reasons = dicts(study.sql("report/funnel_drops", source=source))
        checked = study.count(
            "images i JOIN face_filter f USING (image_id)", "i.source = ?", [source]
        )
        kept = study.count(
            "images i JOIN face_filter f USING (image_id)", "i.source = ? AND f.kept", [source]
        )
        labels = dicts(
            study.sql("report/funnel_labels", source=source, classifier=classifier or "")
        )
        out.append(
            {
                "source": source,
                "images": n,
                "face_checked": checked,
                "face_kept": kept,
                "face_dropped": [(r["reason"], r["n"]) for r in reasons],
                "labels": [(r["label"], r["n"]) for r in labels],
            }
        )
    return out


# -- results --------------------------------------------------------------------------------
def analysis_section(study: Study, run: dict[str, Any] | None) -> dict[str, Any]:
    """How the analysis was run and whether it is current."""
    if run is None:
        return {"ran": False, "stale": False, "provenance": {}}
    prov = run["provenance"]
    return {
        "ran": True,
        "stale": prov.get("input_fingerprint") != input_fingerprint(study),
        "provenance": prov,
        "finished_at": str(run["finished_at"])[:19],
    }


def results_section(study: Study) -> dict[str, Any]:
    """The strategy x prompt table per model, cells ready to print."""
    layout = table3(study)
    columns: list[str] = []
    for lines in layout.values():
        for line in lines:
            for col in line:
                if col.startswith("#") and col not in columns:
                    columns.append(col)
    columns = sorted(columns, key=lambda c: int(c[1:])) + ["average"]
    blocks = []
    for model, lines in layout.items():
        blocks.append(
            {
                "model": model,
                "rows": [
                    {
                        "strategy": line["strategy"],
                        "cells": [_cell(line.get(col)) for col in columns],
                    }
                    for line in lines
                ],
                "layout": lines,
            }
        )
    return {"columns": columns, "blocks": blocks}


def _cell(cell: dict[str, Any] | None) -> dict[str, Any] | None:
    if not cell or cell.get("mean") is None:
        if cell and cell.get("n_excluded"):
            return {
                "text": "all excluded",
                "ci": "",
                "p": "",
                "sign": "none",
                "n": f"0 included, {cell['n_excluded']} excluded",
            }
        return None
    mean = cell["mean"]
    ci = ""
    if cell.get("ci_low") is not None:
        ci = f"[{cell['ci_low']:+.1f}, {cell['ci_high']:+.1f}]"
    p = cell.get("p_value")
    return {
        "text": f"{mean:+.1f}",
        "ci": ci,
        "p": "" if p is None else (f"p={p:.2g}" if p >= 0.001 else "p<0.001"),
        "sign": "amp" if mean > 0 else "deamp" if mean < 0 else "none",
        "n": f"{cell.get('n_included') or 0} included, {cell.get('n_excluded') or 0} excluded",
    }


def indicators_section(study: Study) -> dict[str, Any]:
    """Caption-side indicator summary per occupation, overall shares and the correlation."""
    per_occ = rows(study, "SELECT * FROM occupation_indicators ORDER BY occupation")
    overall = dicts(study.sql("report/indicator_overall"))[0]
    overall["pct"] = (
        100.0 * overall["with_indicator"] / overall["checked"] if overall["checked"] else None
    )
    # the paper's statistic: the mean over occupations of each one's share
    shares = [r["pct_any"] for r in per_occ if r["pct_any"] is not None]
    overall["occupations"] = len(shares)
    overall["mean_occupation_pct"] = sum(shares) / len(shares) if shares else None
    corr = rows(study, "SELECT * FROM indicator_correlation")
    examples = dicts(study.sql("report/indicator_examples"))
    return {
        "rows": per_occ,
        "overall": overall,
        "correlation": corr[0] if corr else None,
        "examples": examples,
        "ran": study.last_run("indicators") is not None or study.count("indicators") > 0,
        # per corpus group and pooled (corpus_summary; _corpora.html.j2)
        "corpora": corpus_rows(study),
        "confidence_pct": f"{study.config.analysis.confidence * 100:g}",
    }


def similarity_section(study: Study) -> dict[str, Any]:
    """Mean caption-prompt similarity per strategy, and per occupation."""
    detail = dicts(study.sql("report/similarity_detail"))
    summary = dicts(study.sql("report/similarity_summary"))
    summary.sort(key=lambda r: strategy_sort_key(r["strategy"]))

    images = image_summary(rows(study, "SELECT * FROM image_similarity"))
    caption_means = {r["strategy"]: r["mean_similarity"] for r in summary}
    for r in images:  # the caption-prompt similarity beside it
        r["caption_similarity"] = caption_means.get(r["strategy"])
    clip_models = [
        r["clip_model"] for r in rows(study, "SELECT DISTINCT clip_model FROM image_similarity")
    ]
    return {"summary": summary, "detail": detail, "images": images, "clip_models": clip_models}


def top_neighbors(study: Study) -> list[dict[str, Any]]:
    """For the occupations with the most captions: each prompt's top `nn` captions."""
    occupations = [
        r["occupation"]
        for r in dicts(study.sql("report/neighbor_occupations", n=TOP_NEIGHBOR_OCCUPATIONS))
    ]
    return neighbor_groups(study, occupations, TOP_NEIGHBORS)


def neighbor_groups(study: Study, occupations: list[str], top: int) -> list[dict[str, Any]]:
    """Each prompt's ``top`` `nn` captions for ``occupations``, grouped by (occupation,
    prompt) in occupation and template order; a caption row holds rank, score (cosine),
    text and indicator (the report and the demo's neighbour page use this one query)."""
    if not occupations:
        return []
    found = dicts(study.sql("report/neighbors", n=top, occupations=occupations))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in found:
        groups.setdefault((r["occupation"], r["prompt"]), []).append(r)
    return [{"occupation": o, "prompt": p, "captions": c} for (o, p), c in groups.items()]


# -- figures --------------------------------------------------------------------------------
def figures_section(
    study: Study, ctx: dict[str, Any], out_dir: Path | None, progress: bool
) -> list[dict[str, Any]]:
    """Render every figure the data allows; returns name, title, caption, data URI."""
    rendered: list[figs.RenderedFigure] = []
    jobs = figure_jobs(study, ctx)
    for kind, args in tqdm(jobs, desc="report figures", unit="fig", disable=not progress):
        figure = _render_figure(kind, args, ctx, out_dir)
        if figure is not None:  # None: the figure function had nothing to draw
            rendered.append(figure)
    rendered += preference_figures(ctx, out_dir, _file_name)
    rendered += arena_figures(ctx, out_dir, _file_name)
    return [
        {
            "name": r.name,
            "title": r.title,
            "caption": r.caption,
            "uri": "data:image/png;base64," + base64.b64encode(r.png).decode("ascii"),
        }
        for r in rendered
    ]


def figure_jobs(study: Study, ctx: dict[str, Any]) -> list[tuple[str, Any]]:
    """The study figures the data allows, as ``(kind, args)`` for :func:`draw_figure`;
    ``ctx`` holds at least the ``results``, ``indicators`` and ``similarity`` sections."""
    pairs = amplification_pairs(study)
    jobs: list[tuple[str, Any]] = []
    for block in ctx["results"]["blocks"]:
        model = block["model"]
        mine = [p for p in pairs if p["model_id"] == model and p["template_id"] != 0]
        templates = sorted({p["template_id"] for p in mine})
        strategies = sorted({p["strategy"] for p in mine}, key=strategy_sort_key)
        plotted = [
            p
            for p in mine
            if p.get("training_pf") is not None and p.get("generated_pf") is not None
        ]
        if plotted:
            jobs.append(("scatter", (model, mine, templates, strategies)))
        if fnd.amplification_measured(ctx["results"]):
            jobs.append(("bars", (model, block["layout"], ctx["results"]["columns"])))
    if any(r.get("pct_any") is not None for r in ctx["indicators"]["rows"]):
        jobs.append(("indicators", None))
    corr = ctx["indicators"]["correlation"]
    if corr and corr["n_occupations"]:
        jobs.append(("correlation", corr))
    if ctx["similarity"]["detail"]:
        jobs.append(("similarity", None))
    return jobs


#: the caption under each kind of figure of :func:`figures_section`
FIGURE_CAPTIONS = {
    "scatter": "One point per occupation; rows are selection strategies, columns prompts. Red: "
    "amplification (generated further from 50 than training), blue: de-amplification, "
    "hatched grey: direction switch (excluded, crosses).",
    "bars": "Bars: mean A over included occupations (percentage points); whiskers: bootstrap "
    "interval. Above 0 = amplification.",
    "indicators": "Share of the captions mentioning each occupation (count in brackets) that "
    "carry a male-only, female-only or both-gender indicator.",
    "correlation": "One point per occupation (labelled keyword-sample training images).",
    "similarity": "Mean SBERT cosine similarity between each subset's captions and its prompt; "
    "dots are (occupation, prompt) subsets.",
}


def _render_figure(
    kind: str, args: Any, ctx: dict[str, Any], out_dir: Path | None
) -> figs.RenderedFigure | None:
    """Draw one figure of ``kind`` (a key of :data:`FIGURE_CAPTIONS`) and save it; None when
    the figure function had nothing to draw."""
    fig, name, title = draw_figure(kind, args, ctx)
    if fig is None:
        return None
    return figs.save(fig, name, title, FIGURE_CAPTIONS[kind], out_dir)


def draw_figure(kind: str, args: Any, ctx: dict[str, Any]) -> tuple[Any, str, str]:
    """``(matplotlib Figure, file name, title)`` of one :func:`figure_jobs` job."""
    safe = _file_name
    if kind == "scatter":
        model, mine, templates, strategies = args
        fig = figs.scatter_grid(model, mine, templates, strategies)
        name, title = f"scatter_{safe(model)}", f"Training vs generated %female: {model}"
    elif kind == "bars":
        model, layout, columns = args
        fig = figs.amplification_bars(model, layout, columns)
        name = f"amplification_{safe(model)}"
        title = f"Mean amplification by strategy and prompt: {model}"
    elif kind == "indicators":
        fig = figs.indicator_bars(ctx["indicators"]["rows"])
        name, title = "indicators", "Explicit gender indicators per occupation"
    elif kind == "correlation":
        fig = figs.correlation_scatter(ctx["indicators"]["rows"], args["r"], args["p_value"])
        name, title = "indicator_correlation", "Female indicators vs training %female"
    else:
        fig = figs.similarity_plot(ctx["similarity"]["detail"])
        name, title = "similarity", "Caption-prompt similarity by strategy"
    return fig, name, title


#: the most UTF-8 bytes of a model (or language, aspect) name in a figure's file name: with
#: the longest prefix (``scatter_corrected_``) and ``.png``, far below the 255 of a file system
FILE_NAME_BYTES = 80


def _file_name(text: str) -> str:
    """``text`` (a model id, language or aspect) as part of a figure's file name: letters and
    digits of any script, ``-``, ``_`` and ``.`` kept, the rest ``_``; longer than
    :data:`FILE_NAME_BYTES` bytes, cut with a hash of the whole text (stable, unique)."""
    keep = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in text)
    return cut_bytes(keep.strip("._") or "model", FILE_NAME_BYTES, whole=text)


# -- per occupation -------------------------------------------------------------------------
def occupations_section(study: Study, progress: bool) -> list[dict[str, Any]]:
    """Per occupation: %female numbers, example captions, training/generated thumbnails."""
    n_thumbs = study.config.analysis.thumbnails
    max_pixels = study.config.images.max_pixels
    occupations = [r["occupation"] for r in dicts(study.sql("report/occupations"))]
    # a set without images would be a row of dashes: only sets with images
    training_pf = _group([r for r in dicts(study.sql("report/percent_training")) if _imaged(r)])
    generated_pf = _group([r for r in dicts(study.sql("report/percent_generated")) if _imaged(r)])
    captions = _group(dicts(study.sql("report/example_captions", n=EXAMPLE_CAPTIONS)))
    classifier = (study.last_run("analyze") or {}).get("provenance", {}).get("classifier") or ""
    out = []
    for occ in tqdm(occupations, desc="report thumbnails", unit="occ", disable=not progress):
        entry: dict[str, Any] = {
            "occupation": occ,
            "training": training_pf.get(occ, []),
            "generated": generated_pf.get(occ, []),
            "captions": captions.get(occ, []),
            "thumbs": [],
            "unreadable": 0,
        }
        if n_thumbs:
            for group in _thumbnail_groups(study, occ, classifier, n_thumbs):
                items = []
                for img in group["images"]:
                    uri = thumbnail_uri(resolve(study.root, img["path"]), max_pixels=max_pixels)
                    if uri is None:
                        entry["unreadable"] += 1
                        continue
                    items.append({**img, "uri": uri})
                if items:
                    entry["thumbs"].append({"title": group["title"], "images": items})
        out.append(entry)
    return out


def _thumbnail_groups(
    study: Study, occupation: str, classifier: str, n: int
) -> list[dict[str, Any]]:
    """Training images (keyword sample) and each model's generated images of ``occupation``,
    labelled ones first, in a fixed pseudo-random order."""
    training = dicts(
        study.sql("report/thumbs_training", occupation=occupation, classifier=classifier, n=n)
    )
    groups = [{"title": "training", "images": training}]
    generated = dicts(
        study.sql("report/thumbs_generated", occupation=occupation, classifier=classifier, n=n)
    )
    for model in sorted({g["model_id"] for g in generated}):
        groups.append(
            {
                "title": f"generated: {model}",
                "images": [g for g in generated if g["model_id"] == model],
            }
        )
    return groups


def _imaged(row: dict[str, Any]) -> bool:
    """Whether a ``percent_female`` row has images (else it is a row of zeros and dashes)."""
    return bool(row.get("n_images") or (row.get("n_female") or 0) + (row.get("n_male") or 0))


def _group(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        out.setdefault(item["occupation"], []).append(item)
    return out


# -- provenance -----------------------------------------------------------------------------
def provenance_section(study: Study) -> dict[str, Any]:
    """Config (as TOML), per-stage provenance (JSON), versions, seeds, models."""
    stages = []
    versions: dict[str, Any] = {}
    for name in STAGE_NAMES:
        last = study.last_run(name)
        if last is None:
            continue
        prov = dict(last["provenance"])
        versions = prov.pop("versions", versions) or versions
        stages.append(
            {"stage": name, "json": json.dumps(prov, indent=2, sort_keys=True, default=str)}
        )

    return {
        "config": dump_toml(study.config.to_dict()),
        "elsewhere": [*import_lines(study), *api_lines(study)],  # imports, API images
        "stages": stages,
        "versions": sorted(versions.items()),
        "seed": study.config.study.seed,
    }
