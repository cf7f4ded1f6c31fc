"""The HTML page of ``corpus-audit amplify --report``: amplification of plain %female tables.

One self-contained page (``amplification.html``), like the study report: figures are PNG
``data:`` URIs, the style sheet is inline, no script, no external URL; rendered by Jinja2 with
autoescape on (occupation and prompt names come from a user's file). Per table (model):

- the per-prompt table: mean A over included occupations, included / excluded counts, its
  interval with level and method in the header (the bootstrap one when both sides carry
  counts, else the Student-t interval over the included occupations' A), one-sample t-test;
  with ``reference`` (published means) a column beside the recomputed one;
- a T-vs-G scatter per prompt with the amplification, de-amplification and direction-switch
  regions shaded (:func:`corpus_audit.report.figures.scatter_grid`), excluded pairs as crosses;
- the excluded pairs, and the per-occupation values: T with its Wilson interval when the
  training side carries counts, G and A per prompt.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_audit import __version__
from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.core.metrics import METRICS
from corpus_audit.methods.stats import t_interval, wilson_interval
from corpus_audit.report import figures as figs
from corpus_audit.report.render import render

if TYPE_CHECKING:
    from corpus_audit.methods.amplification import ModelResult

TEMPLATE = "amplify.html.j2"
DEFAULT_TITLE = "Amplification from %female tables"


@dataclass(frozen=True)
class PageText:
    """What the page shows beside the recomputed numbers: ``title`` (None:
    :data:`DEFAULT_TITLE`) and ``note`` head it; ``reference`` (``{model: {prompt or
    "average": mean A}}``, percentage points) adds published means beside the recomputed ones."""

    title: str | None = None
    note: str | None = None
    reference: dict[str, dict[str, float]] | None = None


def write_page(
    path: Path,
    results: list[ModelResult],
    *,
    parity_side: str,
    confidence: float,
    text: PageText = PageText(),
) -> Path:
    """Render the page for ``results`` to ``path`` (atomically); returns ``path``."""
    reference = text.reference or {}
    ctx = {
        "title": text.title or DEFAULT_TITLE,
        "note": text.note,
        "version": __version__,
        "metrics": METRICS,
        "parity_side": parity_side,
        "confidence_pct": f"{confidence * 100:g}",
        "models": [_model_context(r, confidence, reference.get(r.model)) for r in results],
    }
    html = render(ctx, TEMPLATE)
    return write_text_atomic(path, html)


def _model_context(
    result: ModelResult, confidence: float, reference: dict[str, float] | None
) -> dict[str, Any]:
    prompts = [s.prompt for s in result.per_prompt]
    rows = [
        {
            "prompt": s.prompt,
            "mean": s.mean,
            **_interval(s, result, confidence),
            "t": s.t_stat,
            "p": s.p_value,
            "included": s.n_included,
            "excluded": s.n_excluded,
            "reference": (reference or {}).get(str(s.prompt)),
        }
        for s in result.per_prompt
    ]
    o = result.overall
    rows.append(
        {
            "prompt": f"average ({o.n_prompts} prompts)",
            "mean": o.mean,
            "ci_low": o.ci_low,
            "ci_high": o.ci_high,
            "ci_method": "bootstrap" if o.ci_low is not None else None,
            "t": None,
            "p": None,
            "included": sum(s.n_included for s in result.per_prompt),
            "excluded": sum(s.n_excluded for s in result.per_prompt),
            "reference": (reference or {}).get("average"),
        }
    )
    by_occ: dict[str, dict[str, Any]] = {}
    for t in result.training:
        lo, hi = (None, None)
        if t.n and t.percent_female is not None:
            lo, hi = wilson_interval(round(t.percent_female * t.n / 100.0), t.n, confidence)
        by_occ[t.occupation] = {
            "occupation": t.occupation,
            "training": t.percent_female,
            "training_n": t.n,
            "ci_low": lo,
            "ci_high": hi,
            "cells": {},
        }
    for p in result.pairs:
        by_occ[p.occupation]["cells"][p.prompt] = {
            "generated": p.generated.percent,
            "a": p.amplification,
            "excluded": p.excluded,
        }
    return {
        "name": result.model,
        "source": result.source,
        "prompts": prompts,
        "rows": rows,
        "has_reference": bool(reference),
        "ci_methods": sorted({r["ci_method"] for r in rows if r["ci_method"]}),
        "excluded": [p for p in result.pairs if p.excluded],
        "occupations": list(by_occ.values()),
        "figure": _scatter(result, prompts),
    }


def _interval(summary: Any, result: ModelResult, confidence: float) -> dict[str, Any]:
    """A prompt's interval of mean A: the bootstrap one when the table carries the counts
    behind both T and G, else the Student-t interval over its included occupations' A (the
    spread the t-test beside it uses); ``ci_method`` names which (None: neither)."""
    if summary.ci_low is not None:
        return {"ci_low": summary.ci_low, "ci_high": summary.ci_high, "ci_method": "bootstrap"}
    values = [
        p.amplification
        for p in result.pairs
        if p.prompt == summary.prompt and not p.excluded and p.amplification is not None
    ]
    lo, hi = t_interval(values, confidence)
    return {"ci_low": lo, "ci_high": hi, "ci_method": "t" if lo is not None else None}


def _scatter(result: ModelResult, prompts: list[Any]) -> dict[str, str]:
    """The T-vs-G panels of one model, one per prompt, as a PNG data URI."""
    pairs = [
        {
            "strategy": "",
            "template_id": p.prompt,
            "occupation": p.occupation,
            "training_pf": p.training.percent,
            "generated_pf": p.generated.percent,
            "excluded": p.excluded,
        }
        for p in result.pairs
    ]
    fig = figs.scatter_grid(result.model, pairs, prompts, [""])
    rendered = figs.save(fig, "scatter", "", "", None)
    return {
        "uri": "data:image/png;base64," + base64.b64encode(rendered.png).decode("ascii"),
        "alt": f"Training vs generated %female per occupation and prompt: {result.model}",
    }
