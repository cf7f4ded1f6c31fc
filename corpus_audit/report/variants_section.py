"""The report's "Caption variants" section: the ``variants`` stage's tables, per pair.

Reads the ``variant_*`` tables (empty when the stage has not run or found one variant only).
Per (baseline, variant) pair: the paired differences over every paired image, the indicator
rates of both variants, the changed indicator transitions with one example each, occupation
mentions kept / gained / lost, the per-occupation differences of the any-indicator and
female-indicator rates, and the caption-prompt similarity. Every caption is corpus or model
text: the template escapes it (autoescape).
"""

from __future__ import annotations

from typing import Any

from corpus_audit.core.store import Study
from corpus_audit.methods.recaption.compare import METRICS
from corpus_audit.tables.read import rows

OCCUPATION_METRICS = ("any_indicator", "female_indicator", "male_indicator")


def variants_section(study: Study) -> dict[str, Any]:
    """``{"pairs": [...]}``: one dict per compared pair, in name order."""
    if not study.table_exists("variant_differences"):
        return {"pairs": []}
    pairs = study.con.execute(
        "SELECT DISTINCT variant_a, variant_b FROM variant_differences ORDER BY ALL"
    ).fetchall()
    return {"pairs": [_pair(study, a, b) for a, b in pairs]}


def _pair(study: Study, a: str, b: str) -> dict[str, Any]:
    ab = [a, b]
    where = "variant_a = ? AND variant_b = ?"
    return {
        "a": a,
        "b": b,
        "differences": rows(
            study,
            f"SELECT * FROM variant_differences WHERE {where} AND occupation IS NULL "
            "ORDER BY list_position(?, metric), metric",
            [*ab, list(METRICS)],
        ),
        "rates": rows(
            study,
            f"SELECT * FROM variant_rates WHERE {where} AND occupation IS NULL ORDER BY variant",
            ab,
        ),
        "transitions": rows(
            study,
            f"SELECT * FROM variant_transitions WHERE {where} AND occupation IS NULL AND changed "
            "AND n_images > 0 ORDER BY n_images DESC, transition",
            ab,
        ),
        "examples": rows(
            study,
            f"SELECT * FROM variant_transition_examples WHERE {where} AND occupation IS NULL "
            "QUALIFY row_number() OVER (PARTITION BY transition ORDER BY image_key) = 1 "
            "ORDER BY transition",
            ab,
        ),
        "mentions": rows(
            study,
            f"SELECT * FROM variant_mention_changes WHERE {where} ORDER BY occupation NULLS FIRST",
            ab,
        ),
        "by_occupation": rows(
            study,
            f"SELECT * FROM variant_differences WHERE {where} AND occupation IS NOT NULL "
            "AND list_contains(?, metric) ORDER BY occupation, metric",
            [*ab, list(OCCUPATION_METRICS)],
        ),
        "similarity": rows(
            study,
            f"SELECT * FROM variant_similarity WHERE {where} AND occupation IS NULL "
            "ORDER BY variant",
            ab,
        ),
    }
