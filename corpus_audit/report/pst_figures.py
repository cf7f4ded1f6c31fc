"""Figures of the PST results (matplotlib object API, like :mod:`corpus_audit.report.figures`).

- :func:`labor_scatter`: per role, the labour-statistics %female (x) against the perceived
  %female (y; generated images or captions), male-stereotyped roles blue, female-stereotyped
  orange, the diagonal y = x (the model/corpus matches the statistics) and the parity lines;
  Wilson intervals as vertical bars; Pearson r and p in the title.

Save a figure with :func:`corpus_audit.report.figures.save` (PNG bytes + PNG/SVG files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corpus_audit.report.figures import DPI, label_points

if TYPE_CHECKING:
    import pandas as pd

STEREOTYPE_COLORS = {"male": "#4c72b0", "female": "#dd8452"}


def labor_scatter(
    rows: pd.DataFrame,
    r: float | None,
    p: float | None,
    *,
    title: str = "Perceived vs labour-statistics %female per role",
    ylabel: str = "perceived %female (generated images)",
    annotate: bool | None = None,
) -> Any:
    """Scatter of :func:`corpus_audit.methods.pst.score.labor_comparison` rows (one kind and variant):
    roles without a labour statistic or without a perceived %female are left out; None when
    no role is left. The legend stands below the axes, outside the data."""
    from matplotlib.figure import Figure

    usable = rows[rows["labor_percent_female"].notna() & rows["percent_female"].notna()]
    if usable.empty:
        return None  # nothing to draw: the caller shows a "no data" line
    fig = Figure(figsize=(5.2, 4.6), dpi=DPI, layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 100], [0, 100], color="black", lw=0.6, ls="--", label="perceived = statistics")
    ax.axhline(50, color="black", lw=0.4)
    ax.axvline(50, color="black", lw=0.4)
    for stereotype, color in STEREOTYPE_COLORS.items():
        part = usable[usable["stereotype"] == stereotype]
        if part.empty:
            continue
        y = part["percent_female"].astype(float)
        lo = (y - part["ci_low"].astype(float)).clip(lower=0)
        hi = (part["ci_high"].astype(float) - y).clip(lower=0)
        ax.errorbar(
            part["labor_percent_female"].astype(float),
            y,
            yerr=[lo, hi],
            fmt="o",
            ms=4,
            color=color,
            elinewidth=0.6,
            capsize=1.5,
            label=f"{stereotype}-stereotyped role",
        )
    if annotate is None:
        annotate = len(usable) <= 45
    if annotate:
        rows = usable.itertuples(index=False)
        label_points(
            ax,
            ((str(r.role), float(r.labor_percent_female), float(r.percent_female)) for r in rows),
            fontsize=5.5,
        )
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("labour statistics: % women")
    ax.set_ylabel(ylabel)
    stat = "r undefined" if r is None else f"r = {r:.3f}, p = {p:.3g}, n = {len(usable)}"
    ax.set_title(f"{title}\n({stat})", fontsize=9)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=7)
    return fig
