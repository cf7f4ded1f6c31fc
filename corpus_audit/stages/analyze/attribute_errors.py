"""Perceived age corrected for the age model's errors, and skin tone mapped to Monk 1-10,
both learnt from the annotators' answers (docs/attributes.md, "Correcting for the
instrument's errors").

Reads the validated faces (``sql/analyze/attribute_validated.sql``: the annotators' majority
age band and median Monk tone beside what the instruments measured) and, per image source
(``training`` or a generated model's id):

- **Age** (``age_bin``: the six adult bands; ``age_group``: under_35 / 35_54 / 55_plus): the
  weighted misclassification matrix ``P(model's band | annotators' band)`` (weights N_s / n_s of
  the validation strata, as for gender; a face the model reads as under 16 falls in an extra,
  uncounted column) and its stratified bootstrap replicates
  (:func:`corpus_audit.methods.multiclass.bootstrap_confusion`). A set's corrected shares are
  :func:`~corpus_audit.methods.multiclass.corrected_shares` of its measured shares; their
  interval combines a multinomial replicate of the set with a replicate of the matrix.
  Faces the annotators read as under 16 are left out, as minors are everywhere. Not applied
  (``attribute_errors.reason`` says why) below ``analysis.correction_min_validated`` validated
  faces or while a band has no validated face.
- **Race or ethnicity** (only when the study asked it, ``validate export --race``): no
  classifier measures it; each source's distribution is the annotators' majority answers on
  its validation sample, weighted to its labelled images (``race`` rows, occupation ``*``).
- **Skin tone**: the per-source cumulative-logit mapping (L*, hue) -> Monk 1-10
  (:mod:`corpus_audit.methods.monk_calibration`) fitted on the validated faces' median Monk
  tone. With it a set gets ``monk`` rows: each tone's share is the mean of its faces' calibrated
  probabilities (count: their sum, rounded), the interval a bootstrap over the set's faces (the
  fit's own uncertainty is not in it: ``note`` says so).

Writes ``attribute_errors`` rows (one per attribute and source, learnt or not) and fills the
``corrected_*`` columns and ``note`` of ``attribute_distribution``; needs the temp table
``analysis_labelled``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods import monk_calibration as monk
from corpus_audit.methods import multiclass as mk
from corpus_audit.methods.age_bins import GROUP_OF_BIN, MINOR_BIN
from corpus_audit.methods.lexicon.bls_cps import RACE_COLUMNS
from corpus_audit.methods.skin_tone import TONE_GROUPS_UNCALIBRATED, tone_group_uncalibrated
from corpus_audit.methods.stats import percentile_interval, stable_seed
from corpus_audit.stages.analyze.strata import prepare_strata, strata_sizes

AGE_ATTRIBUTES = ("age_bin", "age_group")
MONK = "monk"
MONK_CLASSES = tuple(f"monk_{k}" for k in range(1, monk.N_TONES + 1))
MONK_NOTE = (
    "Monk tones from this source's calibration on annotator labels; the interval is over the "
    "set's faces (the calibration fit's own uncertainty is not included)"
)
TRAINING = "training"
GENDER = "gender"
GENDERS = ("female", "male")
GENDER_OUTCOMES = ("female", "male", "ambiguous")
TONE_GROUP_MIN = 10  # validated faces of both genders a tone group needs for its own rates
RACE = "race"
RACE_CLASSES = (*RACE_COLUMNS, "other")  # the sheet's answers (validate --race), BLS's groups
RACE_NOTE = (
    "perceived race or ethnicity as the annotators answered it on the validation sample "
    "(opt-in; no classifier), weighted to the source's labelled images; all occupations"
)


@dataclass
class AttributeCorrection:
    """What the validated faces taught, per (attribute, source): error matrices and their
    replicates (applied ones only), why the others are not applied, the Monk calibrations,
    and the ``attribute_errors`` rows."""

    matrices: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    draws: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)
    calibrations: dict[str, monk.MonkCalibration] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    race_rows: list[dict] = field(default_factory=list)  # attribute_distribution rows
    independence: dict[str, float] = field(default_factory=dict)  # source -> p (Bonferroni)

    def independence_p(self, *sources: str) -> float | None:
        """The product model's test over ``sources`` (Bonferroni: the smallest p times the
        number of sources tested, at most 1); None when none could be tested."""
        ps = [self.independence[s] for s in sources if s in self.independence]
        return min(1.0, min(ps) * len(ps)) if ps else None


def _source(row: dict) -> str:
    return TRAINING if row["side"] == TRAINING else (row["model_id"] or "unknown")


def _age_class(band: str | None, attribute: str) -> str | None:
    if band is None or band == MINOR_BIN:
        return band
    return band if attribute == "age_bin" else GROUP_OF_BIN[band]


def _weights(rows: list[dict], sizes: dict[tuple, int]) -> np.ndarray:
    """N_s / n_s per validated face (1 where the stratum's population is unknown)."""
    strata = [(r["side"], r["model_id"], r["stratum_label"]) for r in rows]
    drawn: dict[tuple, int] = defaultdict(int)
    for s in strata:
        drawn[s] += 1
    return np.array([sizes.get(s, drawn[s]) / drawn[s] for s in strata], dtype=float)


def learn_age(
    rows: list[dict],
    sizes: dict[tuple, int],
    attribute: str,
    scale: tuple[str, ...],
    min_validated: int,
    replicates: int,
    seed: int,
) -> tuple[np.ndarray | None, np.ndarray | None, str | None, int]:
    """(matrix (K, K+1), its replicates, why not applied, faces used) for one source and one
    age attribute; the last column is "read as under 16" (not counted)."""
    used = [
        r
        for r in rows
        if r["human_age_bin"] not in (None, MINOR_BIN) and r["predicted_age_bin"] is not None
    ]
    n = len(used)
    if n < min_validated:
        return None, None, f"{n} validated faces with an age band; at least {min_validated}", n
    index = {c: i for i, c in enumerate(scale)}
    k = len(scale)
    truth = [index[_age_class(r["human_age_bin"], attribute)] for r in used]
    pred = [
        index.get(_age_class(r["predicted_age_bin"], attribute), k)  # under 16: column K
        for r in used
    ]
    weights = _weights(used, sizes)
    matrix = mk.confusion(truth, pred, k, k + 1, weights)
    missing = [scale[i] for i in range(k) if np.isnan(matrix[i]).any()]
    if missing:
        return matrix, None, f"no validated face the annotators put in {', '.join(missing)}", n
    strata = [(r["side"], r["model_id"], r["stratum_label"]) for r in used]
    rng = np.random.default_rng(stable_seed(seed, "attribute_errors", attribute))
    draws = mk.bootstrap_confusion(truth, pred, strata, k, k + 1, weights, replicates, rng)
    return matrix, draws, None, n


def learn_monk(rows: list[dict]) -> tuple[monk.MonkCalibration | None, str | None, int]:
    """The source's Monk calibration (None and why when refused) and the labels it used."""
    used = [r for r in rows if r["human_monk"] is not None and r["l_star"] is not None]
    l_star = np.array([r["l_star"] for r in used], dtype=float)
    hue = np.array([r["hue_deg"] if r["hue_deg"] is not None else np.nan for r in used])
    tones = np.array([r["human_monk"] for r in used], dtype=float)
    try:
        return monk.fit(l_star, hue, tones), None, len(used)
    except monk.CalibrationRefused as exc:
        return None, str(exc), len(used)


def learn(
    study: Study,
    classifier: str | None,
    instruments: tuple[str | None, str | None],
    scales: dict[str, tuple[str, ...]],
    settings: tuple[int, int, int],
) -> AttributeCorrection:
    """Everything the validated faces teach (needs ``analysis_labelled``). ``instruments``:
    (age model, skin method); ``settings``: (min validated, replicates, seed)."""
    min_validated, replicates, seed = settings
    age_model, skin_method = instruments
    fix = AttributeCorrection()
    if not study.table_exists("human_labels"):
        return fix
    by = prepare_strata(study)
    rows = dicts(
        study.sql(
            "analyze/attribute_validated",
            classifier=classifier or "",
            age_model=age_model,
            skin_method=skin_method,
            by_attributes=by,
        )
    )
    sizes = strata_sizes(study, classifier, by)
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_source[_source(r)].append(r)
    for source in sorted(by_source):
        part = by_source[source]
        for attribute in AGE_ATTRIBUTES if age_model else ():
            matrix, draws, reason, n = learn_age(
                part, sizes, attribute, scales[attribute], min_validated, replicates, seed
            )
            _record(fix, attribute, source, n, matrix, draws, reason)
        if skin_method:
            calibration, reason, n = learn_monk(part)
            if calibration is not None:
                fix.calibrations[source] = calibration
            _record(fix, MONK, source, n, None, None, reason)
        matrix, draws, reason, n = learn_gender(part, sizes, min_validated, replicates, seed)
        if n:
            _record(fix, GENDER, source, n, matrix, draws, reason)
        if skin_method:
            fix.rows += gender_by_tone(source, part, sizes)
        p = independence(part, fix.calibrations.get(source))
        if p is not None:
            fix.independence[source] = p
        fix.race_rows += race_rows(source, part, sizes, replicates, seed)
    return fix


def learn_gender(
    rows: list[dict], sizes: dict[tuple, int], min_validated: int, replicates: int, seed: int
) -> tuple[np.ndarray | None, np.ndarray | None, str | None, int]:
    """(matrix (2, 3) of P(label | annotators' gender) over female, male, ambiguous, its
    replicates, why not applied, faces used) for one source, all tone groups: the gender
    part of the product model (the same validated faces and weights as the age matrices)."""
    used = [
        r for r in rows if r["human_gender"] in GENDERS and r["predicted_gender"] in GENDER_OUTCOMES
    ]
    n = len(used)
    if n < min_validated:
        return None, None, f"{n} validated faces with a gender; at least {min_validated}", n
    truth = [GENDERS.index(r["human_gender"]) for r in used]
    pred = [GENDER_OUTCOMES.index(r["predicted_gender"]) for r in used]
    weights = _weights(used, sizes)
    matrix = mk.confusion(truth, pred, 2, 3, weights)
    if np.isnan(matrix).any():
        return matrix, None, "no validated " + ("women" if 0 not in truth else "men"), n
    strata = [(r["side"], r["model_id"], r["stratum_label"]) for r in used]
    rng = np.random.default_rng(stable_seed(seed, "attribute_errors", GENDER))
    draws = mk.bootstrap_confusion(truth, pred, strata, 2, 3, weights, replicates, rng)
    return matrix, draws, None, n


def gender_by_tone(source: str, rows: list[dict], sizes: dict[tuple, int]) -> list[dict]:
    """``attribute_errors`` rows of the gender classifier's error rates per skin-tone group
    (the L* groups): the weighted matrix P(label | annotators' gender) over female, male,
    ambiguous. A group with fewer than :data:`TONE_GROUP_MIN` validated faces, or without a
    validated woman or man, is not applied: the source's rates over all groups
    (``classifier_errors``) stand for it, and ``reason`` says so."""
    used = [
        r
        for r in rows
        if r["human_gender"] in GENDERS
        and r["predicted_gender"] in GENDER_OUTCOMES
        and r["l_star"] is not None
    ]
    if not used:
        return []
    weights = _weights(used, sizes)
    groups = np.array([tone_group_uncalibrated(r["l_star"]) for r in used])
    truth = np.array([GENDERS.index(r["human_gender"]) for r in used])
    pred = np.array([GENDER_OUTCOMES.index(r["predicted_gender"]) for r in used])
    out = []
    for group in TONE_GROUPS_UNCALIBRATED:
        at = groups == group
        n = int(at.sum())
        matrix = mk.confusion(truth[at], pred[at], 2, 3, weights[at]) if n else None
        reason = None
        if n < TONE_GROUP_MIN or len(set(truth[at].tolist())) < 2:
            reason = (
                f"{n} validated faces in this tone group (at least {TONE_GROUP_MIN} of both "
                "genders are needed): the source's rates over all groups stand for it"
            )
        out.append(
            {
                "attribute": GENDER, "source": source, "n_validated": n,
                "matrix_json": _matrix_json(matrix), "applied": reason is None,
                "reason": reason, "tone_group": group,
            }
        )  # fmt: skip
    return out


def monk_group(tone: int) -> int:
    """0 (Monk 1-3), 1 (4-7) or 2 (8-10)."""
    return 0 if tone <= 3 else 1 if tone <= 7 else 2


def independence(rows: list[dict], calibration: monk.MonkCalibration | None) -> float | None:
    """p-value of the product model's assumption on one source's validated faces: are the
    instruments' errors independent of each other? Errors: the gender label differs from the
    annotators' (female or male; ambiguous is no error), the age group differs from theirs, and
    with a Monk calibration the calibrated tone's group (Monk 1-3, 4-7, 8-10) differs from the
    annotators' tone's. Each pair of attributes answered on at least 10 faces is tested
    (:func:`~corpus_audit.methods.multiclass.error_independence_p`); the smallest p times the
    number of pairs tested (Bonferroni, at most 1). None when no pair could be tested."""
    wrong: dict[str, list] = {"gender": [], "age": [], "tone": []}
    for r in rows:
        g = None
        if r["human_gender"] in GENDERS and r["predicted_gender"] in GENDER_OUTCOMES:
            g = r["predicted_gender"] in GENDERS and r["predicted_gender"] != r["human_gender"]
        a = None
        human, pred = r["human_age_bin"], r["predicted_age_bin"]
        if human not in (None, MINOR_BIN) and pred is not None:
            a = pred == MINOR_BIN or GROUP_OF_BIN[pred] != GROUP_OF_BIN[human]
        t = None
        if calibration is not None and r["human_monk"] is not None and r["l_star"] is not None:
            hue = r["hue_deg"] if r["hue_deg"] is not None else float("nan")
            if np.isfinite(hue):
                tone = int(calibration.predict(np.array([r["l_star"]]), np.array([hue]))[0])
                t = monk_group(tone) != monk_group(int(r["human_monk"]))
        for name, value in (("gender", g), ("age", a), ("tone", t)):
            wrong[name].append(value)
    ps = []
    for x, y in (("gender", "age"), ("gender", "tone"), ("age", "tone")):
        both = [
            (u, v)
            for u, v in zip(wrong[x], wrong[y], strict=True)
            if u is not None and v is not None
        ]
        if len(both) >= 10:
            p = mk.error_independence_p([u for u, _ in both], [v for _, v in both])
            if np.isfinite(p):
                ps.append(p)
    return min(1.0, min(ps) * len(ps)) if ps else None


def _matrix_json(matrix: np.ndarray | None) -> str | None:
    if matrix is None:
        return None
    return json.dumps(
        [[None if np.isnan(v) else round(float(v), 6) for v in row] for row in matrix]
    )


def race_rows(
    source: str, rows: list[dict], sizes: dict[tuple, int], replicates: int, seed: int
) -> list[dict]:
    """``attribute_distribution`` rows of the annotators' perceived race or ethnicity for one
    source (occupation ``*``): the weighted share of each answer among the validated faces
    that got one, and the stratified bootstrap replicates of each share (``_draws``, made
    into the interval by :func:`race_interval`). Empty without answers."""
    used = [r for r in rows if r.get("human_race") in RACE_CLASSES]
    if not used:
        return []
    index = {c: i for i, c in enumerate(RACE_CLASSES)}
    y = np.array([index[r["human_race"]] for r in used])
    w = _weights(used, sizes)
    strata = [(r["side"], r["model_id"], r["stratum_label"]) for r in used]
    groups = [np.flatnonzero([s == g for s in strata]) for g in dict.fromkeys(strata)]
    rng = np.random.default_rng(stable_seed(seed, RACE, source))
    draws = np.empty((max(1, replicates), len(RACE_CLASSES)))
    for b in range(len(draws)):
        idx = np.concatenate([rng.choice(g, g.size) for g in groups])
        draws[b] = np.bincount(y[idx], weights=w[idx], minlength=len(RACE_CLASSES))
        draws[b] /= draws[b].sum()
    shares = np.bincount(y, weights=w, minlength=len(RACE_CLASSES)) / w.sum()
    counts = np.bincount(y, minlength=len(RACE_CLASSES))
    return [
        {
            "attribute": RACE, "source": source, "strategy": None, "occupation": "*",
            "class": name, "class_order": k, "n": len(used), "count": int(counts[k]),
            "share": 100.0 * shares[k], "share_low": None, "share_high": None,
            "corrected_share": None, "corrected_low": None, "corrected_high": None,
            "calibrated": True, "note": RACE_NOTE, "_draws": draws[:, k],
        }
        for k, name in enumerate(RACE_CLASSES)
    ]  # fmt: skip


def race_interval(rows: list[dict], confidence: float) -> list[dict]:
    """The race rows with their interval at ``confidence`` (and without the draws)."""
    out = []
    for r in rows:
        r = dict(r)
        lo, hi = percentile_interval(r.pop("_draws"), confidence)
        r["share_low"], r["share_high"] = _pct(lo), _pct(hi)
        out.append(r)
    return out


def _record(fix, attribute, source, n, matrix, draws, reason) -> None:
    key = (attribute, source)
    if reason is None and attribute != MONK:
        fix.matrices[key], fix.draws[key] = matrix, draws
    elif reason is not None:
        fix.reasons[key] = reason
    fix.rows.append(
        {
            "attribute": attribute, "source": source, "n_validated": n,
            "matrix_json": _matrix_json(matrix),
            "applied": reason is None, "reason": reason, "tone_group": None,
        }
    )  # fmt: skip


def correct_rows(
    fix: AttributeCorrection,
    rows: list[dict],
    confidence: float,
    rng: np.random.Generator,
) -> None:
    """Fill ``corrected_*`` (percent) and ``note`` of one set's age rows of
    ``attribute_distribution`` (in place), from the source's matrix when it is applied."""
    by_attribute: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if r["attribute"] in AGE_ATTRIBUTES:
            by_attribute[r["attribute"]].append(r)
    for attribute, group in by_attribute.items():
        key = (attribute, group[0]["source"])
        if key not in fix.matrices:
            if key in fix.reasons:
                for r in group:
                    r["note"] = f"not corrected: {fix.reasons[key]}"
            continue
        n = group[0]["n"]
        q = np.array([r["count"] for r in group], dtype=float) / n
        p = mk.corrected_shares(q, fix.matrices[key])
        draws = fix.draws[key]
        q_draws = rng.multinomial(n, q, size=len(draws)) / n
        p_draws = mk.corrected_draws(q_draws, draws)
        for i, r in enumerate(group):
            lo, hi = percentile_interval(p_draws[:, i][np.isfinite(p_draws[:, i])], confidence)
            r["corrected_share"] = _pct(p[i])
            r["corrected_low"], r["corrected_high"] = _pct(lo), _pct(hi)
            r["note"] = None


def _pct(value: float | None) -> float | None:
    if value is None or not np.isfinite(value):
        return None
    return 100.0 * float(value)


def monk_rows(
    fix: AttributeCorrection,
    key: tuple[str, str | None, str],
    colours: list[tuple[float, float]],
    confidence: float,
    rng: np.random.Generator,
    replicates: int,
) -> list[dict]:
    """``attribute_distribution`` rows of Monk 1-10 for one set whose source is calibrated;
    ``colours``: its adult faces' measured (L*, hue)."""
    source, strategy, occupation = key
    calibration = fix.calibrations.get(source)
    if calibration is None or not colours:
        return []
    l_star, hue = (np.array(c, dtype=float) for c in zip(*colours, strict=True))
    probs = calibration.predict_proba(l_star, hue)
    shares = probs.mean(axis=0)
    n = len(probs)
    boot = np.stack([probs[rng.integers(0, n, n)].mean(axis=0) for _ in range(max(1, replicates))])
    out = []
    for k, name in enumerate(MONK_CLASSES):
        lo, hi = percentile_interval(boot[:, k], confidence)
        out.append(
            {
                "attribute": MONK, "source": source, "strategy": strategy,
                "occupation": occupation, "class": name, "class_order": k, "n": n,
                "count": int(round(float(probs[:, k].sum()))), "share": 100.0 * shares[k],
                "share_low": _pct(lo), "share_high": _pct(hi), "corrected_share": None,
                "corrected_low": None, "corrected_high": None, "calibrated": True,
                "note": MONK_NOTE,
            }
        )  # fmt: skip
    return out
