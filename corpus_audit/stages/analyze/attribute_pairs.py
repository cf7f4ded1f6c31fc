"""Training vs generated comparisons of perceived attributes (docs/attributes.md).

Each generated model is compared with each training selection strategy, per occupation both
sides hold and pooled over those occupations (``occupation = '*'``): the per-class change
(``attribute_change``), multi-class amplification (``attribute_amplification``) and the
18 cells perceived gender x tone group x age group (``attribute_intersections``). The faces
come from :func:`corpus_audit.stages.analyze.attributes.read_sets`.
"""

from __future__ import annotations

import numpy as np

from corpus_audit.core.catalogue import ATTRIBUTE_RESULTS
from corpus_audit.core.store import Study
from corpus_audit.methods import multiclass as mk
from corpus_audit.methods.age_bins import AGE_GROUPS
from corpus_audit.methods.skin_tone import TONE_GROUPS_UNCALIBRATED
from corpus_audit.methods.stats import z_value
from corpus_audit.stages.analyze import attribute_errors
from corpus_audit.stages.analyze.attribute_cells import corrected_cells
from corpus_audit.stages.analyze.attributes import (
    MAX_REPLICATES,
    POOLED,
    SCALES,
    SUMMARIES,
    Face,
    SetKey,
    counts,
    distribution_rows,
    instruments,
    newcombe,
    official_rows,
    read_sets,
    summary_rows,
)
from corpus_audit.stages.analyze.monk_pairs import monk_pair_rows

GENDERS = ("female", "male")
CELLS = [(g, t, a) for g in GENDERS for t in TONE_GROUPS_UNCALIBRATED for a in AGE_GROUPS]
ORDINAL = ("age_bin", "age_group", "skin_tone", "tone_group")  # EMD over class positions


def pairs(sets: dict[SetKey, list[Face]]) -> list[tuple[str, str, str, list[Face], list[Face]]]:
    """``(model, strategy, occupation, training faces, generated faces)`` for every occupation
    a model and a strategy both hold, then per (model, strategy) the pooled pair over them."""
    training = {(k[1], k[2]): v for k, v in sets.items() if k[0] == "training"}
    generated = {(k[0], k[2]): v for k, v in sets.items() if k[0] != "training"}
    models = sorted({m for m, _ in generated})
    strategies = sorted({s for s, _ in training if s is not None})
    out = []
    for model in models:
        for strategy in strategies:
            common = sorted(
                occ for (s, occ) in training
                if s == strategy and occ != POOLED and (model, occ) in generated
            )  # fmt: skip
            for occ in common:
                out.append((model, strategy, occ, training[strategy, occ], generated[model, occ]))
            if common:
                t = [f for occ in common for f in training[strategy, occ]]
                g = [f for occ in common for f in generated[model, occ]]
                out.append((model, strategy, POOLED, t, g))
    return out


def change_rows(model, strategy, occ, t_faces, g_faces, confidence: float) -> list[dict]:
    """``attribute_change`` rows of one pair (classes of both sides' measured faces)."""
    rows = []
    for attribute, scale in SCALES.items():
        t, g = counts(t_faces, attribute), counts(g_faces, attribute)
        n_t, n_g = int(t.sum()), int(g.sum())
        if not (n_t and n_g):
            continue
        for order, name in enumerate(scale):
            d, lo, hi = newcombe(int(t[order]), n_t, int(g[order]), n_g, confidence)
            rows.append(
                {
                    "attribute": attribute, "model_id": model, "strategy": strategy,
                    "occupation": occ, "class": name, "class_order": order,
                    "training_share": 100.0 * t[order] / n_t,
                    "generated_share": 100.0 * g[order] / n_g,
                    "change": d, "change_low": lo, "change_high": hi,
                }
            )  # fmt: skip
    return rows


def _quantiles(draws: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    draws = draws[~np.isnan(draws)]
    if not draws.size:
        return None, None
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def emd_interval(t: np.ndarray, g: np.ndarray, reps: int, rng, confidence: float) -> tuple:
    """EMD of the two count vectors with a bootstrap percentile interval."""
    n_t, n_g = int(t.sum()), int(g.sum())
    point = mk.emd_ordinal(t / n_t, g / n_g)
    td = rng.multinomial(n_t, t / n_t, size=reps)
    gd = rng.multinomial(n_g, g / n_g, size=reps)
    draws = np.array([mk.emd_ordinal(a, b) for a, b in zip(td, gd, strict=True)])
    return (point, *_quantiles(draws, confidence))


def _mean_shift(t_faces, g_faces, attribute: str, confidence: float) -> tuple:
    """Generated minus training mean of the attribute's continuous value, normal interval."""
    field = SUMMARIES[attribute][0]
    t = np.array([getattr(f, field) for f in t_faces if getattr(f, field) is not None], float)
    g = np.array([getattr(f, field) for f in g_faces if getattr(f, field) is not None], float)
    if t.size < 2 or g.size < 2:
        return None, None, None
    d = float(g.mean() - t.mean())
    half = z_value(confidence) * float(np.sqrt(t.var(ddof=1) / t.size + g.var(ddof=1) / g.size))
    return d, d - half, d + half


def amplification_rows(pair, reps: int, rng, confidence: float) -> list[dict]:
    """``attribute_amplification`` rows of one pair (one per attribute with both sides)."""
    model, strategy, occ, t_faces, g_faces = pair
    rows = []
    for attribute in SCALES:
        t, g = counts(t_faces, attribute), counts(g_faces, attribute)
        if not (t.sum() and g.sum()):
            continue
        a = mk.amplification_k(t, g, reps, rng, confidence)
        emd = emd_interval(t, g, reps, rng, confidence) if attribute in ORDINAL else (None,) * 3
        summary = {"age_bin": "age", "age_group": "age"}.get(attribute, "skin_tone")
        shift = (
            _mean_shift(t_faces, g_faces, summary, confidence)
            if attribute != "gender"
            else (None, None, None)
        )
        entropy = mk.normalised_entropy(g)[1] - mk.normalised_entropy(t)[1]
        rows.append(
            {
                "attribute": attribute, "model_id": model, "strategy": strategy,
                "occupation": occ, "n_training": int(t.sum()), "n_generated": int(g.sum()),
                "a_k": 100 * a.equal_n, "a_k_low": 100 * a.low, "a_k_high": 100 * a.high,
                "a_k_raw": 100 * a.raw, "directional": None, "directional_low": None,
                "directional_high": None, "mean_shift": shift[0], "mean_shift_low": shift[1],
                "mean_shift_high": shift[2], "emd": emd[0], "emd_low": emd[1],
                "emd_high": emd[2], "entropy_change": entropy,
                "calibrated": attribute not in ("skin_tone", "tone_group"),
            }
        )  # fmt: skip
    return rows


def directional(occupation_pairs, attribute: str, reps: int, rng, confidence: float) -> tuple:
    """Directional amplification occupation -> class over the per-occupation pairs of one
    (model, strategy), with a bootstrap interval (each occupation's counts redrawn)."""
    t = np.array([counts(p[3], attribute) for p in occupation_pairs])
    g = np.array([counts(p[4], attribute) for p in occupation_pairs])
    keep = (t.sum(axis=1) > 0) & (g.sum(axis=1) > 0)
    t, g = t[keep], g[keep]
    if len(t) < 2:
        return None, None, None
    point = mk.directional_amplification(t, g)
    draws = np.array(
        [mk.directional_amplification(_redraw(t, rng), _redraw(g, rng)) for _ in range(reps)]
    )
    return (point, *_quantiles(draws, confidence))


def _redraw(c: np.ndarray, rng) -> np.ndarray:
    """Each row of counts redrawn (multinomial at its own n and shares)."""
    n = c.sum(axis=1)
    return np.stack([rng.multinomial(k, row / k) for k, row in zip(n, c, strict=True)])


def _finite(value: float) -> float | None:
    """None for NaN (an undefined test: both shares 0), else the value."""
    return None if np.isnan(value) else float(value)


def _cell_of(face: Face) -> tuple[str, str, str] | None:
    if face.gender not in GENDERS or face.age_group is None or face.l_star is None:
        return None
    return face.gender, face.value("tone_group"), face.age_group  # type: ignore[return-value]


def intersection_rows(pair, confidence: float) -> list[dict]:
    """The 18 cells of one pooled pair, with p-values, BH q-values and the worst cell."""
    model, strategy, occ, t_faces, g_faces = pair
    t_cells = [c for c in map(_cell_of, t_faces) if c is not None]
    g_cells = [c for c in map(_cell_of, g_faces) if c is not None]
    n_t, n_g = len(t_cells), len(g_cells)
    if not (n_t and n_g):
        return []
    rows = []
    for cell in CELLS:
        k_t, k_g = t_cells.count(cell), g_cells.count(cell)
        d, lo, hi = newcombe(k_t, n_t, k_g, n_g, confidence)
        rows.append(
            {
                "model_id": model, "strategy": strategy, "occupation": occ,
                "gender": cell[0], "tone_group": cell[1], "age_group": cell[2],
                "n_training": n_t, "n_generated": n_g,
                "training_share": 100.0 * k_t / n_t, "generated_share": 100.0 * k_g / n_g,
                "change": d, "change_low": lo, "change_high": hi,
                "p_value": _finite(mk.two_proportion_p(k_t, n_t, k_g, n_g)),
                "independence_p": None, "calibrated": False, "training_corrected": None,
                "generated_corrected": None, "change_corrected": None,
                "change_corrected_low": None, "change_corrected_high": None,
                "corrected_note": None,
            }
        )  # fmt: skip
    q = mk.benjamini_hochberg([r["p_value"] for r in rows])
    worst = int(np.argmax([abs(r["change"]) for r in rows]))
    for i, (r, qv) in enumerate(zip(rows, q, strict=True)):
        r["q_value"] = None if np.isnan(qv) else float(qv)
        r["significant"] = bool(r["q_value"] is not None and r["q_value"] < 1 - confidence)
        r["worst"] = i == worst
    return rows


def correct_cells(fix, pair, rows: list[dict], confidence: float, rng) -> None:
    """Fill the product model's corrected shares of one pooled pair's cell rows (in place),
    or their ``corrected_note`` saying why not."""
    model, _strategy, _occ, t_faces, g_faces = pair
    sides = tuple(
        [c for c in map(_cell_of, faces) if c is not None] for faces in (t_faces, g_faces)
    )
    got = corrected_cells(fix, model, sides, TONE_GROUPS_UNCALIBRATED, confidence, rng)
    for i, r in enumerate(rows):
        if isinstance(got, str):
            r["corrected_note"] = got
            continue
        t, g, d, bounds = got
        r["training_corrected"], r["generated_corrected"] = float(t[i]), float(g[i])
        r["change_corrected"] = float(d[i])
        r["change_corrected_low"] = _finite(float(bounds[0, i]))
        r["change_corrected_high"] = _finite(float(bounds[1, i]))


def attribute_tables(
    study: Study, confidence: float, replicates: int, seed: int, classifier: str | None = None
) -> dict:
    """Rows of every attribute table, by table (empty lists when nothing was measured); age
    corrected and skin tone mapped to Monk where annotator labels allow
    (:mod:`~corpus_audit.stages.analyze.attribute_errors`)."""
    rng = np.random.default_rng(seed)
    reps = max(1, min(replicates, MAX_REPLICATES))
    measured = instruments(study)
    sets, minors = read_sets(study, *measured)
    out: dict[str, list[dict]] = {t: [] for t in ATTRIBUTE_RESULTS}
    if not sets:
        return out
    settings = (study.config.analysis.correction_min_validated, reps, seed)
    fix = attribute_errors.learn(study, classifier, measured, SCALES, settings)
    out["attribute_errors"] = fix.rows
    out["attribute_distribution"] += attribute_errors.race_interval(fix.race_rows, confidence)
    for key in sorted(sets, key=lambda k: (k[0], k[1] or "", k[2])):
        rows = distribution_rows(key, sets[key], confidence)
        attribute_errors.correct_rows(fix, rows, confidence, rng)
        colours = [
            (f.l_star, f.hue_deg)
            for f in sets[key]
            if f.l_star is not None and f.hue_deg is not None
        ]
        rows += attribute_errors.monk_rows(fix, key, colours, confidence, rng, reps)
        out["attribute_distribution"] += rows
        out["attribute_summary"] += summary_rows(
            key, sets[key], minors.get(key, 0), confidence, rng
        )
    out["attribute_official"] = official_rows(
        out["attribute_distribution"], out["attribute_summary"]
    )
    by_model: dict[tuple[str, str], list] = {}
    for pair in pairs(sets):
        out["attribute_change"] += change_rows(*pair, confidence)
        amp = amplification_rows(pair, reps, rng, confidence)
        monk_change, monk_amp = monk_pair_rows(fix, pair, reps, rng, confidence, emd_interval)
        out["attribute_change"] += monk_change
        amp += monk_amp
        if pair[2] == POOLED:
            for row in amp:
                if row["attribute"] not in SCALES:  # monk: expected counts, no directional
                    continue
                row["directional"], row["directional_low"], row["directional_high"] = directional(
                    by_model.get(pair[:2], []), row["attribute"], reps, rng, confidence
                )
            cells = intersection_rows(pair, confidence)
            if cells:
                correct_cells(fix, pair, cells, confidence, rng)
            p = fix.independence_p("training", pair[0])
            for cell in cells:
                cell["independence_p"] = p
            out["attribute_intersections"] += cells
        else:
            by_model.setdefault(pair[:2], []).append(pair)
        out["attribute_amplification"] += amp
    return out
