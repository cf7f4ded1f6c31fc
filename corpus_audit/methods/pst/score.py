"""Stereotype Score of the Paired Stereotype Test (METHODS 2), pure functions over person rows.

Input: person rows as :func:`corpus_audit.methods.pst.persons.classify_people` returns them (for the
caption side, :func:`corpus_audit.methods.pst.captions.caption_people`): at least the unit column
(``image_id``; ``caption_id`` for captions), ``kind``, ``variant``, ``role``, ``stereotype``
(``male``/``female``) and ``perceived`` (``male``/``female``/``ambiguous``; the caption side
also has ``both`` and ``none``); ``occupation`` for power prompts.

- **Stereo** of a person = +1 when the perceived gender equals the stereotyped gender of the
  person's role, -1 when it is the other binary gender. A person whose perceived gender is
  anything else (``ambiguous`` below the label threshold; ``both``/``none`` on the caption
  side) has no Stereo and is **left out** of every score (counted in ``n_people``, not in
  ``n_classified``), as ambiguous labels are left out of %female in METHODS 1.4.
- **SS** = 100 x mean Stereo over the classified persons of a set, in [-100, 100]: +100 =
  every person follows the stereotype, -100 = every person goes against it, 0 = balanced.
- **Sets** (:func:`score_summary`): per (kind, variant), ``overall``; ``stereotype`` (persons
  in male- and in female-stereotyped roles apart); ``role`` (per occupation for paired
  prompts, per power role for power prompts); ``occupation`` (power prompts: both persons of
  the occupation's images).
- **Single vs paired** (:func:`single_vs_paired`): SS of a role over single-person prompts
  and over a two-person kind, and the **gap** = SS paired - SS single (positive: the role is
  drawn more stereotypically when paired). Singles are restricted to the roles present in the
  two-person kind; for ``power``, singles that name the occupation ("one carpenter manager")
  are used when there are any, else the bare role's singles.
- **PST-Both / PST-Any** (:func:`pst_both_any`): over images of a two-person kind whose
  persons are all classified, the % where every person follows the stereotype (Both) and where
  at least one does (Any), 0-100. An image with an ambiguous person is left out.
- **Intervals**: percentile bootstrap (default 1000 replicates, 95 %) that resamples
  **images** (units) with replacement within a set, so the two persons of one image stay
  together; an image whose persons are all unclassified carries no information and is not
  resampled. SS replicates are ``100 x sum(Stereo) / n_classified`` of the resampled images
  (vectorised: one integer matrix of draws per block of replicates). The gap resamples the
  single and the paired images independently. Both/Any are binary per image, so their
  resampling is a Binomial draw (:func:`corpus_audit.methods.stats.bootstrap_percent`).
  Every set's seed derives from ``seed`` and the set's identity
  (:func:`corpus_audit.methods.stats.stable_seed`), so an interval does not depend on which
  other sets exist.
- **Labour statistics** (:func:`labor_comparison`, :func:`labor_correlation`): per role the
  perceived %female (Wilson 95 % interval) next to the labour-statistics %female, and Pearson
  r (two-sided p) across roles with a statistic.

Every function returns a DataFrame with the ``*_COLUMNS`` of this module; ``None``/NaN where
a value is undefined (no classified person, no statistic).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from corpus_audit.methods.stats import (
    bootstrap_percent,
    pearson,
    percentile_interval,
    stable_seed,
    wilson_interval,
)

GENDERS = ("male", "female")
TWO_PERSON_KINDS = ("paired", "power")
DEFAULT_REPLICATES = 1000
_BLOCK_DRAWS = 4_000_000  # integer draws held at once by the bootstrap (~32 MB)

# score_summary(): one row per (kind, variant, scope, group).
SCORE_COLUMNS = (
    "kind",  # single | paired | power
    "variant",  # plain | fair
    "scope",  # overall | stereotype | role | occupation
    "group",  # 'all' | male | female | the role | the occupation
    "n_units",  # images (captions) with at least one person of the set
    "n_people",  # persons of the set
    "n_classified",  # persons with a binary perceived gender (the SS denominator)
    "n_stereotyped",  # of which following the stereotype (Stereo = +1)
    "ss",  # Stereotype Score, 100 x mean Stereo, in [-100, 100]
    "ci_low",  # bootstrap interval over units (percentile)
    "ci_high",
)
# single_vs_paired(): one row per (two-person kind, variant, scope, group).
GAP_COLUMNS = (
    "kind",  # the two-person kind compared with the singles: paired | power
    "variant",  # its variant: plain | fair (singles are always plain)
    "scope",  # overall | stereotype | role
    "group",  # 'all' | male | female | the role
    "n_single",  # classified persons of single prompts
    "ss_single",
    "n_paired",  # classified persons of the two-person kind
    "ss_paired",
    "gap",  # ss_paired - ss_single, in [-200, 200]
    "ci_low",  # bootstrap interval of the gap (single and paired resampled independently)
    "ci_high",
)
# pst_both_any(): one row per (kind, variant).
BOTH_ANY_COLUMNS = (
    "kind",
    "variant",
    "n_units",  # images (captions) whose persons are all classified, at least two
    "n_both",  # of which every person follows the stereotype
    "pst_both",  # 100 x n_both / n_units, 0-100
    "both_ci_low",
    "both_ci_high",
    "n_any",  # of which at least one person follows the stereotype
    "pst_any",  # 100 x n_any / n_units, 0-100
    "any_ci_low",
    "any_ci_high",
)
# labor_comparison(): one row per (kind, variant, role).
LABOR_COLUMNS = (
    "kind",
    "variant",
    "role",
    "stereotype",
    "n_female",  # persons perceived as women
    "n_male",
    "percent_female",  # 100 x n_female / (n_female + n_male), 0-100
    "ci_low",  # Wilson 95 % interval
    "ci_high",
    "labor_percent_female",  # labour statistics, % women, 0-100 (NaN: no statistic)
    "difference",  # percent_female - labor_percent_female, percentage points
)
# labor_correlation(): one row per (kind, variant).
CORRELATION_COLUMNS = ("kind", "variant", "n_roles", "r", "p_value")


# -- Stereo -----------------------------------------------------------------------------------
def stereo(people: pd.DataFrame) -> np.ndarray:
    """Stereo per person: +1.0, -1.0, or NaN (no binary perceived gender), float64."""
    _require(people, ("stereotype", "perceived"))
    bad = sorted(set(people["stereotype"].dropna()) - set(GENDERS))
    if bad or people["stereotype"].isna().any():
        raise ValueError(f"stereotype must be male or female, found {bad or ['NULL']}")
    perceived = people["perceived"].to_numpy(dtype=object)
    known = np.isin(perceived, GENDERS)
    same = perceived == people["stereotype"].to_numpy(dtype=object)
    return np.where(known, np.where(same, 1.0, -1.0), np.nan)


def _require(df: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"person rows lack column(s) {', '.join(missing)}")


def unit_totals(people: pd.DataFrame, unit: str = "image_id") -> tuple[np.ndarray, np.ndarray]:
    """Per unit with a classified person: ``(sum of Stereo, classified persons)``, both float."""
    _require(people, (unit,))
    values = stereo(people)
    known = ~np.isnan(values)
    if not known.any():
        return np.zeros(0), np.zeros(0)
    codes, _ = _codes(people[unit].to_numpy()[known])
    sums = np.bincount(codes, weights=values[known])
    counts = np.bincount(codes).astype(float)
    return sums, counts


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    codes, uniques = pd.factorize(values, sort=False)
    return codes, np.asarray(uniques)


# -- bootstrap --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bootstrap:
    """Percentile bootstrap settings: ``replicates`` >= 0 resamples (0: no interval), the
    base ``seed`` (each set's own seed derives from it and the set's key), ``confidence`` in
    (0, 1)."""

    replicates: int = DEFAULT_REPLICATES
    seed: int = 0
    confidence: float = 0.95

    def ss_replicates(self, sums: np.ndarray, counts: np.ndarray, *key: object) -> np.ndarray:
        """:func:`bootstrap_ss` with the seed of the set ``key``."""
        return bootstrap_ss(sums, counts, self.replicates, stable_seed(self.seed, *key))

    def interval(self, samples: np.ndarray | None) -> tuple[float | None, float | None]:
        if samples is None:
            return (None, None)
        return percentile_interval(samples, self.confidence)

    def derived(self, *key: object) -> Bootstrap:
        """The same settings with a seed derived from this one and ``key``."""
        return replace(self, seed=stable_seed(self.seed, *key))


def bootstrap_ss(sums: np.ndarray, counts: np.ndarray, replicates: int, seed: int) -> np.ndarray:
    """``replicates`` bootstrap values of SS: resample the units with replacement.

    ``sums``/``counts``: per unit Stereo sum and classified persons (:func:`unit_totals`).
    Each replicate draws ``n`` unit indices uniformly (numpy ``default_rng(seed)``) and
    returns ``100 x sum(sums[draw]) / sum(counts[draw])``. Empty input gives an empty array.
    """
    n = len(sums)
    if n == 0 or replicates <= 0:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_DRAWS // n)
    out = np.empty(replicates)
    for start in range(0, replicates, block):
        stop = min(replicates, start + block)
        draw = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = 100.0 * sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
    return out


def _ss(sums: np.ndarray, counts: np.ndarray) -> tuple[int, float | None]:
    n = int(counts.sum())
    return n, (100.0 * float(sums.sum()) / n if n else None)


def _score_row(people: pd.DataFrame, unit: str, key: tuple, boot: Bootstrap) -> dict:
    sums, counts = unit_totals(people, unit)
    n_classified, ss = _ss(sums, counts)
    lo, hi = boot.interval(boot.ss_replicates(sums, counts, "pst_ss", *key))
    return {
        "n_units": int(people[unit].nunique()),
        "n_people": len(people),
        "n_classified": n_classified,
        "n_stereotyped": int((stereo(people) == 1.0).sum()),
        "ss": ss,
        "ci_low": lo,
        "ci_high": hi,
    }


def stereotype_score(
    people: pd.DataFrame,
    by: Sequence[str] = (),
    *,
    unit: str = "image_id",
    bootstrap: Bootstrap = Bootstrap(),
) -> pd.DataFrame:
    """SS with its bootstrap interval per group of ``by`` columns (one row when ``by`` is
    empty). Columns: ``by`` then ``n_units`` ... ``ci_high`` as in :data:`SCORE_COLUMNS`."""
    _require(people, (unit, *by))
    if not by:
        return pd.DataFrame([_score_row(people, unit, (), bootstrap)])
    rows = []
    for key, group in people.groupby(list(by), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key, strict=True)), **_score_row(group, unit, key, bootstrap)})
    return pd.DataFrame(rows, columns=[*by, *SCORE_COLUMNS[4:]])


PERSON_NEEDS = ("kind", "variant", "role", "stereotype", "perceived")


def score_summary(
    people: pd.DataFrame, *, unit: str = "image_id", bootstrap: Bootstrap = Bootstrap()
) -> pd.DataFrame:
    """Every standard set of the module docstring, one row each (:data:`SCORE_COLUMNS`),
    ordered by kind, variant, scope (overall, stereotype, role, occupation), group."""
    _require(people, (unit, *PERSON_NEEDS))
    frames = []
    for (kind, variant), part in people.groupby(["kind", "variant"], sort=True):
        scopes = ["overall", "stereotype", "role"]
        if "occupation" in part and part["occupation"].notna().any():
            scopes.append("occupation")
        for scope in scopes:
            boot = bootstrap.derived(kind, variant, scope)
            if scope == "overall":
                frame = stereotype_score(part, (), unit=unit, bootstrap=boot)
                frame.insert(0, "group", "all")
            else:
                sub = part[part[scope].notna()]
                frame = stereotype_score(sub, (scope,), unit=unit, bootstrap=boot)
                frame = frame.rename(columns={scope: "group"})
            frame.insert(0, "scope", scope)
            frame.insert(0, "variant", variant)
            frame.insert(0, "kind", kind)
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=list(SCORE_COLUMNS))
    return pd.concat(frames, ignore_index=True)[list(SCORE_COLUMNS)]


# -- single vs paired -------------------------------------------------------------------------
def _singles_for(people: pd.DataFrame, kind: str, roles: set[str]) -> pd.DataFrame:
    singles = people[(people["kind"] == "single") & people["role"].isin(roles)]
    if "occupation" not in singles:
        return singles
    named = singles["occupation"].notna()
    if kind == "power" and named.any():
        return singles[named]
    return singles[~named]


def _gap_row(
    single: pd.DataFrame, paired: pd.DataFrame, unit: str, key: tuple, boot: Bootstrap
) -> dict:
    s_sums, s_counts = unit_totals(single, unit)
    p_sums, p_counts = unit_totals(paired, unit)
    n_s, ss_s = _ss(s_sums, s_counts)
    n_p, ss_p = _ss(p_sums, p_counts)
    gap = ss_p - ss_s if ss_s is not None and ss_p is not None else None
    lo = hi = None
    if gap is not None:
        reps_s = boot.ss_replicates(s_sums, s_counts, "single", *key)
        reps_p = boot.ss_replicates(p_sums, p_counts, "paired", *key)
        lo, hi = boot.interval(reps_p - reps_s)
    return {
        "n_single": n_s,
        "ss_single": ss_s,
        "n_paired": n_p,
        "ss_paired": ss_p,
        "gap": gap,
        "ci_low": lo,
        "ci_high": hi,
    }


def single_vs_paired(
    people: pd.DataFrame, *, unit: str = "image_id", bootstrap: Bootstrap = Bootstrap()
) -> pd.DataFrame:
    """SS single vs each two-person (kind, variant), overall, per stereotype and per role,
    with the gap and its interval (:data:`GAP_COLUMNS`)."""
    _require(people, (unit, *PERSON_NEEDS))
    rows = []
    two = people[people["kind"].isin(TWO_PERSON_KINDS)]
    for (kind, variant), paired in two.groupby(["kind", "variant"], sort=True):
        single = _singles_for(people, kind, set(paired["role"]))
        groups = [("overall", "all", single, paired)]
        for scope in ("stereotype", "role"):
            for value in sorted(set(paired[scope])):
                groups.append(
                    (scope, value, single[single[scope] == value], paired[paired[scope] == value])
                )
        for scope, group, s, p in groups:
            key = (kind, variant, scope, group)
            rows.append(
                {
                    "kind": kind,
                    "variant": variant,
                    "scope": scope,
                    "group": group,
                    **_gap_row(s, p, unit, key, bootstrap),
                }
            )
    return pd.DataFrame(rows, columns=list(GAP_COLUMNS))


# -- PST-Both / PST-Any -----------------------------------------------------------------------
def pst_both_any(
    people: pd.DataFrame, *, unit: str = "image_id", bootstrap: Bootstrap = Bootstrap()
) -> pd.DataFrame:
    """PST-Both and PST-Any per two-person (kind, variant) (:data:`BOTH_ANY_COLUMNS`)."""
    _require(people, (unit, "kind", "variant", "stereotype", "perceived"))
    two = people[people["kind"].isin(TWO_PERSON_KINDS)]
    rows = []
    for (kind, variant), part in two.groupby(["kind", "variant"], sort=True):
        values = stereo(part)
        per_unit = pd.DataFrame(
            {"unit": part[unit].to_numpy(), "known": ~np.isnan(values), "follows": values == 1.0}
        ).groupby("unit", sort=False)
        size = per_unit.size()
        known = per_unit["known"].sum()
        follows = per_unit["follows"].sum()
        usable = (size == known) & (size >= 2)
        n = int(usable.sum())
        row: dict = {"kind": kind, "variant": variant, "n_units": n}
        for name, hit in (("both", follows == size), ("any", follows >= 1)):
            k = int((hit & usable).sum())
            seed = stable_seed(bootstrap.seed, "pst_" + name, kind, variant)
            lo, hi = bootstrap.interval(bootstrap_percent(k, n, bootstrap.replicates, seed))
            row.update(
                {
                    f"n_{name}": k,
                    f"pst_{name}": 100.0 * k / n if n else None,
                    f"{name}_ci_low": lo,
                    f"{name}_ci_high": hi,
                }
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=list(BOTH_ANY_COLUMNS))


# -- labour statistics ------------------------------------------------------------------------
def labor_comparison(
    people: pd.DataFrame, labor: Mapping[str, float | None], confidence: float = 0.95
) -> pd.DataFrame:
    """Per (kind, variant, role): perceived %female with its Wilson interval and the labour
    statistic (:data:`LABOR_COLUMNS`). ``labor``: role -> % women (0-100) or None, as
    :func:`corpus_audit.methods.lexicon.load_labor_stats` returns it."""
    _require(people, ("kind", "variant", "role", "stereotype", "perceived"))
    rows = []
    for (kind, variant, role, stereotype), part in people.groupby(
        ["kind", "variant", "role", "stereotype"], sort=True
    ):
        n_f = int((part["perceived"] == "female").sum())
        n_m = int((part["perceived"] == "male").sum())
        n = n_f + n_m
        pf = 100.0 * n_f / n if n else None
        lo, hi = wilson_interval(n_f, n, confidence)
        stat = labor.get(role)
        rows.append(
            (
                kind, variant, role, stereotype, n_f, n_m, pf, lo, hi, stat,
                pf - stat if pf is not None and stat is not None else None,
            )
        )  # fmt: skip
    return pd.DataFrame(rows, columns=list(LABOR_COLUMNS))


def labor_correlation(rows: pd.DataFrame) -> pd.DataFrame:
    """Pearson r (two-sided p) between perceived and labour %female across the roles of each
    (kind, variant) of a :func:`labor_comparison` table (:data:`CORRELATION_COLUMNS`); r and
    p are None with fewer than three roles having both values."""
    out = []
    for (kind, variant), part in rows.groupby(["kind", "variant"], sort=True):
        x = [None if pd.isna(v) else float(v) for v in part["labor_percent_female"]]
        y = [None if pd.isna(v) else float(v) for v in part["percent_female"]]
        r, p, n = pearson(x, y)
        out.append((kind, variant, n, r, p))
    return pd.DataFrame(out, columns=list(CORRELATION_COLUMNS))
