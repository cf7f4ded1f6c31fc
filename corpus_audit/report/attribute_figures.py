"""Heat-map of the per-class change of a perceived attribute, occupation by class.

One panel per attribute (perceived age group, skin tone group) for one (model, strategy): rows
are the occupations both sides hold, columns the attribute's classes in scale order, colour
the change generated - training in percentage points (diverging, 0 white). Reads the
aggregate ``attribute_change`` rows only. :func:`change_heatmap` returns None when there is
nothing to draw (the page then says so in a line).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.report.figures import DPI, RenderedFigure, save

FIGURE_NAME = "attribute_change"
TITLE = "Change in perceived age and skin tone groups, generated - training"
ATTRIBUTES = (("age_group", "perceived age group"), ("tone_group", "skin tone group (L*)"))
MAX_ROWS = 40  # occupations drawn (the largest changes first beyond this)


def _matrix(rows: Sequence[dict[str, Any]], attribute: str) -> tuple[list, list, np.ndarray]:
    """Occupations, classes and the change matrix of one attribute (NaN: no value)."""
    mine = [r for r in rows if r["attribute"] == attribute and r["occupation"] != "*"]
    classes = [c for _, c in sorted({(r["class_order"], r["class"]) for r in mine})]
    occupations = sorted({r["occupation"] for r in mine})
    grid = np.full((len(occupations), len(classes)), np.nan)
    for r in mine:
        grid[occupations.index(r["occupation"]), classes.index(r["class"])] = r["change"]
    if len(occupations) > MAX_ROWS:
        keep = np.argsort(-np.nanmax(np.abs(grid), axis=1))[:MAX_ROWS]
        keep.sort()
        occupations, grid = [occupations[i] for i in keep], grid[keep]
    return occupations, classes, grid


def _class_label(name: str) -> str:
    """``35_54`` -> ``35-54``, ``55_plus`` -> ``55+``, ``l_dark`` -> ``l dark``."""
    if name[:1].isdigit():
        return name.replace("_plus", "+").replace("_", "-")
    return name.replace("_", " ")


def change_heatmap(rows: Sequence[dict[str, Any]], pair: tuple[str, str]) -> Any | None:
    """The heat-map of ``attribute_change`` rows of one (model, strategy); None without any
    per-occupation row."""
    rows = [r for r in rows if (r["model_id"], r["strategy"]) == pair]
    panels = [(a, label, *_matrix(rows, a)) for a, label in ATTRIBUTES]
    panels = [p for p in panels if p[2] and p[3]]
    if not panels:
        return None
    from matplotlib.figure import Figure  # heavy: only when the report draws

    height = 1.2 + 0.22 * max(len(p[2]) for p in panels)
    fig = Figure(figsize=(4.2 * len(panels) + 1.2, height), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    limit = max(float(np.nanmax(np.abs(p[4]))) for p in panels) or 1.0
    image = None
    for ax, (_, label, occupations, classes, grid) in zip(axes, panels, strict=True):
        image = ax.imshow(grid, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
        ax.set_xticks(range(len(classes)), [_class_label(c) for c in classes], fontsize=7)
        ax.set_yticks(range(len(occupations)), occupations, fontsize=7)
        ax.set_title(label, fontsize=8)
    fig.colorbar(image, ax=list(axes), label="percentage points", shrink=0.8)
    fig.suptitle(f"{TITLE}\n{pair[0]} vs training ({pair[1]})", fontsize=9)
    return fig


def change_heatmap_for(
    rows: Sequence[dict[str, Any]], pair: tuple[str, str], out_dir: Path | None
) -> RenderedFigure | None:
    """:func:`change_heatmap`, saved (PNG bytes + files), or None without data."""
    fig = change_heatmap(rows, pair)
    if fig is None:
        return None
    caption = (
        "Per occupation and class: the generated images' share minus the training images' "
        "share of faces, in percentage points (red: more in generated images). Perceived "
        "attributes; skin tone as uncalibrated L* groups. Intervals are in the tables."
    )
    key = hashlib.sha256("\x00".join(pair).encode("utf-8")).hexdigest()[:8]
    return save(fig, f"{FIGURE_NAME}_{key}", TITLE, caption, out_dir)


def heatmap_entries(rows: Sequence[dict[str, Any]], out_dir: Path | None) -> list[dict[str, str]]:
    """Page entries (name, title, caption, inline PNG) of every (model, strategy)'s heat-map."""
    out = []
    for pair in sorted({(r["model_id"], r["strategy"]) for r in rows}):
        saved = change_heatmap_for(rows, pair, out_dir)
        if saved is not None:
            uri = "data:image/png;base64," + base64.b64encode(saved.png).decode("ascii")
            out.append({"name": saved.name, "title": saved.title, "caption": saved.caption,
                        "uri": uri})  # fmt: skip
    return out
