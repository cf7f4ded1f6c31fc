"""%female corrected for the perceived-gender classifier's own errors (docs/analysis.md).

The classifier labels an image ``female``, ``male`` or ``ambiguous``. Human validation labels
(the annotators' majority, ``male`` or ``female``, taken as the truth) give its error rates
within one image source (the training photos, or one generated model's images)::

    sens = P(female | woman)    spec = P(male | man)
    u_f  = P(ambiguous | woman) u_m  = P(ambiguous | man)     (all in [0, 1])

The measured %female ``q`` is over the images labelled female or male (``ambiguous`` ones are
left out, as in the uncorrected %female). With ``b_m = P(female | man) = 1 - spec - u_m`` the
true share of women ``p`` solves ``q = p sens / (p (1 - u_f) + (1 - p)(1 - u_m)) ...``, i.e.::

    p = (q (1 - u_m) - b_m) / (sens - b_m + q (u_f - u_m))

which, with no ``ambiguous`` labels (``u_f = u_m = 0``), is the Rogan-Gladen estimator
``(q + spec - 1) / (sens + spec - 1)`` (Rogan & Gladen 1978). ``p`` is clipped to [0, 1];
it is undefined (NaN) where the denominator is not positive (a classifier no better than
chance on the binary labels).

**Sampling weights.** ``validate export`` draws its sample stratified by the classifier's
label, equal shares per stratum, so the validated images over-represent rare labels. Error
rates conditional on the *true* gender are therefore computed with inverse-probability
weights: each validated image of stratum ``s`` (one source and classifier label) weighs
``N_s / n_s`` (labelled images of the stratum / validated ones). Intervals of a weighted rate
are Wilson intervals at Kish's effective sample size ``(sum w)^2 / sum w^2``.

**Bootstrap.** :func:`bootstrap_cells` resamples the validated images with replacement within
each stratum (a multinomial draw of the stratum's cell counts, the same distribution); the
caller combines each replicate's error rates with a replicate of the measured set
(:func:`corpus_audit.methods.stats.bootstrap_percent`), so intervals carry both uncertainties.

Everything is vectorised: arrays may carry leading replicate dimensions. Percentages are on
the 0-100 scale where named ``percent``; shares and rates are in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from corpus_audit.methods.stats import wilson_interval

TRUTH = ("female", "male")  # axis 1 of a cells array (human majority)
PREDICTED = ("female", "male", "ambiguous")  # axis 2 (classifier label)
RATE_NAMES = ("sensitivity", "specificity", "ambiguous_female", "ambiguous_male")


@dataclass(frozen=True)
class ErrorRates:
    """The classifier's error rates within one source (floats, or arrays of replicates).

    ``sensitivity`` = P(female | woman), ``specificity`` = P(male | man),
    ``ambiguous_female`` = P(ambiguous | woman), ``ambiguous_male`` = P(ambiguous | man);
    all in [0, 1] (NaN where a true gender has no validated image).
    """

    sensitivity: np.ndarray | float
    specificity: np.ndarray | float
    ambiguous_female: np.ndarray | float
    ambiguous_male: np.ndarray | float

    @property
    def false_female(self) -> np.ndarray | float:
        """P(female | man) = 1 - specificity - ambiguous_male."""
        return 1.0 - self.specificity - self.ambiguous_male


@dataclass(frozen=True)
class Validation:
    """The validated images of one source (or of all sources pooled), by stratum.

    ``cells[s, t, p]`` counts the validated images of stratum ``s`` whose human majority is
    ``TRUTH[t]`` and whose classifier label is ``PREDICTED[p]``; ``weights[s]`` is the
    stratum's sampling weight ``N_s / n_s`` (1 for a simple random sample).
    """

    cells: np.ndarray  # (S, 2, 3) counts
    weights: np.ndarray  # (S,) > 0

    @property
    def n(self) -> int:
        """Validated images (human majority female or male)."""
        return int(self.cells.sum())

    @property
    def n_female(self) -> int:
        return int(self.cells[:, 0, :].sum())

    @property
    def n_male(self) -> int:
        return int(self.cells[:, 1, :].sum())


def validation(
    truth: Sequence[str],
    predicted: Sequence[str],
    strata: Sequence[object],
    stratum_sizes: dict[object, int] | None = None,
) -> Validation:
    """Build a :class:`Validation` from per-image labels.

    ``truth``: the human majority (female | male); ``predicted``: the classifier's label
    (female | male | ambiguous); ``strata``: each image's stratum; ``stratum_sizes``: labelled
    images per stratum (the population the sample was drawn from; None = weights 1). A stratum
    missing from ``stratum_sizes`` weighs 1.
    """
    if not len(truth) == len(predicted) == len(strata):
        raise ValueError("validation: truth, predicted and strata differ in length")
    names = sorted({*strata}, key=repr)
    index = {s: i for i, s in enumerate(names)}
    cells = np.zeros((len(names), 2, 3), dtype=np.int64)
    for t, p, s in zip(truth, predicted, strata, strict=True):
        cells[index[s], TRUTH.index(t), PREDICTED.index(p)] += 1
    sampled = cells.sum(axis=(1, 2))
    sizes = stratum_sizes or {}
    weights = np.array(
        [max(sizes.get(s, n), n) / n if n else 1.0 for s, n in zip(names, sampled, strict=True)],
        dtype=float,
    )
    return Validation(cells, weights)


def pool(parts: Sequence[Validation]) -> Validation:
    """The validations of several sources as one (their strata side by side)."""
    if not parts:
        return Validation(np.zeros((0, 2, 3), dtype=np.int64), np.zeros(0))
    return Validation(
        np.concatenate([p.cells for p in parts]), np.concatenate([p.weights for p in parts])
    )


def _weighted(cells: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted (..., 2, 3) matrix of cells (..., S, 2, 3) with weights (S,)."""
    return np.einsum("...stp,s->...tp", cells, weights)


def error_rates(cells: np.ndarray, weights: np.ndarray) -> ErrorRates:
    """Weighted error rates of ``cells`` (..., S, 2, 3) (leading dims: replicates)."""
    w = _weighted(np.asarray(cells, dtype=float), np.asarray(weights, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        female = w[..., 0, :] / w[..., 0, :].sum(axis=-1, keepdims=True)
        male = w[..., 1, :] / w[..., 1, :].sum(axis=-1, keepdims=True)
    return ErrorRates(
        sensitivity=female[..., 0],
        specificity=male[..., 1],
        ambiguous_female=female[..., 2],
        ambiguous_male=male[..., 2],
    )


@dataclass(frozen=True)
class RateEstimate:
    """One error rate with its Wilson interval (all in [0, 1]) and the images behind it."""

    name: str  # one of RATE_NAMES
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int  # validated images of the true gender the rate conditions on
    n_effective: float  # Kish's effective sample size under the sampling weights


def rate_estimates(v: Validation, confidence: float = 0.95) -> list[RateEstimate]:
    """The four error rates of ``v`` with Wilson intervals at Kish's effective n."""
    out = []
    spec = (("sensitivity", 0, 0), ("specificity", 1, 1))
    spec += (("ambiguous_female", 0, 2), ("ambiguous_male", 1, 2))
    for name, t, p in spec:
        per_image_w = np.repeat(v.weights, v.cells[:, t, :].sum(axis=1))
        n = int(per_image_w.size)
        if n == 0:
            out.append(RateEstimate(name, None, None, None, 0, 0.0))
            continue
        total = float(per_image_w.sum())
        value = float((v.cells[:, t, p] * v.weights).sum()) / total
        n_eff = total**2 / float((per_image_w**2).sum())
        k = min(max(value, 0.0), 1.0) * n_eff  # value 1 gives k == n exactly
        lo, hi = wilson_interval(k, n_eff, confidence)  # type: ignore[arg-type]
        out.append(RateEstimate(name, value, lo / 100.0, hi / 100.0, n, n_eff))  # type: ignore[operator]
    return out


def corrected_share(q: np.ndarray | float, rates: ErrorRates) -> np.ndarray:
    """True share of women (in [0, 1], NaN where undefined) from the measured share ``q`` of
    female among female/male labels (in [0, 1]); broadcasts over replicates."""
    q = np.asarray(q, dtype=float)
    sens = np.asarray(rates.sensitivity, dtype=float)
    u_f = np.asarray(rates.ambiguous_female, dtype=float)
    u_m = np.asarray(rates.ambiguous_male, dtype=float)
    b_m = np.asarray(rates.false_female, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = sens - b_m + q * (u_f - u_m)
        p = (q * (1.0 - u_m) - b_m) / den
    p = np.where(den > 1e-12, p, np.nan)
    return np.clip(p, 0.0, 1.0)


def corrected_percent(percent: float | None, rates: ErrorRates) -> float | None:
    """Corrected %female (0-100) of a measured %female (0-100); None where undefined."""
    if percent is None:
        return None
    value = float(corrected_share(percent / 100.0, rates))
    return None if np.isnan(value) else 100.0 * value


def bootstrap_cells(v: Validation, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Replicates (replicates, S, 2, 3) of ``v.cells``: the validated images resampled with
    replacement within each stratum (a multinomial draw of the stratum's cells)."""
    flat = v.cells.reshape(v.cells.shape[0], 6)
    out = np.zeros((replicates, *flat.shape), dtype=np.int64)
    for s, row in enumerate(flat):
        n = int(row.sum())
        if n:
            out[:, s, :] = rng.multinomial(n, row / n, size=replicates)
    return out.reshape(replicates, *v.cells.shape)


def bootstrap_rates(v: Validation, replicates: int, seed: int) -> ErrorRates:
    """Bootstrap replicates of the error rates of ``v`` (arrays of ``replicates``)."""
    rng = np.random.default_rng(seed)
    return error_rates(bootstrap_cells(v, replicates, rng), v.weights)


def corrected_draws(percent_draws: np.ndarray, rate_draws: ErrorRates) -> np.ndarray:
    """Replicates of the corrected %female (0-100, NaN where undefined) from replicates of
    the measured %female (0-100) and of the error rates (same length, paired)."""
    return 100.0 * corrected_share(np.asarray(percent_draws) / 100.0, rate_draws)


def why_not(v: Validation, min_validated: int) -> str | None:
    """Why ``v`` cannot correct (a short reason), or None when it can."""
    if v.n == 0:
        return "no validation labels"
    if v.n < min_validated:
        return f"{v.n} validated images, fewer than {min_validated}"
    if v.n_female == 0 or v.n_male == 0:
        return "no validated " + ("women" if v.n_female == 0 else "men")
    r = error_rates(v.cells, v.weights)
    if not float(r.sensitivity) - float(r.false_female) > 1e-12:
        return "classifier no better than chance on the validated images"
    return None
