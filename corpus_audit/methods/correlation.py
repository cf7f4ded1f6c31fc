"""Correlation of training %female with explicit female indicators (METHODS 1.6).

Across occupations: Pearson r (and two-sided p) between the %female of an occupation's
training images (keyword sample, labelled images) and the share of *those same images'*
captions that carry a female indicator (label ``female`` or ``both``). The paper reports
r = -0.458 (p < 0.05) on LAION: the more male an occupation's images, the more often its
women are explicitly marked in the text. Occupations without labelled training images or
without indicator labels are left out; ``n_occupations`` says how many were used.
"""

from __future__ import annotations

from collections.abc import Iterable

from corpus_audit.methods.stats import pearson

PAPER_R = -0.458  # Seshadri et al., LAION


def indicator_correlation(rows: Iterable[dict], strategy: str = "keyword") -> dict:
    """The ``indicator_correlation`` row from ``occupation_indicators`` rows.

    Each row needs ``training_pf`` and ``pct_female_indicator`` (0-100, or None).
    """
    usable = [
        r
        for r in rows
        if r.get("training_pf") is not None and r.get("pct_female_indicator") is not None
    ]
    r, p, n = pearson(
        [u["training_pf"] for u in usable], [u["pct_female_indicator"] for u in usable]
    )
    return {"strategy": strategy, "n_occupations": n, "r": r, "p_value": p}
