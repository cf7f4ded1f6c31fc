"""Training -> generated change and amplification on the Monk scale, for a model and a
training side that are both calibrated (docs/attributes.md, "Correcting for the instrument's
errors").

Each face's calibrated probabilities of Monk 1-10 (its source's mapping,
:mod:`~corpus_audit.stages.analyze.attribute_errors`) are summed into expected counts, rounded
to whole faces by largest remainder (so every share is within 1/n of the expected one), and
these counts go through the same change (Newcombe), ``A_K`` at equal n, earth mover's distance
and entropy as the other attributes. The mean shift is the difference of the mean expected
tone (1-10) with a normal interval. The calibrations are taken as fixed: their fit's own
uncertainty is not in the intervals.
"""

from __future__ import annotations

import numpy as np

from corpus_audit.methods import multiclass as mk
from corpus_audit.methods.stats import z_value
from corpus_audit.stages.analyze.attribute_errors import (
    MONK,
    MONK_CLASSES,
    TRAINING,
    AttributeCorrection,
)
from corpus_audit.stages.analyze.attributes import Face, newcombe


def _probs(fix: AttributeCorrection, source: str, faces: list[Face]) -> np.ndarray | None:
    """``(n, 10)`` calibrated probabilities of the faces with a measured colour, or None."""
    calibration = fix.calibrations.get(source)
    colours = [
        (f.l_star, f.hue_deg) for f in faces if f.l_star is not None and f.hue_deg is not None
    ]
    if calibration is None or not colours:
        return None
    l_star, hue = (np.array(c, dtype=float) for c in zip(*colours, strict=True))
    return calibration.predict_proba(l_star, hue)


def whole_counts(probs: np.ndarray) -> np.ndarray:
    """Expected counts (column sums) rounded to integers summing to the number of faces, by
    largest remainder."""
    expected = probs.sum(axis=0)
    counts = np.floor(expected).astype(int)
    short = len(probs) - int(counts.sum())
    if short > 0:
        counts[np.argsort(-(expected - counts), kind="stable")[:short]] += 1
    return counts


def _mean_shift(t_probs: np.ndarray, g_probs: np.ndarray, confidence: float) -> tuple:
    tones = np.arange(1, len(MONK_CLASSES) + 1)
    t, g = t_probs @ tones, g_probs @ tones  # each face's expected tone
    if t.size < 2 or g.size < 2:
        return None, None, None
    d = float(g.mean() - t.mean())
    half = z_value(confidence) * float(np.sqrt(t.var(ddof=1) / t.size + g.var(ddof=1) / g.size))
    return d, d - half, d + half


def monk_pair_rows(
    fix: AttributeCorrection, pair, reps: int, rng, confidence: float, emd_interval
) -> tuple[list[dict], list[dict]]:
    """(``attribute_change`` rows, ``attribute_amplification`` rows) of one pair on the Monk
    scale; empty when either side's source is not calibrated. ``emd_interval(t, g, reps, rng,
    confidence)``: the earth mover's distance with its interval, as for the other attributes."""
    model, strategy, occ, t_faces, g_faces = pair
    t_probs, g_probs = _probs(fix, TRAINING, t_faces), _probs(fix, model, g_faces)
    if t_probs is None or g_probs is None:
        return [], []
    t, g = whole_counts(t_probs), whole_counts(g_probs)
    n_t, n_g = int(t.sum()), int(g.sum())
    change = []
    for k, name in enumerate(MONK_CLASSES):
        d, lo, hi = newcombe(int(t[k]), n_t, int(g[k]), n_g, confidence)
        change.append(
            {
                "attribute": MONK, "model_id": model, "strategy": strategy, "occupation": occ,
                "class": name, "class_order": k, "training_share": 100.0 * t[k] / n_t,
                "generated_share": 100.0 * g[k] / n_g, "change": d, "change_low": lo,
                "change_high": hi,
            }
        )  # fmt: skip
    a = mk.amplification_k(t, g, reps, rng, confidence)
    emd, emd_lo, emd_hi = emd_interval(t, g, reps, rng, confidence)
    shift = _mean_shift(t_probs, g_probs, confidence)
    amp = {
        "attribute": MONK, "model_id": model, "strategy": strategy, "occupation": occ,
        "n_training": n_t, "n_generated": n_g, "a_k": 100 * a.equal_n, "a_k_low": 100 * a.low,
        "a_k_high": 100 * a.high, "a_k_raw": 100 * a.raw, "directional": None,
        "directional_low": None, "directional_high": None, "mean_shift": shift[0],
        "mean_shift_low": shift[1], "mean_shift_high": shift[2], "emd": emd,
        "emd_low": emd_lo, "emd_high": emd_hi,
        "entropy_change": mk.normalised_entropy(g)[1] - mk.normalised_entropy(t)[1],
        "calibrated": True,
    }  # fmt: skip
    return change, [amp]
