"""Gender distribution of generated images per occupational category, against official
statistics (METHODS §3, the BAFIS comparison).

Input: one row per labelled generated image (``model_id``, ``language``, ``variant``,
``category``, ``label`` in female / male / ambiguous; optional ``prompt_set``: the prompt-table
family such as ``magbig``). Output: one row per (model, prompt family, language, variant,
category) with

- the three shares of the labelled images, each with a Wilson interval: ``pct_female``,
  ``pct_male``, ``pct_ambiguous`` (0-100, summing to 100: ``ambiguous`` = the classifier was
  not confident, METHODS 1.4);
- ``percent_female`` = 100 x female / (female + male), the project's %female (ambiguous
  images left out), with its Wilson interval ``ci_low`` / ``ci_high``: the figure comparable
  with an official %female, which has no "ambiguous";
- the official %female of the category for the language's statistics and ``gap_pp`` =
  ``percent_female`` - ``official_pf`` in percentage points, in [-100, 100]: positive = the
  model shows more women than the statistics count.

Images are pooled over the category's occupations (and prompts): a category's figure weights
each occupation by its number of labelled images, and the Wilson interval treats images as
independent draws (occupations are not a random sample of the category, so read it as the
uncertainty of this image sample, not of "the category"). Images dropped by the face filter
carry no label and are not counted here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.methods.lexicon.official_stats import category_statistics
from corpus_audit.methods.stats import percent, wilson_interval

LABELS = ("female", "male", "ambiguous")
GROUP_COLUMNS = ("model_id", "prompt_set", "language", "variant", "category")
REQUIRED_COLUMNS = ("model_id", "language", "variant", "category", "label")
OFFICIAL_COLUMNS = (
    "official_pf",
    "official_source",
    "official_year",
    "official_country",
    "official_basis",
)
CATEGORY_COLUMNS = (
    *GROUP_COLUMNS,
    "n_images",
    "n_female",
    "n_male",
    "n_ambiguous",
    "pct_female",
    "pct_female_low",
    "pct_female_high",
    "pct_male",
    "pct_male_low",
    "pct_male_high",
    "pct_ambiguous",
    "pct_ambiguous_low",
    "pct_ambiguous_high",
    "percent_female",
    "ci_low",
    "ci_high",
    *OFFICIAL_COLUMNS,
    "gap_pp",
)


def _check_labels(labels: Any) -> Any:
    missing = [c for c in REQUIRED_COLUMNS if c not in labels.columns]
    if missing:
        raise CorpusAuditError(
            f"category distribution: the labels lack the column(s) {', '.join(missing)}"
        )
    frame = labels.copy()
    if "prompt_set" not in frame.columns:
        frame["prompt_set"] = None
    bad = sorted({str(v) for v in frame["label"].unique() if v not in LABELS})
    if bad:
        raise CorpusAuditError(
            f"category distribution: label(s) {', '.join(map(repr, bad))} are not "
            "female, male or ambiguous"
        )
    for column in ("model_id", "language", "variant"):
        if frame[column].isna().any():
            raise CorpusAuditError(f"category distribution: empty {column} in the labels")
    return frame


def category_distribution(
    labels: Any, official: Any | None = None, *, confidence: float = 0.95
) -> Any:
    """Per (model, prompt family, language, variant, category) gender shares; a DataFrame
    with the columns :data:`CATEGORY_COLUMNS` (units in the module docstring), sorted by the
    group columns.

    ``official``: a DataFrame with ``language``, ``category`` and :data:`OFFICIAL_COLUMNS`
    (:func:`official_table` builds it); a (language, category) it lacks gets None. Images
    without a category (an occupation the categories file does not list) are left out; their
    count is in ``result.attrs["uncategorised"]``. Raises :class:`CorpusAuditError` for a
    missing column or a label outside female / male / ambiguous.
    """
    frame = _check_labels(labels)
    uncategorised = int(frame["category"].isna().sum())
    frame = frame[frame["category"].notna()]
    keyed = frame.assign(
        prompt_set=frame["prompt_set"].astype(object).where(frame["prompt_set"].notna(), "")
    )
    counts = (
        keyed.groupby([*GROUP_COLUMNS, "label"], dropna=False)
        .size()
        .unstack("label", fill_value=0)
        .reindex(columns=list(LABELS), fill_value=0)
        .reset_index()
    )
    lookup = _official_lookup(official)
    rows = []
    for rec in counts.to_dict("records"):
        f, m, a = int(rec["female"]), int(rec["male"]), int(rec["ambiguous"])
        n = f + m + a
        row: dict[str, Any] = {c: rec[c] for c in GROUP_COLUMNS}
        row["prompt_set"] = row["prompt_set"] or None
        row.update({"n_images": n, "n_female": f, "n_male": m, "n_ambiguous": a})
        for name, k in (("pct_female", f), ("pct_male", m), ("pct_ambiguous", a)):
            lo, hi = wilson_interval(k, n, confidence)
            row.update({name: percent(k, n), f"{name}_low": lo, f"{name}_high": hi})
        lo, hi = wilson_interval(f, f + m, confidence)
        row.update({"percent_female": percent(f, f + m), "ci_low": lo, "ci_high": hi})
        ref = lookup.get((rec["language"], rec["category"]), {})
        row.update({c: ref.get(c) for c in OFFICIAL_COLUMNS})
        pf, off = row["percent_female"], row["official_pf"]
        row["gap_pp"] = None if pf is None or off is None else pf - off
        rows.append(row)
    result = pd.DataFrame(rows, columns=list(CATEGORY_COLUMNS))
    result = result.sort_values(list(GROUP_COLUMNS), na_position="first", kind="stable")
    result = result.reset_index(drop=True)
    result.attrs["uncategorised"] = uncategorised
    return result


def _official_lookup(official: Any | None) -> dict[tuple[str, str], dict[str, Any]]:
    if official is None:
        return {}
    missing = [c for c in ("language", "category", *OFFICIAL_COLUMNS) if c not in official]
    if missing:
        raise CorpusAuditError(
            f"category distribution: the official table lacks the column(s) {', '.join(missing)}"
        )
    out = {}
    for rec in official.to_dict("records"):
        value = rec["official_pf"]
        rec["official_pf"] = None if value is None or value != value else float(value)  # NaN
        out[(rec["language"], rec["category"])] = rec
    return out


def official_table(
    stats_by_language: Mapping[str, Any],
    categories: Any,
    occupations: Iterable[str] | None = None,
) -> Any:
    """Official %female per (language, category) for :func:`category_distribution`.

    ``stats_by_language``: ``{language: OfficialStats}``, e.g. ``{"en": US BLS, "de": your
    German file}``: a prompt language is compared with the statistics of the country whose
    figures you give for it. ``categories``: a ``CategoryMap``; ``occupations``: the prompt
    set's occupations (a category without its own row averages these; see
    :func:`corpus_audit.methods.lexicon.official_stats.category_statistics`).
    """
    wanted = list(occupations) if occupations is not None else None
    frames = []
    for language, stats in stats_by_language.items():
        table = category_statistics(stats, categories, wanted)
        table.insert(0, "language", language)
        frames.append(table)
    columns = ["language", "category", *OFFICIAL_COLUMNS]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]
