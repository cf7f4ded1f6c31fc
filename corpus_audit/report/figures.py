"""Figures of the report (matplotlib, object API on the Agg canvas; PNG + SVG).

- :func:`scatter_grid`: per model, one panel per (strategy, prompt): training %female (x)
  vs generated %female (y), one point per occupation; amplification region shaded red,
  de-amplification blue, direction-switch quadrants grey; excluded points drawn as crosses.
- :func:`amplification_bars`: the strategy x prompt table of one model as grouped bars with
  bootstrap intervals.
- :func:`indicator_bars`, :func:`similarity_plot`, :func:`correlation_scatter`: the caption
  side (these exist even when no image stage ran).

Figures use :class:`matplotlib.figure.Figure` directly (no pyplot, no global backend
switch), so they render the same in a headless run and display in a notebook.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.methods.amplification import PARITY, strategy_sort_key
from corpus_audit.methods.stats import t_interval, wilson_interval
from corpus_audit.report.visible import make_visible

AMP_COLOR = "#d62728"
DEAMP_COLOR = "#1f77b4"
SWITCH_COLOR = "#7f7f7f"
PROMPT_COLORS = ("#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd")
DPI = 90


class NoFigureError(ValueError):
    """:func:`save` was given None: the figure function had no data (a caller's bug)."""


@dataclass
class RenderedFigure:
    """A saved figure: PNG bytes (for inlining) and the files written."""

    name: str
    title: str
    caption: str
    png: bytes
    png_path: Path | None
    svg_path: Path | None
    #: the figure's own words: suptitle, panel titles, axis labels, legend and colour-bar
    #: labels (:func:`figure_texts`), and ``title``; tests check them for repeated words
    texts: tuple[str, ...] = ()


#: the same word twice in a row ("associated associated"), case-insensitive
_REPEATED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)


def repeated_words(text: str) -> list[str]:
    """The words of ``text`` written twice in a row (separated only by white space), e.g.
    ``["associated"]`` for "% women among associated associated texts"."""
    return [m.group(1) for m in _REPEATED.finditer(text)]


def figure_texts(fig: Any) -> tuple[str, ...]:
    """The words a reader sees on ``fig`` besides tick labels and point annotations: the
    suptitle, each panel's title and axis labels (colour bars included), legend titles and
    entries; blanks left out."""
    texts: list[str] = []
    if getattr(fig, "_suptitle", None) is not None:
        texts.append(fig._suptitle.get_text())
    legends = list(fig.legends)
    for ax in fig.axes:
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        texts += [ax.get_xlabel(), ax.get_ylabel()]
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
    for legend in legends:
        texts.append(legend.get_title().get_text())
        texts += [t.get_text() for t in legend.get_texts()]
    return tuple(t for t in texts if t and t.strip())


def new_figure(width: float, height: float, *, layout: str | None = "constrained"):
    """A matplotlib Figure of ``width`` x ``height`` inches at the report's DPI."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout=layout)


def save(
    fig: Any, name: str, title: str, caption: str, out_dir: Path | None = None
) -> RenderedFigure:
    """Render ``fig`` to PNG (and write PNG + SVG to ``out_dir`` when given). Its texts are
    made :func:`~corpus_audit.report.visible.visible` first (control characters as escapes,
    ``$`` as written): names from a corpus or a manifest cannot break the SVG's XML.

    Every figure function of the report returns None when it has nothing to draw; a caller
    shows a "no data" line then and never calls this with None (:class:`NoFigureError`)."""
    if fig is None:
        raise NoFigureError(f"figure {name!r}: nothing to draw (the figure function gave None)")
    make_visible(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    png = buf.getvalue()
    fig.set_layout_engine("none")  # keep the positions just computed: the SVG needs no relayout
    png_path = svg_path = None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        png_path = out_dir / f"{name}.png"
        svg_path = out_dir / f"{name}.svg"
        png_path.write_bytes(png)
        fig.savefig(svg_path, format="svg", metadata={"Date": None})
    texts = (*figure_texts(fig), *([title] if title else []))
    return RenderedFigure(name, title, caption, png, png_path, svg_path, texts)


def shade_regions(ax: Any) -> None:
    """Shade amplification / de-amplification / direction-switch regions on a 0-100 square."""
    from matplotlib.collections import PolyCollection

    p = PARITY
    regions = (
        # Amplification: same side of 50 and further from it than the training value.
        (
            [[(0, 0), (p, 0), (p, p)], [(p, p), (p, 100), (100, 100)]],
            AMP_COLOR,
            0.13,
            None,
            "amplification",
        ),
        # De-amplification: same side, closer to 50.
        (
            [[(0, 0), (p, p), (0, p)], [(p, p), (100, p), (100, 100)]],
            DEAMP_COLOR,
            0.13,
            None,
            "de-amplification",
        ),
        # Direction switch: T and G on different sides of 50 (excluded from the means).
        (
            [[(0, p), (p, p), (p, 100), (0, 100)], [(p, 0), (100, 0), (100, p), (p, p)]],
            SWITCH_COLOR,
            0.10,
            "//",
            "direction switch (excluded)",
        ),
    )
    for polys, color, alpha, hatch, label in regions:
        ax.add_collection(
            PolyCollection(
                polys, facecolors=color, alpha=alpha, linewidths=0, hatch=hatch, label=label
            )
        )
    ax.plot([0, 100], [0, 100], color="black", lw=0.6, ls="--")
    ax.axhline(PARITY, color="black", lw=0.5)
    ax.axvline(PARITY, color="black", lw=0.5)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_yticks([0, 25, 50, 75, 100])
    ax.set_aspect("equal")


def label_points(
    ax: Any, points: Iterable[tuple[str, float, float]], *, fontsize: float = 6
) -> None:
    """Write each ``(label, x, y)`` point's label next to it (2 points up and right), as
    every scatter of the report, the PST page and the who/how page labels its occupations."""
    for label, x, y in points:
        ax.annotate(label, (x, y), fontsize=fontsize, xytext=(2, 2), textcoords="offset points")


def scatter_panel(ax: Any, pairs: Sequence[dict], *, annotate: bool | None = None) -> None:
    """One panel: ``pairs`` are ``amplification`` rows (training_pf, generated_pf, excluded)."""
    shade_regions(ax)
    points = [p for p in pairs if p["training_pf"] is not None and p["generated_pf"] is not None]
    inc = [p for p in points if not p["excluded"]]
    exc = [p for p in points if p["excluded"]]
    styles = (
        (inc, {"s": 18, "color": "black", "label": "occupation"}),
        (exc, {"s": 30, "marker": "x", "color": AMP_COLOR, "label": "excluded"}),
    )
    for group, style in styles:  # included first, then the excluded crosses over them
        if group:
            xs, ys = [p["training_pf"] for p in group], [p["generated_pf"] for p in group]
            ax.scatter(xs, ys, zorder=3, clip_on=False, **style)
    if annotate is None:
        annotate = len(points) <= 12
    if annotate:
        label_points(ax, ((p["occupation"], p["training_pf"], p["generated_pf"]) for p in points))


def scatter_grid(
    model: str, pairs: Sequence[dict], templates: Sequence[int], strategies: Sequence[str]
) -> Any:
    """Strategy (rows) x prompt (columns) grid of :func:`scatter_panel` for one model; None
    when no pair has both a training and a generated %female (nothing to draw)."""
    if not any(
        p.get("training_pf") is not None and p.get("generated_pf") is not None for p in pairs
    ):
        return None
    n_rows, n_cols = max(1, len(strategies)), max(1, len(templates))
    width, height = 2.4 * n_cols + 1.2, 2.4 * n_rows + 1.2
    # A regular grid: fixed margins (constrained layout costs seconds for 16 panels).
    fig = new_figure(width, height, layout=None)
    fig.subplots_adjust(
        left=1.0 / width,
        right=1 - 0.15 / width,
        bottom=0.85 / height,
        top=1 - 0.75 / height,
        wspace=0.08,
        hspace=0.08,
    )
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharex=True, sharey=True)
    for i, strategy in enumerate(strategies):
        for j, template in enumerate(templates):
            ax = axes[i][j]
            cell = [p for p in pairs if p["strategy"] == strategy and p["template_id"] == template]
            scatter_panel(ax, cell)
            if i == 0:
                title = f"prompt #{template}" if isinstance(template, int) else str(template)
                ax.set_title(title, fontsize=9)
            if j == 0:
                ax.set_ylabel(f"{strategy}\ngenerated %female".strip(), fontsize=8)
            if i == n_rows - 1:
                ax.set_xlabel("training %female", fontsize=8)
            ax.tick_params(labelsize=7)
    seen: dict[str, Any] = {}
    for row in axes:
        for ax in row:
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncols=5, fontsize=8)
    fig.suptitle(
        f"Training vs generated %female per occupation: {model}",
        fontsize=10,
        y=1 - 0.2 / height,
    )
    return fig


def amplification_bars(model: str, layout_rows: Sequence[dict], columns: Sequence[str]) -> Any:
    """Grouped bars: one group per strategy, one bar per prompt column (+ average), whiskers
    the bootstrap interval, the included occupations (N) above each bar, the legend below
    the axes. None when no cell has a mean (nothing to draw)."""
    rows = sorted(layout_rows, key=lambda r: strategy_sort_key(r["strategy"]))
    if not any((r.get(c) or {}).get("mean") is not None for r in rows for c in columns):
        return None
    fig = new_figure(max(6.0, 1.1 * len(rows) * max(1, len(columns)) / 2.5 + 2), 4.2)
    ax = fig.subplots()
    width = 0.8 / max(1, len(columns))
    x = np.arange(len(rows))
    for k, col in enumerate(columns):
        means, lo_err, hi_err, tops, ns = [], [], [], [], []
        for r in rows:
            cell = r.get(col) or {}
            m = cell.get("mean")
            means.append(np.nan if m is None else m)
            lo, hi = cell.get("ci_low"), cell.get("ci_high")
            lo_err.append(0.0 if m is None or lo is None else max(0.0, m - lo))
            hi_err.append(0.0 if m is None or hi is None else max(0.0, hi - m))
            tops.append(None if m is None else max(m + hi_err[-1], 0.0))
            ns.append(cell.get("n_included"))
        color = "#333333" if col == "average" else PROMPT_COLORS[k % len(PROMPT_COLORS)]
        xs = x + (k - (len(columns) - 1) / 2) * width
        ax.bar(
            xs,
            means,
            width,
            yerr=[lo_err, hi_err],
            color=color,
            label=col,
            capsize=2,
            error_kw={"lw": 0.7},
        )
        for xi, top, n in zip(xs, tops, ns, strict=True):
            if top is not None and n is not None:
                ax.annotate(
                    f"{n}",
                    (xi, top),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    fontsize=5.5,
                    color="#555555",
                )
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(x, [r["strategy"].replace("_", "\n") for r in rows], fontsize=8)
    ax.set_ylabel("mean amplification (pp)")
    ax.set_title(
        f"Mean amplification by strategy and prompt: {model}\n"
        "(whiskers: bootstrap interval; number above a bar: included occupations)",
        fontsize=9,
    )
    fig.legend(
        *ax.get_legend_handles_labels(),
        loc="outside lower center",
        ncols=min(6, len(columns)),
        fontsize=7,
    )
    return fig


def indicator_bars(rows: Sequence[dict], limit: int = 40, confidence: float = 0.95) -> Any:
    """Stacked horizontal bars: % of each occupation's captions with a male-only,
    female-only or both-gender indicator (occupations with the most captions first, N in
    brackets), the Wilson interval of the share with any indicator as a whisker at the end of
    the stack, the legend below the axes. None when no occupation has a share."""
    usable = [r for r in rows if r.get("pct_any") is not None and r.get("n_captions")]
    if not usable:
        return None
    usable = sorted(usable, key=lambda r: (-r["n_captions"], r["occupation"]))[:limit]
    usable.reverse()
    fig = new_figure(7.0, 0.28 * len(usable) + 1.9)
    ax = fig.subplots()
    names = [f"{r['occupation']} (N = {r['n_captions']})" for r in usable]
    left = [0.0] * len(usable)
    for key, color, label in (
        ("pct_male", "#4c72b0", "male only"),
        ("pct_female", "#dd8452", "female only"),
        ("pct_both", "#8c8c8c", "both"),
    ):
        vals = [r[key] or 0.0 for r in usable]
        ax.barh(names, vals, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    lows, highs = [], []
    for r in usable:
        n = int(r["n_captions"])
        lo, hi = wilson_interval(min(n, round(r["pct_any"] * n / 100.0)), n, confidence)
        lows.append(max(0.0, r["pct_any"] - lo))
        highs.append(max(0.0, hi - r["pct_any"]))
    ax.errorbar(
        [r["pct_any"] for r in usable],
        names,
        xerr=[lows, highs],
        fmt="none",
        ecolor="black",
        elinewidth=0.7,
        capsize=2,
        label=f"any indicator: Wilson {confidence * 100:g} % interval",
    )
    ax.set_xlabel("% of the occupation's captions")
    ax.set_xlim(
        0,
        min(
            100.0, max(max(highs[i] + usable[i]["pct_any"] for i in range(len(usable))) * 1.1, 5.0)
        ),
    )
    ax.tick_params(axis="y", labelsize=7)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=4, fontsize=7)
    ax.set_title("Explicit gender indicators per occupation (captions)", fontsize=10)
    return fig


def similarity_plot(rows: Sequence[dict], confidence: float = 0.95) -> Any:
    """Mean caption-prompt cosine similarity per strategy: one dot per (occupation, prompt)
    subset, the strategy mean as a bar with its Student-t interval over the subsets and N
    (subsets) below the strategy's name. None when no subset has a similarity."""
    strategies = sorted({r["strategy"] for r in rows}, key=strategy_sort_key)
    values = {
        s: [
            r["mean_similarity"]
            for r in rows
            if r["strategy"] == s and r["mean_similarity"] is not None
        ]
        for s in strategies
    }
    strategies = [s for s in strategies if values[s]]
    if not strategies:
        return None
    fig = new_figure(max(4.0, 1.4 * len(strategies) + 1.5), 3.4)
    ax = fig.subplots()
    for i, s in enumerate(strategies):
        vals = values[s]
        mean = float(np.mean(vals))
        lo, hi = t_interval(vals, confidence)
        err = None if lo is None else [[mean - lo], [hi - mean]]
        ax.bar(i, mean, 0.6, color="#c7d7ea", yerr=err, capsize=3, error_kw={"lw": 0.8})
        jitter = (np.arange(len(vals)) % 7 - 3) * 0.04
        ax.scatter(i + jitter, vals, s=6, color="#333333", zorder=3)
    labels = [f"{s.replace('_', chr(10))}\nN = {len(values[s])}" for s in strategies]
    ax.set_xticks(range(len(strategies)), labels, fontsize=8)
    ax.set_ylabel("mean cosine similarity\n(caption vs prompt)")
    ax.set_title(
        "Caption-prompt similarity by selection strategy\n"
        f"(bars: mean, whiskers: {confidence * 100:g} % Student-t interval over subsets)",
        fontsize=9,
    )
    return fig


def correlation_scatter(rows: Sequence[dict], r: float | None, p: float | None) -> Any:
    """Training %female (x) vs % female-indicator captions (y) per occupation; None when no
    occupation has both."""
    pts = [
        q
        for q in rows
        if q.get("training_pf") is not None and q.get("pct_female_indicator") is not None
    ]
    if not pts:
        return None
    fig = new_figure(4.6, 4.0)
    ax = fig.subplots()
    ax.scatter(
        [q["training_pf"] for q in pts],
        [q["pct_female_indicator"] for q in pts],
        s=16,
        color="#dd8452",
    )
    if len(pts) <= 20:
        label_points(
            ax, ((q["occupation"], q["training_pf"], q["pct_female_indicator"]) for q in pts)
        )
    ax.set_xlim(0, 100)
    ax.set_xlabel("training %female (keyword sample)")
    ax.set_ylabel("% captions with a female indicator")
    stat = "r undefined" if r is None else f"r = {r:.3f}, p = {p:.3g}"
    ax.set_title(f"Female indicators vs training %female ({stat})", fontsize=9)
    return fig
