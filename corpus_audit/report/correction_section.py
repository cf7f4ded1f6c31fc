"""The report's section on the misclassification correction (docs/analysis.md, "Correcting for
the classifier's errors"): the classifier's error rates per source, Table 3 corrected next to
uncorrected, the corrected scatter next to the uncorrected one, and how many pairs change
sign or cells lose significance. Data only; ``templates/_correction.html.j2`` prints it
(autoescaped: model, strategy and occupation names come from the study)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus_audit.core.store import Study
from corpus_audit.methods.amplification import paper_layout, strategy_sort_key
from corpus_audit.report import figures as figs
from corpus_audit.tables.analysis import correction_messages
from corpus_audit.tables.read import rows

CAPTION = (
    "Corrected for the classifier's errors (Rogan-Gladen with the ambiguous shares, error rates "
    "from the human validation labels). Same regions and marks as the uncorrected scatter."
)


def correction_section(
    study: Study,
    ctx: dict[str, Any],
    out_dir: Path | None,
    cell: Callable[[dict | None], dict | None],
    file_name: Callable[[str], str],
) -> dict[str, Any]:
    """Everything ``_correction.html.j2`` shows; ``cell`` formats a Table 3 cell (as the
    uncorrected table's), ``file_name`` makes a model id a figure file name. Uses
    ``ctx["results"]`` (the uncorrected Table 3) and ``ctx["figures"]`` (its scatters)."""
    errors = rows(study, "SELECT * FROM classifier_errors ORDER BY source")
    prov = (ctx["analysis"].get("provenance") or {}).get("correction")
    summary = rows(
        study,
        "SELECT * FROM amplification_summary_corrected "
        "ORDER BY model_id, strategy, template_id NULLS LAST",
    )
    applied = any(e["applied"] for e in errors)
    lines = (
        correction_messages(prov) if prov else ["misclassification correction: not computed yet"]
    )
    out: dict[str, Any] = {
        "ran": prov is not None or bool(summary),
        "applied": applied,
        "lines": lines,
        "errors": errors,
        "changes": (prov or {}).get("changes"),
        "blocks": [],
        "figures": [],
    }
    if not summary:
        return out
    columns = ctx["results"]["columns"]
    templates = [int(c[1:]) for c in columns if c.startswith("#")]
    layout = paper_layout(summary, templates=templates or (1, 2, 3, 4))
    notes = {(r["model_id"], r["strategy"]): r["note"] for r in summary}
    plain = {b["model"]: b["layout"] for b in ctx["results"]["blocks"]}
    for model, lines_ in layout.items():
        before = {line["strategy"]: line for line in plain.get(model, [])}
        out["blocks"].append(
            {
                "model": model,
                "rows": [
                    {
                        "strategy": line["strategy"],
                        "note": notes.get((model, line["strategy"])),
                        "cells": [
                            (cell((before.get(line["strategy"]) or {}).get(c)), cell(line.get(c)))
                            for c in columns
                        ],
                    }
                    for line in lines_
                ],
            }
        )
    if applied:
        out["figures"] = _scatters(study, ctx, out_dir, file_name)
    return out


def _scatters(
    study: Study, ctx: dict[str, Any], out_dir: Path | None, file_name: Callable[[str], str]
) -> list[dict[str, Any]]:
    """Per model with corrected pairs: the uncorrected scatter (already rendered) and the
    corrected one, side by side."""
    pairs = rows(
        study,
        "SELECT * FROM amplification_corrected WHERE template_id <> 0 "
        "ORDER BY model_id, strategy, template_id, occupation",
    )
    rendered = {f["name"]: f for f in ctx.get("figures", [])}
    out = []
    for model in sorted({p["model_id"] for p in pairs}):
        mine = [p for p in pairs if p["model_id"] == model]
        if not any(p["training_pf"] is not None and p["generated_pf"] is not None for p in mine):
            continue
        templates = sorted({p["template_id"] for p in mine})
        strategies = sorted({p["strategy"] for p in mine}, key=strategy_sort_key)
        fig = figs.scatter_grid(model, mine, templates, strategies)
        name = f"scatter_corrected_{file_name(model)}"
        title = f"Training vs generated %female, corrected: {model}"
        done = figs.save(fig, name, title, CAPTION, out_dir)
        before = rendered.get(f"scatter_{file_name(model)}")
        out.append(
            {
                "model": model,
                "title": title,
                "caption": CAPTION,
                "uri": "data:image/png;base64," + base64.b64encode(done.png).decode("ascii"),
                "uncorrected_uri": before["uri"] if before else None,
            }
        )
    return out
