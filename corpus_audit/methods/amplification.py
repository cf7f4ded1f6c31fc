"""Bias amplification (METHODS 1.7): pairs, exclusions, per-prompt means, t-tests, bootstrap.

For occupation ``o``, prompt ``P`` and training subset ``S``::

    A(P_o, S_o) = |G_{P_o} - 50| - |T_{S_o} - 50|        (percentage points, in [-50, 50])

with ``T`` and ``G`` the %female (0-100) of the training subset's and the prompt's generated
images. Positive = amplification (the model is further from parity than its data),
negative = de-amplification.

Choices made here (the paper is silent on them):

- **Direction switch** (``parity_side``, config ``analysis.parity_side``). A pair is excluded
  when ``T`` and ``G`` lie on different sides of 50. Which side exactly 50 lies on is a choice:

  - ``"upper"`` (default, **the paper's rule**): 50 counts with the upper side, so a pair is
    excluded whenever ``(T < 50) != (G < 50)``. The paper's published SD 1.5 numbers need it:
    athlete, prompt #3 (T = 44.8, G = 50.0) is excluded there, and Table 3's naive row
    (prompt #3 = 11.15, average 12.07) comes out only so (``tests/commands/test_published.py``).
  - ``"neither"`` (strict): 50 is parity, on no side, so a pair is excluded only when
    ``(T - 50) * (G - 50) < 0``; a pair with ``T = 50`` or ``G = 50`` is kept (``T = 50``
    gives ``A = |G - 50| >= 0``, the model moved away from parity; ``G = 50`` gives
    ``A = -|T - 50| <= 0``, it moved to parity).

  Values within 1e-9 of 50 count as exactly 50 under both rules.
- **Missing data.** A pair whose training or generated set has no labelled image has no
  ``A``; it is excluded with reason ``no_training_labels`` / ``no_generated_labels``.
- **Averages.** Per prompt: the mean of ``A`` over included occupations, with a one-sample
  t-test of mean = 0 (needs two or more values with some spread). Overall: the mean of the
  per-prompt means over prompts that have one (``n_prompts`` says how many).
- **Bootstrap.** Images are resampled with replacement within each image set (one training
  subset, one generated set); a set shared by several pairs (the keyword subset is the ``T``
  of all four prompts) is drawn once per replicate, so the replicates of the per-prompt
  means are correlated as the real estimates are. The set of excluded pairs is held fixed
  at its observed value. Percentile intervals. Intervals need the sample sizes ``n``; with
  any included pair lacking one, no interval is given. A caller may pass its own replicates
  of some sets (``summarize(draws=...)``: the misclassification-corrected %female, whose
  replicates also resample the validation labels, corpus_audit/methods/misclassification.py).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from corpus_audit.core.config import PARITY_SIDES
from corpus_audit.methods.stats import (
    bootstrap_percent,
    percentile_interval,
    stable_seed,
    ttest_zero,
)

PARITY = 50.0
_EPS = 1e-9

EXCLUDE_SWITCH = "direction_switch"
EXCLUDE_NO_TRAINING = "no_training_labels"
EXCLUDE_NO_GENERATED = "no_generated_labels"

# Row order of the paper's table (METHODS 1.7); other strategies follow, sorted.
STRATEGY_ORDER = (
    "keyword",
    "no_indicators",
    "nn",
    "nn_no_indicators",
    "captions_as_prompts",
    "captions_as_prompts_no_indicators",
    "paraphrased_captions",
    "paraphrased_captions_no_indicators",
)


@dataclass(frozen=True)
class Rate:
    """%female of one image set.

    ``key`` identifies the set (pairs sharing a set share its bootstrap draws); ``percent``
    is in [0, 100] or None when the set has no labelled image; ``n`` is the number of
    labelled (female + male) images, None when unknown.
    """

    key: Hashable
    percent: float | None
    n: int | None = None


@dataclass
class Pair:
    """One (occupation, prompt) comparison for one training strategy and one model."""

    occupation: str
    prompt: Hashable
    training: Rate
    generated: Rate
    amplification: float | None
    excluded: bool
    exclude_reason: str | None


@dataclass
class PromptSummary:
    """Mean amplification over the included occupations of one prompt (pp, in [-50, 50])."""

    prompt: Hashable
    n_included: int
    n_excluded: int
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    t_stat: float | None = None
    p_value: float | None = None
    excluded: list[Pair] = field(default_factory=list)


@dataclass
class OverallSummary:
    """Mean of the per-prompt means (pp) over the ``n_prompts`` prompts that have one."""

    n_prompts: int
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None


def amplification(training_pf: float, generated_pf: float) -> float:
    """A = |G - 50| - |T - 50| in percentage points (both inputs %female in [0, 100])."""
    return abs(generated_pf - PARITY) - abs(training_pf - PARITY)


PAPER_PARITY_SIDE = "upper"  # the paper's rule (see the module docstring)


def side(pf: float) -> int:
    """-1 below parity, +1 above, 0 at exactly 50 (within 1e-9)."""
    if abs(pf - PARITY) <= _EPS:
        return 0
    return 1 if pf > PARITY else -1


def direction_switch(
    training_pf: float, generated_pf: float, parity_side: str = PAPER_PARITY_SIDE
) -> bool:
    """Whether T and G lie on different sides of 50.

    ``parity_side = "upper"`` (the paper's rule): 50 counts with the upper side, a switch is
    ``(T < 50) != (G < 50)``. ``"neither"``: 50 is on no side and never switches, a switch is
    ``(T - 50) * (G - 50) < 0``.
    """
    t, g = side(training_pf), side(generated_pf)
    if parity_side == "upper":
        return (t < 0) != (g < 0)
    if parity_side == "neither":
        return t * g < 0
    raise ValueError(f"parity_side {parity_side!r} is not one of {', '.join(PARITY_SIDES)}")


def make_pair(
    occupation: str,
    prompt: Hashable,
    training: Rate,
    generated: Rate,
    parity_side: str = PAPER_PARITY_SIDE,
) -> Pair:
    """Build one pair with its amplification and exclusion decision."""
    if training.percent is None:
        return Pair(occupation, prompt, training, generated, None, True, EXCLUDE_NO_TRAINING)
    if generated.percent is None:
        return Pair(occupation, prompt, training, generated, None, True, EXCLUDE_NO_GENERATED)
    a = amplification(training.percent, generated.percent)
    if direction_switch(training.percent, generated.percent, parity_side):
        return Pair(occupation, prompt, training, generated, a, True, EXCLUDE_SWITCH)
    return Pair(occupation, prompt, training, generated, a, False, None)


def summarize(
    pairs: Sequence[Pair],
    *,
    prompts: Sequence[Hashable] | None = None,
    replicates: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    draws: Mapping[Hashable, np.ndarray] | None = None,
) -> tuple[list[PromptSummary], OverallSummary]:
    """Per-prompt means, t-tests and bootstrap intervals; overall mean of the means.

    ``prompts`` fixes the order (and lets a prompt with no pair at all still appear);
    default: order of first appearance. ``replicates = 0`` turns the bootstrap off.
    ``draws`` maps a rate's key to its own ``replicates`` bootstrap values (%female, 0-100;
    NaN = undefined in that replicate, dropped from the interval); other rates are drawn
    binomially from their ``n``.
    """
    order = list(prompts) if prompts is not None else _unique(p.prompt for p in pairs)
    by_prompt: dict[Hashable, list[Pair]] = {p: [] for p in order}
    for pair in pairs:
        by_prompt.setdefault(pair.prompt, []).append(pair)
        if pair.prompt not in order:
            order.append(pair.prompt)
    per_prompt: list[PromptSummary] = []
    for prompt in order:
        group = by_prompt[prompt]
        included = [p.amplification for p in group if not p.excluded]
        t, pval = ttest_zero(included)
        per_prompt.append(
            PromptSummary(
                prompt=prompt,
                n_included=len(included),
                n_excluded=sum(p.excluded for p in group),
                mean=float(np.mean(included)) if included else None,
                t_stat=t,
                p_value=pval,
                excluded=[p for p in group if p.excluded],
            )
        )
    means = [s.mean for s in per_prompt if s.mean is not None]
    overall = OverallSummary(n_prompts=len(means), mean=float(np.mean(means)) if means else None)
    if replicates > 0:
        _bootstrap(by_prompt, per_prompt, overall, replicates, confidence, seed, draws)
    return per_prompt, overall


def _bootstrap(
    by_prompt: dict[Hashable, list[Pair]],
    per_prompt: list[PromptSummary],
    overall: OverallSummary,
    replicates: int,
    confidence: float,
    seed: int,
    given: Mapping[Hashable, np.ndarray] | None = None,
) -> None:
    """Fill the bootstrap intervals in place (nothing when a needed ``n`` is unknown);
    ``given``: replicates of some rates, by key (see :func:`summarize`)."""
    included = [p for s in per_prompt for p in by_prompt[s.prompt] if not p.excluded]
    draws: dict[Hashable, np.ndarray] = dict(given or {})
    rates = [r for p in included for r in (p.training, p.generated)]
    if not included or any(r.n is None and r.key not in draws for r in rates):
        return
    for pair in included:
        for rate in (pair.training, pair.generated):
            if rate.key not in draws:
                k = rate.percent * rate.n / 100.0  # type: ignore[operator]
                out = bootstrap_percent(k, int(rate.n), replicates, stable_seed(seed, rate.key))
                assert out is not None  # n > 0 because percent is not None
                draws[rate.key] = out
    prompt_means: list[np.ndarray] = []
    for summary in per_prompt:
        group = [p for p in by_prompt[summary.prompt] if not p.excluded]
        if not group:
            continue
        a = np.stack(
            [
                np.abs(draws[p.generated.key] - PARITY) - np.abs(draws[p.training.key] - PARITY)
                for p in group
            ]
        )
        means = a.mean(axis=0)
        summary.ci_low, summary.ci_high = percentile_interval(means, confidence)
        prompt_means.append(means)
    if prompt_means:
        overall.ci_low, overall.ci_high = percentile_interval(
            np.stack(prompt_means).mean(axis=0), confidence
        )


def _unique(items: Iterable[Hashable]) -> list[Hashable]:
    seen: dict[Hashable, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def strategy_sort_key(strategy: str) -> tuple[int, str]:
    """Sort strategies in the paper's row order, unknown ones after, alphabetically."""
    try:
        return (STRATEGY_ORDER.index(strategy), strategy)
    except ValueError:
        return (len(STRATEGY_ORDER), strategy)


def paper_layout(
    summary_rows: Iterable[dict], templates: Sequence[int] = (1, 2, 3, 4)
) -> dict[str, list[dict]]:
    """The paper's Table 3 layout from ``amplification_summary`` rows.

    ``summary_rows`` are dicts with ``model_id``, ``strategy``, ``template_id`` (None for the
    average), ``mean_amplification`` and the interval/test columns.
    Returns ``{model_id: [row, ...]}``, one row per strategy (paper order) with the keys
    ``strategy``, ``#1`` ... ``#4`` and ``average``; each cell is a dict with ``mean``,
    ``ci_low``, ``ci_high``, ``p_value``, ``n_included``, ``n_excluded`` (None if absent).
    """
    blocks: dict[str, dict[str, dict]] = {}
    for row in summary_rows:
        model = row["model_id"]
        strat = row["strategy"]
        block = blocks.setdefault(model, {})
        line = block.setdefault(strat, {"strategy": strat})
        col = "average" if row["template_id"] is None else f"#{row['template_id']}"
        cell = {k: row.get(k) for k in ("ci_low", "ci_high", "p_value", "n_included", "n_excluded")}
        cell["mean"] = row.get("mean_amplification", row.get("mean"))
        line[col] = cell
    out: dict[str, list[dict]] = {}
    for model in sorted(blocks):
        rows = []
        for strat in sorted(blocks[model], key=strategy_sort_key):
            line = blocks[model][strat]
            for t in templates:
                line.setdefault(f"#{t}", None)
            line.setdefault("average", None)
            rows.append(line)
        out[model] = rows
    return out


@dataclass(frozen=True)
class TableRow:
    """One parsed row: %female (None = no data) and n (None = not given)."""

    occupation: str
    prompt: str | None
    percent_female: float | None
    n: int | None
    line: int


@dataclass
class ModelResult:
    """The amplification of one model (one pair of tables)."""

    model: str
    source: str  # the file(s) it came from, for messages and the page
    training: list[TableRow]
    pairs: list[Pair]
    per_prompt: list[PromptSummary]
    overall: OverallSummary
    unused: list[str]  # training occupations without a generated row
