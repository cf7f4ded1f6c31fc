"""Who is represented: % women per occupation among associated texts, vs labour statistics.

Input is one label per (occupation, text) row: the association of :mod:`.association`
(``female``, ``male``, ``non_binary``, ``none``) or, for captions, any other gender label
(an explicit-indicator label's ``both`` counts as not associated). A text that mentions two
occupations is one row for each.

- :func:`percent_women`: per occupation, the share of *associated* texts (female + male +
  non-binary) that are associated with women, with a Wilson interval, next to the labour
  statistic (``load_labor_stats``: % women among workers, 0-100) and the side of 50 the
  statistic lies on. Sides follow the project's rule (METHODS 1.7): ``>= 50`` is
  female-dominated, ``< 50`` male-dominated.
- :func:`decile_counts`: how many occupations fall in each decile of % women, split by
  female-/male-dominated (and "no statistic") occupations, as the method's authors plot it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from corpus_audit.core.errors import CorpusError
from corpus_audit.methods.amplification import PARITY
from corpus_audit.methods.stats import wilson_interval

MIN_ASSOCIATED = 10  # default: fewer associated texts do not place an occupation in a decile
WHO_COLUMNS = (
    "occupation",
    "texts",
    "female",
    "male",
    "non_binary",
    "not_associated",
    "associated",
    "pct_women",
    "ci_low",
    "ci_high",
    "labor_pct_women",
    "difference_pp",
    "labor_dominated",
    "decile",
)
DECILE_COLUMNS = (
    "decile",
    "pct_low",
    "pct_high",
    "female_dominated",
    "male_dominated",
    "no_statistic",
    "occupations",
)


def percent_women(
    occupations: Sequence[str] | pd.Series,
    genders: Sequence[str | None] | pd.Series,
    labor_stats: Mapping[str, float | None] | None = None,
    *,
    confidence: float = 0.95,
    source: str = "texts",
) -> pd.DataFrame:
    """One row per occupation (sorted by name) with the columns:

    - ``occupation``; ``texts``: rows of that occupation;
    - ``female``, ``male``, ``non_binary``: texts with that label; ``not_associated``: the
      others (``none``, ``both``, null); ``associated`` = female + male + non_binary;
    - ``pct_women``: 100 * female / associated (0-100; NaN when nothing is associated);
    - ``ci_low``, ``ci_high``: its Wilson interval at ``confidence`` (percent);
    - ``labor_pct_women``: the statistic for the occupation (percent; NaN when the table has
      none; occupation names compared in lower case);
    - ``difference_pp``: pct_women - labor_pct_women (percentage points);
    - ``labor_dominated``: ``female`` (statistic >= 50), ``male`` (< 50) or None;
    - ``decile``: 0-9, the decile of pct_women (decile d holds [10 d, 10 d + 10), 100 is in
      decile 9; <NA> when pct_women is NaN).

    Raises :class:`CorpusError` naming ``source`` and the row when an occupation is null.
    """
    occ = pd.Series(list(occupations), dtype=object)
    lab = pd.Series(list(genders), dtype=object)
    if len(occ) != len(lab):
        raise ValueError(f"percent_women: {len(occ)} occupations but {len(lab)} labels")
    missing = np.flatnonzero(occ.isna().to_numpy())
    if missing.size:
        raise CorpusError(f"{source}: row {int(missing[0])}: the occupation is missing")
    stats = {str(k).strip().lower(): v for k, v in (labor_stats or {}).items()}
    frame = pd.DataFrame({"occupation": occ.astype(str), "label": lab})
    rows = []
    for name, group in frame.groupby("occupation", sort=True):
        counts = group["label"].value_counts()
        female, male, nb = (int(counts.get(g, 0)) for g in ("female", "male", "non_binary"))
        associated = female + male + nb
        pct = 100.0 * female / associated if associated else np.nan
        lo, hi = wilson_interval(female, associated, confidence)
        stat = stats.get(str(name).strip().lower())
        labor = np.nan if stat is None else float(stat)
        rows.append(
            {
                "occupation": name,
                "texts": len(group),
                "female": female,
                "male": male,
                "non_binary": nb,
                "not_associated": len(group) - associated,
                "associated": associated,
                "pct_women": pct,
                "ci_low": np.nan if lo is None else lo,
                "ci_high": np.nan if hi is None else hi,
                "labor_pct_women": labor,
                "difference_pp": pct - labor,
                "labor_dominated": None if stat is None else _side(labor),
                "decile": pd.NA if np.isnan(pct) else min(int(pct // 10), 9),
            }
        )
    out = pd.DataFrame(rows, columns=list(WHO_COLUMNS))
    out["decile"] = out["decile"].astype("Int64")
    return out


def _side(pct: float) -> str:
    return "female" if pct >= PARITY else "male"


def decile_counts(who: pd.DataFrame, *, min_associated: int = MIN_ASSOCIATED) -> pd.DataFrame:
    """Occupations per decile of % women, from a :func:`percent_women` table.

    Only occupations with at least ``min_associated`` associated texts count (default 10: a
    % from fewer texts is too uncertain to place in a decile; with 10 texts the 95 % Wilson
    interval is about 50 points wide). Ten rows, deciles 0-9, with the columns ``decile``,
    ``pct_low``, ``pct_high`` (the decile's bounds in percent), ``female_dominated``,
    ``male_dominated``, ``no_statistic`` (occupations without a labour statistic) and
    ``occupations`` (their sum).
    """
    used = who[(who["associated"] >= min_associated) & who["decile"].notna()]
    rows = []
    for d in range(10):
        in_decile = used[used["decile"] == d]
        side = in_decile["labor_dominated"]
        female, male = int((side == "female").sum()), int((side == "male").sum())
        rows.append(
            {
                "decile": d,
                "pct_low": 10.0 * d,
                "pct_high": 10.0 * (d + 1),
                "female_dominated": female,
                "male_dominated": male,
                "no_statistic": len(in_decile) - female - male,
                "occupations": len(in_decile),
            }
        )
    return pd.DataFrame(rows, columns=list(DECILE_COLUMNS))
