"""Metrics that describe themselves: name, formula, direction, range, unit.

Tables, the CLI and the HTML report take their column labels and explanations from here
(the pattern of HELM's metric metadata), so a number is never shown without saying what
it is and which way is "more biased".
"""

from __future__ import annotations

from dataclasses import dataclass


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
