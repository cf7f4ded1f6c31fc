"""The summary of the CLIP image-image similarity rows (``image_similarity``): per (model,
strategy) the mean of ``mean_cosine`` (in [-1, 1]) over its (occupation, prompt) sets, and its
relative change against the model's keyword subsets, in %. The ``analyze`` stage prints it
and the report shows it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from corpus_audit.methods.amplification import strategy_sort_key


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, strategy): mean of ``mean_cosine`` over its (occupation, prompt) sets and
    the relative change against the model's keyword subsets in % (None without keyword)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if r["mean_cosine"] is not None:
            groups[(r["model_id"], r["strategy"])].append(r["mean_cosine"])
    means = {k: float(np.mean(v)) for k, v in groups.items()}
    out = []
    for model, strategy in sorted(means, key=lambda k: (k[0], strategy_sort_key(k[1]))):
        base = means.get((model, "keyword"))
        mean = means[(model, strategy)]
        out.append(
            {
                "model_id": model,
                "strategy": strategy,
                "sets": len(groups[(model, strategy)]),
                "mean_cosine": mean,
                "change_vs_keyword_pct": None
                if base is None or strategy == "keyword" or abs(base) < 1e-12
                else 100.0 * (mean - base) / abs(base),
            }
        )
    return out
