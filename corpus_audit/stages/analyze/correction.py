"""%female and amplification corrected for the classifier's errors (docs/analysis.md,
"Correcting for the classifier's errors"; the math: corpus_audit/methods/misclassification.py).

Reads the human validation labels (``human_labels``, written by ``validate import``) of the
images the analysis counts, learns the classifier's error rates per source (``training``, each
generated model; or ``pooled`` with ``analysis.correction = "pooled"``) and corrects every
set's %female. A source with fewer than ``analysis.correction_min_validated`` validated images
(or no validated woman or man) is not corrected, and every row that needs it says why. The
corrected amplification uses the same pairs, exclusion rule, t-tests and bootstrap as the
uncorrected one (the caller's ``amplify`` function); its bootstrap replicates of a set's
%female combine a replicate of the set's images with one of the source's validation sample.

Writes the rows of ``classifier_errors``, ``percent_female_corrected``,
``amplification_corrected`` and ``amplification_summary_corrected``
(sql/schema/006_analyze_correction.sql); needs the temp table ``analysis_labelled``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods import misclassification as mc
from corpus_audit.methods.amplification import Rate
from corpus_audit.methods.stats import bootstrap_percent, percentile_interval, stable_seed
from corpus_audit.stages.analyze.percent import GENERATED, TRAINING, ImageSet
from corpus_audit.stages.analyze.strata import prepare_strata, strata_sizes

POOLED = "pooled"
NO_CORRECTION = "no_correction"  # exclude_reason of a pair a side of which has no correction


def source_of(image_set: ImageSet) -> str:
    """The source whose error rates apply to a set: ``training`` or the generating model."""
    return TRAINING if image_set.side == TRAINING else (image_set.model_id or "unknown")


@dataclass
class Correction:
    """Error rates and their bootstrap replicates per source; see the module docstring."""

    scope: str  # per_source | pooled
    rates: dict[str, mc.ErrorRates]  # source -> rates (only the sources that are corrected)
    reasons: dict[str, str]  # source -> why it is not corrected
    error_rows: list[dict]
    replicates: int
    seed: int
    _validations: dict[str, mc.Validation] = field(default_factory=dict)
    _draws: dict[str, mc.ErrorRates] = field(default_factory=dict)
    _set_draws: dict[tuple, np.ndarray | None] = field(default_factory=dict)

    def key(self, source: str) -> str:
        """The ``classifier_errors`` source that corrects ``source``."""
        return POOLED if self.scope == POOLED else source

    def reason(self, image_set: ImageSet) -> str | None:
        """Why ``image_set`` is not corrected (None when it is)."""
        key = self.key(source_of(image_set))
        if key in self.rates:
            return None
        return self.reasons.get(key, "no validation labels")

    def percent(self, image_set: ImageSet) -> float | None:
        """The set's corrected %female (0-100); None without labels or correction."""
        rates = self.rates.get(self.key(source_of(image_set)))
        if rates is None:
            return None
        return mc.corrected_percent(image_set.percent_female, rates)

    def rate(self, image_set: ImageSet) -> Rate:
        """The corrected :class:`Rate` of a set (its key marks it as corrected)."""
        return Rate(("corrected", *image_set.key), self.percent(image_set), image_set.n)

    def draws(self, image_set: ImageSet) -> np.ndarray | None:
        """Bootstrap replicates of the set's corrected %female: the set's own replicates (the
        same ones the uncorrected bootstrap draws) through the source's rate replicates."""
        if image_set.key not in self._set_draws:
            self._set_draws[image_set.key] = self._new_draws(image_set)
        return self._set_draws[image_set.key]

    def _new_draws(self, image_set: ImageSet) -> np.ndarray | None:
        key = self.key(source_of(image_set))
        if key not in self.rates or image_set.percent_female is None or not self.replicates:
            return None
        if key not in self._draws:
            self._draws[key] = mc.bootstrap_rates(
                self._validations[key], self.replicates, stable_seed(self.seed, "errors", key)
            )
        rate = image_set.rate()
        k = rate.percent * rate.n / 100.0  # type: ignore[operator]
        q = bootstrap_percent(
            k, int(rate.n or 0), self.replicates, stable_seed(self.seed, rate.key)
        )
        assert q is not None  # percent is not None, so n > 0
        return mc.corrected_draws(q, self._draws[key])


def learn(study: Study, classifier: str | None, replicates: int, seed: int) -> Correction:
    """Error rates from the validated images (needs ``analysis_labelled``)."""
    cfg = study.config.analysis
    by = prepare_strata(study)
    val_rows = dicts(study.sql("analyze/validated", classifier=classifier or "", by_attributes=by))
    sizes = strata_sizes(study, classifier, by)
    by_source: dict[str, list[dict]] = defaultdict(list)
    for r in val_rows:
        by_source[r["model_id"] if r["side"] == GENERATED else TRAINING].append(r)
    sources = sorted({m or TRAINING for (_, m, _) in sizes} | set(by_source))
    parts = {s: _validation(by_source.get(s, []), sizes) for s in sources}
    if cfg.correction == POOLED:
        parts = {POOLED: mc.pool([parts[s] for s in sources])}
    correction = Correction(cfg.correction, {}, {}, [], replicates, seed)
    for source, v in parts.items():
        reason = mc.why_not(v, cfg.correction_min_validated)
        if reason is None:
            correction.rates[source] = mc.error_rates(v.cells, v.weights)
            correction._validations[source] = v
        else:
            correction.reasons[source] = reason
        correction.error_rows.append(_error_row(source, v, reason, cfg.confidence))
    return correction


def _validation(rows: list[dict], sizes: dict[tuple, int]) -> mc.Validation:
    """One source's validated images, strata = (source, stored label)."""
    strata = [(r["side"], r["model_id"], r["stratum_label"]) for r in rows]
    return mc.validation([r["truth"] for r in rows], [r["predicted"] for r in rows], strata, sizes)


def _error_row(source: str, v: mc.Validation, reason: str | None, confidence: float) -> dict:
    row: dict[str, Any] = {
        "source": source,
        "n_validated": v.n,
        "n_female": v.n_female,
        "n_male": v.n_male,
    }
    for est in mc.rate_estimates(v, confidence):
        for suffix, value in (("", est.value), ("_low", est.ci_low), ("_high", est.ci_high)):
            row[est.name + suffix] = None if value is None else 100.0 * value
    row["applied"] = reason is None
    row["reason"] = reason
    return row


def percent_rows(correction: Correction, sets: list[ImageSet], confidence: float) -> list[dict]:
    """``percent_female_corrected`` rows of ``sets`` (the sets of ``percent_female``)."""
    out = []
    for s in sets:
        corrected = correction.percent(s)
        lo = hi = None
        draws = correction.draws(s) if corrected is not None else None
        if draws is not None:
            lo, hi = percentile_interval(draws, confidence)
        reason = correction.reason(s)
        note = None
        if reason is not None:
            note = f"no correction ({reason})"
        elif s.percent_female is None:
            note = "no labelled images"
        elif corrected is None:
            note = "correction undefined (classifier no better than chance)"
        out.append(
            {
                "side": s.side,
                "model_id": s.model_id,
                "strategy": s.strategy,
                "occupation": s.occupation,
                "prompt_id": s.prompt_id,
                "template_id": s.template_id,
                "n_labelled": s.n,
                "percent_female": s.percent_female,
                "corrected_pf": corrected,
                "ci_low": lo,
                "ci_high": hi,
                "error_source": correction.key(source_of(s)) if reason is None else None,
                "note": note,
            }
        )
    return out


AmplifyFn = Callable[..., tuple[list[dict], list[dict]]]


def amplification_rows(
    correction: Correction,
    amplify: AmplifyFn,
    uncorrected: tuple[list[dict], list[dict]],
    train: list[ImageSet],
    gen: list[ImageSet],
    caps: list[tuple[ImageSet, ImageSet]],
) -> tuple[list[dict], list[dict]]:
    """Rows of ``amplification_corrected`` and ``amplification_summary_corrected``.

    ``amplify(train, gen, caps, rate_of=..., draws=...)`` is the stage's own amplification
    (the same pairs, exclusion rule, t-tests and bootstrap); ``uncorrected`` its rows without
    correction, which the corrected pair rows carry beside their own.
    """
    all_sets = train + gen + [s for pair in caps for s in pair]
    draws = {}
    for s in all_sets:
        d = correction.draws(s) if correction.percent(s) is not None else None
        if d is not None:
            draws[correction.rate(s).key] = d
    amp, summ = amplify(train, gen, caps, rate_of=correction.rate, draws=draws)
    plain_amp, _ = uncorrected
    by_model_side = _reasons_by_model(correction, train, gen, caps)
    for row, plain in zip(amp, plain_amp, strict=True):
        keys = ("model_id", "strategy", "occupation", "template_id")
        assert all(row[k] == plain[k] for k in keys), "pair order differs"
        missing = ("no_training_labels", "no_generated_labels")
        if plain["exclude_reason"] in missing:
            row["exclude_reason"] = plain["exclude_reason"]  # no labels beats no correction
        elif row["exclude_reason"] in missing:
            row["exclude_reason"] = NO_CORRECTION
        row["uncorrected_amplification"] = plain["amplification"]
        row["uncorrected_excluded"] = plain["excluded"]
        for k in ("training_n", "generated_n"):
            row.pop(k, None)
    for row in summ:
        reasons = by_model_side.get((row["model_id"], row["strategy"]), [])
        row["note"] = f"no correction ({'; '.join(reasons)})" if reasons else None
    return amp, summ


def _reasons_by_model(
    correction: Correction,
    train: list[ImageSet],
    gen: list[ImageSet],
    caps: list[tuple[ImageSet, ImageSet]],
) -> dict[tuple[str, str], list[str]]:
    """(model, strategy) -> why its training or generated side is not corrected."""
    out: dict[tuple[str, str], list[str]] = {}
    strategies = {t.strategy for t in train if t.strategy} | {t.strategy for t, _ in caps}
    models = {g.model_id or "unknown" for g in gen} | {g.model_id or "unknown" for _, g in caps}
    for model in models:
        for strategy in strategies:
            reasons = []
            for probe in (ImageSet(TRAINING, "", 0, 0, 0), ImageSet(GENERATED, "", 0, 0, 0, model)):
                reason = correction.reason(probe)
                if reason is not None:
                    label = correction.key(source_of(probe))
                    text = reason if label == POOLED else f"{label}: {reason}"
                    if text not in reasons:
                        reasons.append(text)
            out[(model, str(strategy))] = reasons
    return out


def changes(amp_rows: list[dict], summ_rows: list[dict], plain_summ: list[dict]) -> dict:
    """How the correction changes the results: pairs included both ways whose amplification
    changes sign; summary cells significant (p < 0.05) before and not after, and after and
    not before."""
    both = [
        r
        for r in amp_rows
        if not r["excluded"]
        and r["uncorrected_excluded"] is False
        and r["amplification"] is not None
    ]
    flips = sum(
        1 for r in both if np.sign(r["amplification"]) * np.sign(r["uncorrected_amplification"]) < 0
    )

    def key(r: dict) -> tuple:
        return (r["model_id"], r["strategy"], r["template_id"])

    plain = {key(r): r for r in plain_summ}
    lost = gained = compared = 0
    for r in summ_rows:
        p = plain.get(key(r))
        if p is None or r["note"] or (p["p_value"] is None and r["p_value"] is None):
            continue
        compared += 1
        before = p["p_value"] is not None and p["p_value"] < 0.05
        after = r["p_value"] is not None and r["p_value"] < 0.05
        lost += before and not after
        gained += after and not before
    return {
        "pairs_compared": len(both),
        "pairs_sign_changed": flips,
        "cells_compared": compared,
        "cells_lost_significance": lost,
        "cells_gained_significance": gained,
    }


def provenance(tables: dict[str, list[dict]], plain_summary: list[dict], scope: str) -> dict:
    """What the run records about the correction: the scope, per source whether it was
    applied (or why not) and :func:`changes`."""
    return {
        "scope": scope,
        "sources": {
            r["source"]: ("applied" if r["applied"] else f"no correction ({r['reason']})")
            for r in tables["classifier_errors"]
        },
        "changes": changes(
            tables["amplification_corrected"],
            tables["amplification_summary_corrected"],
            plain_summary,
        ),
    }
