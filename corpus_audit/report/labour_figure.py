"""The model-only audit's figure and rows: generated %female vs labour %female per occupation.

The HEIM / Bianchi et al. comparison: one point per (model, occupation, language) of the pooled
``generated_gender`` rows (``prompt_id`` NULL) that have both a generated %female and a labour
statistic; x = the labour statistic's % women, y = the generated images' %female with its
Wilson interval (vertical bar), the diagonal y = x (the model matches the labour statistics)
and the 50 % parity lines; every point labelled with its occupation, one colour per model.

- :func:`labour_rows`: those rows from a study (the report's context helper);
- :func:`labour_figure`: the figure, or None when no row has both values (the page then says
  "no data" in a line instead of drawing empty axes);
- :func:`labour_figure_for`: both, saved as ``generated_vs_labour`` (PNG bytes + files).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus_audit.core.store import Study, dicts
from corpus_audit.report.figures import DPI, PROMPT_COLORS, RenderedFigure, label_points, save

FIGURE_NAME = "generated_vs_labour"
TITLE = "Generated %female vs labour statistics per occupation"
NO_DATA = (
    "no occupation has both a generated %female (labelled female or male images) and a "
    "labour statistic"
)


def labour_rows(study: Study) -> list[dict[str, Any]]:
    """The pooled ``generated_gender`` rows (one per model, occupation and language), ordered by
    model, occupation and language; empty when the table is missing or empty. Every row, with
    or without a labour statistic (the figure keeps those with both)."""
    if not study.table_exists("generated_gender"):
        return []
    return dicts(
        study.con.execute(
            "SELECT * FROM generated_gender WHERE prompt_id IS NULL "
            "ORDER BY model_id, occupation, language"
        )
    )


def plottable(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with both a generated %female and a labour %female."""
    return [
        r
        for r in rows
        if r.get("percent_female") is not None and r.get("labour_percent_female") is not None
    ]


def labour_figure(rows: Sequence[dict[str, Any]], *, confidence: float = 0.95) -> Any | None:
    """The scatter of :func:`labour_rows` rows (see the module docstring); None without a row
    that has both values. ``confidence`` is the intervals' level (for the axis label)."""
    points = plottable(rows)
    if not points:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 5.2), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 100], [0, 100], color="black", lw=0.6, ls="--", label="generated = labour")
    ax.axhline(50, color="black", lw=0.4)
    ax.axvline(50, color="black", lw=0.4)
    models = sorted({r["model_id"] for r in points})
    for i, model in enumerate(models):
        mine = [r for r in points if r["model_id"] == model]
        x = [float(r["labour_percent_female"]) for r in mine]
        y = [float(r["percent_female"]) for r in mine]
        lo = [max(0.0, v - float(r["ci_low"])) for v, r in zip(y, mine, strict=True)]
        hi = [max(0.0, float(r["ci_high"]) - v) for v, r in zip(y, mine, strict=True)]
        ax.errorbar(
            x,
            y,
            yerr=[lo, hi],
            fmt="o",
            ms=4,
            color=PROMPT_COLORS[i % len(PROMPT_COLORS)],
            elinewidth=0.6,
            capsize=1.5,
            label=model,
        )
    label_points(
        ax,
        ((_point_label(r), float(r["labour_percent_female"]), float(r["percent_female"]))
         for r in points),
        fontsize=6,
    )  # fmt: skip
    ax.set_xlim(-2, 102)  # points at 0 or 100 stay whole
    ax.set_ylim(-2, 102)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.set_xlabel("labour statistics: % women in the occupation")
    ax.set_ylabel(f"generated images: % female ({confidence:.0%} Wilson interval)")
    n_occupations = len({(r["occupation"], r.get("language")) for r in points})
    counts = f"{_plural(n_occupations, 'occupation')}, {_plural(len(models), 'model')}"
    ax.set_title(f"{TITLE}\n({counts})", fontsize=9)
    ax.legend(
        fontsize=7, title="model", title_fontsize=7, loc="upper left",
        bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
    )  # fmt: skip
    return fig


def labour_figure_for(
    study: Study, out_dir: Path | None = None
) -> tuple[list[dict[str, Any]], RenderedFigure | None]:
    """The pooled rows and the saved figure (None without data, see :data:`NO_DATA`)."""
    rows = labour_rows(study)
    fig = labour_figure(rows, confidence=study.config.analysis.confidence)
    if fig is None:
        return rows, None
    caption = (
        "One point per model and occupation: %female of the labelled (female or male) images "
        "with its Wilson interval, against the labour statistic of the occupation (source in "
        "the table). Dashed: generated = labour; perceived gender, not self-identified."
    )
    return rows, save(fig, FIGURE_NAME, TITLE, caption, out_dir)


def _point_label(row: dict[str, Any]) -> str:
    language = row.get("language") or "en"
    return row["occupation"] if language == "en" else f"{row['occupation']} ({language})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
