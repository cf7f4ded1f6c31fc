"""Figures of the who analysis (matplotlib object API, as :mod:`corpus_audit.report.figures`).

- :func:`decile_figure`: occupations per decile of % women among the texts counted, bars
  split by female-/male-dominated occupations (labour statistics) and "no statistic".
- :func:`who_scatter`: % women in the texts (y, Wilson interval) vs the labour statistic
  (x) per occupation, with the parity diagonal.

Both return a :class:`matplotlib.figure.Figure`, or None when there is nothing to draw;
:func:`corpus_audit.report.figures.save` renders it to PNG/SVG.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from corpus_audit.report.figures import DPI, label_points

FEMALE_COLOR = "#dd8452"
MALE_COLOR = "#4c72b0"
NONE_COLOR = "#b0b0b0"


def new_figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def decile_figure(deciles: pd.DataFrame, title: str = "associated texts") -> Any:
    """Stacked bars, one per decile of % women (``decile_counts`` table): female-dominated,
    male-dominated and no-statistic occupations. ``title`` names what was counted, whole
    ("associated texts", "specified texts of gpt-4o"): the axis reads "% women among
    <title>". None when no decile holds an occupation (nothing to draw)."""
    if deciles.empty or not int(
        deciles[["female_dominated", "male_dominated", "no_statistic"]].to_numpy().sum()
    ):
        return None
    fig = new_figure(6.4, 3.4)
    ax = fig.subplots()
    x = deciles["decile"].to_numpy()
    bottom = [0] * len(x)
    for column, color, label in (
        ("female_dominated", FEMALE_COLOR, "female-dominated (labour stats >= 50 %)"),
        ("male_dominated", MALE_COLOR, "male-dominated (< 50 %)"),
        ("no_statistic", NONE_COLOR, "no labour statistic"),
    ):
        values = deciles[column].to_numpy()
        ax.bar(x, values, 0.8, bottom=bottom, color=color, label=label)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    labels = [
        f"{int(lo)}-{int(hi)}"
        for lo, hi in zip(deciles["pct_low"], deciles["pct_high"], strict=True)
    ]
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_xlabel(f"% women among {title}")
    ax.set_ylabel("occupations")
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=7)
    ax.set_title(f"Occupations per decile of % women ({title})", fontsize=10)
    return fig


def who_scatter(who: pd.DataFrame, min_associated: int = 1, title: str = "associated texts") -> Any:
    """% women in the texts vs labour statistics, one point per occupation with both and at
    least ``min_associated`` associated texts (a ``percent_women`` table), with its Wilson
    interval. ``title`` names the texts, whole ("associated texts of gpt-4o"). None when no
    occupation qualifies (nothing to draw)."""
    used = who[
        (who["associated"] >= min_associated)
        & who["pct_women"].notna()
        & who["labor_pct_women"].notna()
    ]
    if used.empty:
        return None
    fig = new_figure(4.8, 4.4)
    ax = fig.subplots()
    ax.plot([0, 100], [0, 100], color="black", lw=0.6, ls="--")
    y = used["pct_women"].to_numpy(dtype=float)
    err = np.vstack([y - used["ci_low"].to_numpy(float), used["ci_high"].to_numpy(float) - y])
    ax.errorbar(
        used["labor_pct_women"].to_numpy(dtype=float),
        y,
        yerr=np.clip(err, 0, None),
        fmt="o",
        ms=4,
        color=FEMALE_COLOR,
        ecolor="#999999",
        elinewidth=0.7,
    )
    if len(used) <= 25:
        label_points(
            ax, ((str(r.occupation), r.labor_pct_women, r.pct_women) for r in used.itertuples())
        )
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("% women, labour statistics")
    ax.set_ylabel(f"% women among {title}\n(Wilson interval)")
    ax.set_title(f"Who is represented ({title})\nvs labour statistics", fontsize=9)
    return fig
