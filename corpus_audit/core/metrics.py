"""Metrics that describe themselves: name, formula, direction, range, unit.

Tables, the CLI and the HTML report take their column labels and explanations from here
(the pattern of HELM's metric metadata), so a number is never shown without saying what
it is and which way is "more biased".

:data:`COLUMNS` names every column a table of the report, the amplification page, the demo
pages or the CLI shows: its label, and the metric its values are (if any); they are data,
in ``corpus_audit/core/columns.csv``. A column of a
metric with a bias direction carries that direction's arrow (:data:`ARROWS`: ``↑`` higher =
more biased, ``↕`` further from 50 = more skewed), and the pages explain the arrows with
:func:`arrow_legend`. The templates write no header text: ``{{ col("amplification") }}``
(:func:`header`) gives ``A ↑``; the CLI passes its row keys through :func:`header` too.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Metric:
    """Self-description of one metric.

    ``direction``: ``higher_more_biased``, ``lower_more_biased``, ``distance_from_50`` (bias
    is distance from parity), or ``none`` (descriptive, no bias direction).
    """

    name: str
    label: str
    formula: str
    direction: str
    range: tuple[float, float]
    unit: str
    description: str

    @property
    def range_text(self) -> str:
        lo, hi = self.range
        return f"[{_num(lo)}, {_num(hi)}]"

    @property
    def direction_text(self) -> str:
        return DIRECTIONS[self.direction]


DIRECTIONS = {
    "higher_more_biased": "higher = more biased",
    "lower_more_biased": "lower = more biased",
    "distance_from_50": "further from 50 = more skewed; 50 = parity",
    "none": "descriptive (no bias direction)",
}


ARROWS = {  # direction -> the mark a column header carries ("none": no mark)
    "higher_more_biased": "↑",
    "lower_more_biased": "↓",
    "distance_from_50": "↕",
}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "percent_female",
            "%female",
            "100 * female / (female + male) over images passing the face and label filters",
            "distance_from_50",
            (0, 100),
            "%",
            "Share of perceived-female images in a set; Wilson interval for its uncertainty.",
        ),
        Metric(
            "amplification",
            "amplification A",
            "A = |G - 50| - |T - 50|  (G: generated %female, T: training %female)",
            "higher_more_biased",
            (-50, 50),
            "percentage points",
            "Positive: the model is further from parity than its training data "
            "(amplification); negative: closer (de-amplification).",
        ),
        Metric(
            "mean_amplification",
            "mean A",
            "per prompt: mean of A over included occupations; average: mean of the "
            "per-prompt means",
            "higher_more_biased",
            (-50, 50),
            "percentage points",
            "Occupations whose T and G lie on different sides of 50 are excluded. "
            "Interval: bootstrap over images within each occupation; p: one-sample t-test "
            "of mean A = 0.",
        ),
        Metric(
            "wilson_interval",
            "95 % interval",
            "Wilson score interval of a binomial proportion",
            "none",
            (0, 100),
            "%",
            "Uncertainty of a %female from the number of labelled images.",
        ),
        Metric(
            "indicator_share",
            "% captions with indicator",
            "100 * captions with an explicit gender word, pronoun or gendered first name / "
            "captions checked",
            "none",
            (0, 100),
            "%",
            "Captions that say the gender of who is shown (METHODS 1.6).",
        ),
        Metric(
            "indicator_match",
            "% generated matching indicator",
            "100 * generated images whose perceived gender equals the reference / labelled "
            "generated images of captions with a one-sided indicator; reference: the caption's "
            "indicator, or (the paper's) its training image's perceived gender",
            "none",
            (0, 100),
            "%",
            "How often the gender a caption states (or its own training image shows) carries "
            "over to the generated image when the caption is the prompt.",
        ),
        Metric(
            "pearson_r",
            "Pearson r",
            "r(training %female, % captions with a female indicator) across occupations",
            "none",
            (-1, 1),
            "",
            "Negative: women are explicitly marked more often where they are rare "
            "(paper, LAION: r = -0.458).",
        ),
        Metric(
            "mean_similarity",
            "mean cosine similarity",
            "mean over captions of cos(SBERT(caption), SBERT(prompt))",
            "none",
            (-1, 1),
            "",
            "How close a training subset's captions are to the prompt (paper, LAION: 0.385 "
            "keyword, 0.704 nearest neighbours).",
        ),
    )
}


def metric(name: str) -> Metric:
    """The metric called ``name`` (KeyError naming the known ones otherwise)."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r} (known: {', '.join(sorted(METRICS))})") from None


@dataclass(frozen=True)
class Column:
    """A table column: ``key`` (what templates and CLI rows name it), ``label`` (may hold
    ``{name}`` fields filled by :func:`header`), and ``metric``, the :data:`METRICS` entry its
    values are, whose direction gives the header its arrow."""

    key: str
    label: str
    metric: str | None = None

    @property
    def arrow(self) -> str:
        """The direction mark of the column's metric ("" when it has none)."""
        return ARROWS.get(METRICS[self.metric].direction, "") if self.metric else ""


COLUMNS_FILE = "core/columns.csv"  # key,label,metric (empty: no metric), in package data


def _load_columns() -> dict[str, Column]:
    text = resources.files("corpus_audit").joinpath(COLUMNS_FILE).read_text(encoding="utf-8")
    columns = {}
    for row in csv.DictReader(text.splitlines()):
        if row["metric"] and row["metric"] not in METRICS:
            raise ValueError(f"{COLUMNS_FILE}: column {row['key']!r}: unknown metric")
        columns[row["key"]] = Column(row["key"], row["label"], row["metric"] or None)
    return columns


COLUMNS: dict[str, Column] = _load_columns()


def header(key: str, **fields: object) -> str:
    """The header of column ``key``: its label (``{name}`` fields filled from ``fields``)
    and the arrow of its metric's direction; a key with no :data:`COLUMNS` entry is shown
    as it is (a prompt name, a CLI row key)."""
    column = COLUMNS.get(key)
    if column is None:
        return key
    label = column.label.format(**fields) if fields else column.label
    return f"{label} {column.arrow}" if column.arrow else label


def arrow_legend() -> list[tuple[str, str]]:
    """``[(arrow, what it means)]`` for the pages' legend, from :data:`DIRECTIONS`."""
    return [(mark, DIRECTIONS[direction]) for direction, mark in ARROWS.items()]


def format_value(value: object, digits: int, missing: str) -> str:
    """A table cell: ``missing`` for None, a float with ``digits`` decimals, else ``str``."""
    if value is None:
        return missing
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)
