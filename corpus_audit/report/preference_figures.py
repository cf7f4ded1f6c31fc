"""Figures of METHODS §3 (matplotlib, object API, as in :mod:`corpus_audit.report.figures`).

- :func:`category_bars`: one language, one panel per prompt variant: per occupational
  category, one bar per model = generated %female (female / (female + male)) with its Wilson
  interval, and the official %female as a black bar across the group (the BAFIS layout).
- :func:`rating_intervals`: per aspect, each model's Elo median with its interval over battle
  orders (line), Elo in the given order (dot) and the Bradley-Terry rating (diamond).
- :func:`win_rate_heatmap`: one aspect: share of points (wins + ties / 2) of the row model
  against the column model, with the number of battles in each cell.

Each takes the DataFrame the analysis returns and gives a Figure; :func:`figures.save`
renders it to PNG (and SVG).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from corpus_audit.report.figures import PROMPT_COLORS, new_figure

OFFICIAL_COLOR = "black"


def _err(values: list, lows: list, highs: list) -> list[list[float]]:
    """Asymmetric error bars from values and interval ends (0 where any is missing)."""
    lo = [
        0.0 if v is None or a is None else max(0.0, v - a)
        for v, a in zip(values, lows, strict=True)
    ]
    hi = [
        0.0 if v is None or b is None else max(0.0, b - v)
        for v, b in zip(values, highs, strict=True)
    ]
    return [lo, hi]


def _clean(value: Any) -> float | None:
    return None if value is None or value != value else float(value)  # NaN -> None


def _panels(data: Any) -> list[tuple[Any, str]]:
    """(prompt family, variant) pairs of ``data``, sorted; family None when not given."""
    keys = {
        (f if f == f else None, v) for f, v in zip(data["prompt_set"], data["variant"], strict=True)
    }
    return sorted(keys, key=lambda k: (str(k[0] or ""), k[1]))


def category_bars(rows: Any, language: str) -> Any:
    """Grouped bars of one language, one panel per (prompt family, variant); ``rows`` is the
    :func:`corpus_audit.methods.categories.category_distribution` frame. Whiskers: the Wilson
    interval. None when the language has no %female (nothing to draw)."""
    data = rows[rows["language"] == language] if len(rows) else rows
    if len(data) == 0 or data["percent_female"].notna().sum() == 0:
        return None  # nothing to draw: the caller shows a "no data" line
    panels = _panels(data)
    categories = sorted(data["category"].unique())
    models = sorted(data["model_id"].unique())
    width_in = max(6.0, 0.55 * len(categories) * max(1, len(models)) + 2.0)
    fig = new_figure(width_in, 3.0 * len(panels) + 1.1)
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    x = np.arange(len(categories))
    width = 0.8 / max(1, len(models))
    for ax, (family, variant) in zip(axes, panels, strict=True):
        same = data["prompt_set"].isna() if family is None else data["prompt_set"] == family
        part = data[same & (data["variant"] == variant)]
        for k, model in enumerate(models):
            cell = part[part["model_id"] == model].set_index("category")
            vals = [_clean(cell["percent_female"].get(c)) for c in categories]
            lows = [_clean(cell["ci_low"].get(c)) for c in categories]
            highs = [_clean(cell["ci_high"].get(c)) for c in categories]
            ax.bar(
                x + (k - (len(models) - 1) / 2) * width,
                [np.nan if v is None else v for v in vals],
                width,
                yerr=_err(vals, lows, highs),
                color=PROMPT_COLORS[k % len(PROMPT_COLORS)],
                label=model,
                capsize=2,
                error_kw={"lw": 0.7},
            )
        official = part.drop_duplicates("category").set_index("category")["official_pf"]
        label = "official %female"
        for i, c in enumerate(categories):
            value = _clean(official.get(c))
            if value is not None:
                ax.hlines(value, i - 0.45, i + 0.45, color=OFFICIAL_COLOR, lw=2.2, label=label)
                label = None  # one legend entry
        ax.axhline(50, color="#999999", lw=0.6, ls="--")
        ax.set_ylim(0, 100)
        ax.set_ylabel("%female (Wilson interval)")
        ax.set_title(" · ".join(p for p in (family, variant) if p), fontsize=9)
        ax.set_xticks(x, [c.replace(" & ", " &\n") for c in categories], fontsize=8)
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    fig.legend(
        list(seen.values()),
        list(seen),
        loc="outside lower center",
        ncols=min(6, len(seen) or 1),
        fontsize=7,
    )
    fig.suptitle(
        f"Generated %female per occupational category vs official statistics ({language})",
        fontsize=10,
    )
    return fig


def rating_intervals(
    ratings: Any,
    *,
    panels: Sequence[str] | None = None,
    title: str = "Model ratings from human votes",
) -> Any:
    """One panel per value of ``ratings["aspect"]`` (in ``panels`` order when given, else
    sorted); ``ratings`` is the :func:`corpus_audit.methods.preferences.elo.preference_ratings`
    frame (or a leaderboard's). Models top to bottom in rank order (``rank``, then the
    Bradley-Terry rating, when the frame has them; else the Elo median). The legend stands
    below the panels, outside the data. None when there is no rating (nothing to draw)."""
    if ratings is None or len(ratings) == 0:
        return None
    present = list(ratings["aspect"].unique())
    aspects = [a for a in panels if a in present] if panels else sorted(present)
    n_models = max(1, ratings["model_id"].nunique())
    fig = new_figure(4.2 * max(1, len(aspects)), 0.45 * n_models + 2.0)
    axes = fig.subplots(1, max(1, len(aspects)), squeeze=False)[0]
    for ax, aspect in zip(axes, aspects, strict=False):
        part = ratings[ratings["aspect"] == aspect]
        if "rank" in part and "bt_rating" in part:  # rank 1 at the top: drawn last
            part = part.sort_values(["rank", "bt_rating"], ascending=[False, True])
        else:
            part = part.sort_values("elo_median")
        y = list(range(len(part)))
        med = [_clean(v) for v in part["elo_median"]]
        ax.errorbar(
            med,
            y,
            xerr=_err(
                med,
                [_clean(v) for v in part["elo_ci_low"]],
                [_clean(v) for v in part["elo_ci_high"]],
            ),
            fmt="o",
            color=PROMPT_COLORS[0],
            capsize=3,
            label="Elo median, 95 % interval over shuffled orders",
        )
        ax.scatter(
            part["elo"], y, marker="|", s=80, color="#333333", zorder=3, label="Elo, given order"
        )
        if "bt_rating" in part:
            ax.scatter(
                part["bt_rating"],
                y,
                marker="D",
                s=22,
                color=PROMPT_COLORS[2],
                zorder=3,
                label="Bradley-Terry",
            )
        ax.set_yticks(y, list(part["model_id"]), fontsize=8)
        ax.set_ylim(-0.6, len(part) - 0.4)
        ax.set_xlabel("rating (Elo points)")
        ax.set_title(str(aspect).replace("_", " "), fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=7)
    fig.suptitle(title, fontsize=10)
    return fig


def pair_heatmap(part: Any, value: str, label: str, title: str) -> Any:
    """Row model against column model: ``value`` (a share in [0, 1]; NaN drawn as "–") with
    the battles behind it, one cell per pair that met; ``part`` has ``model_id``,
    ``opponent``, ``value`` and ``battles`` columns. ``label`` names the colour bar. None
    when no pair met (nothing to draw)."""
    if part is None or len(part) == 0:
        return None
    models = sorted(set(part["model_id"]) | set(part["opponent"]))
    index = {m: i for i, m in enumerate(models)}
    grid = np.full((len(models), len(models)), np.nan)
    counts = np.zeros((len(models), len(models)), dtype=int)
    for rec in part.to_dict("records"):
        i, j = index[rec["model_id"]], index[rec["opponent"]]
        if rec[value] is not None and rec[value] == rec[value]:
            grid[i, j] = rec[value]
        counts[i, j] = rec["battles"]
    side = 0.7 * len(models) + 2.4
    fig = new_figure(side + 0.8, side)
    ax = fig.subplots()
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="RdBu")
    for i in range(len(models)):
        for j in range(len(models)):
            if counts[i, j]:
                text = "–" if np.isnan(grid[i, j]) else f"{grid[i, j]:.2f}"
                ax.text(j, i, f"{text}\n({counts[i, j]})", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(models)), models, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_xlabel("opponent")
    ax.set_ylabel("model")
    fig.colorbar(image, ax=ax, label=label)
    ax.set_title(title, fontsize=9)
    return fig


def win_rate_heatmap(pairs: Any, aspect: str) -> Any:
    """Score of the row model against the column model (0-1) with battle counts; ``pairs`` is
    the :func:`corpus_audit.methods.preferences.elo.pair_matrix` frame."""
    return pair_heatmap(
        pairs[pairs["aspect"] == aspect],
        "score",
        "score (wins + ties/2) / battles",
        f"Pairwise score: {aspect.replace('_', ' ')}",
    )
