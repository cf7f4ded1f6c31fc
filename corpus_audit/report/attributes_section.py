"""The report's perceived age and skin tone section (docs/attributes.md).

Reads only the aggregate tables of the analysis (``attribute_*``): no per-image value ever
reaches the page. Per (model, strategy) the pooled multi-class amplification of each
attribute, the per-class change, the 18 gender x tone x age cells (worst cell, BH q-values),
the gaps to the BLS tables, and per occupation the shares of the coarse age and tone groups.
Skin tone is shown as CIELAB lightness (L*) bands with an "uncalibrated" banner while no
annotator has mapped it to the Monk scale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corpus_audit.core.store import Study, dicts
from corpus_audit.report.attribute_figures import heatmap_entries
from corpus_audit.report.findings import Section, _interval, _level

ATTRIBUTE_NAMES = {
    "gender": "perceived gender",
    "age_bin": "perceived age bin",
    "age_group": "perceived age group",
    "skin_tone": "skin lightness band (L*, uncalibrated)",
    "tone_group": "skin tone group (L*, uncalibrated)",
    "monk": "Monk skin tone (calibrated on annotator labels)",
}
EMPTY = (
    "not measured (it needs the label stage's perceived age and skin tone on training and "
    "generated images of the same occupations; label.age and label.skin_tone are on by "
    "default)"
)


# the section's data: key -> a fixed query of the analysis' attribute tables (no parameters)
QUERIES = {
    "amplification": "SELECT * FROM attribute_amplification WHERE occupation = '*' "
    "ORDER BY model_id, strategy, attribute",
    "change": "SELECT * FROM attribute_change WHERE occupation = '*' "
    "ORDER BY model_id, strategy, attribute, class_order",
    "cells": "SELECT * FROM attribute_intersections ORDER BY model_id, strategy, abs(change) DESC",
    "groups": "SELECT source, strategy, occupation, attribute, class, n, share, share_low, "
    "share_high, corrected_share, corrected_low, corrected_high FROM attribute_distribution "
    "WHERE attribute IN ('age_group', 'tone_group') "
    "ORDER BY occupation = '*' DESC, occupation, source, strategy, attribute, class_order",
    "cell_tests": "SELECT DISTINCT model_id, strategy, independence_p, corrected_note "
    "FROM attribute_intersections ORDER BY model_id, strategy",
    "official": "SELECT * FROM attribute_official WHERE attribute IN ('median_age', 'age_group') "
    "ORDER BY occupation, attribute, class, source, strategy",
    "summary": "SELECT * FROM attribute_summary WHERE occupation = '*' "
    "ORDER BY attribute, source, strategy",
    "monk": "SELECT source, strategy, class, class_order, n, share, share_low, share_high "
    "FROM attribute_distribution WHERE attribute = 'monk' AND occupation = '*' "
    "ORDER BY source, strategy, class_order",
    "errors": "SELECT * FROM attribute_errors ORDER BY attribute, source, tone_group NULLS FIRST",
}


def _rows(study: Study, sql: str) -> list[dict[str, Any]]:
    return dicts(study.con.execute(sql))


def attributes_section(study: Study, confidence: float, out_dir: Path | None = None) -> Section:
    """The section's data and findings, or its one-line reason when nothing was measured;
    its heat-maps are written to ``out_dir`` (the report's figures folder) when given."""
    section = Section("attributes", "Perceived age and skin tone")
    if not study.table_exists("attribute_amplification") or not study.count(
        "attribute_distribution"
    ):
        section.empty = EMPTY
        return section
    section.data = {
        "level": _level(confidence),
        "names": ATTRIBUTE_NAMES,
        **{key: _rows(study, sql) for key, sql in QUERIES.items()},
        "figures": heatmap_entries(
            _rows(study, "SELECT * FROM attribute_change WHERE occupation <> '*'"), out_dir
        ),
    }
    amp = section.data["amplification"]
    section.findings = _findings(section.data, confidence)
    if not amp:
        section.findings.insert(
            0,
            "Measured, not compared: no occupation has measured faces on both the training "
            "and the generated side.",
        )
    return section


def _findings(data: dict[str, Any], confidence: float) -> list[str]:
    """One sentence per (model, strategy): A_K of the age and tone groups with their intervals
    and the mean shifts; then the worst intersectional cell."""
    level = _level(confidence)
    out = []
    by_pair: dict[tuple[str, str], dict[str, dict]] = {}
    for r in data["amplification"]:
        by_pair.setdefault((r["model_id"], r["strategy"]), {})[r["attribute"]] = r
    for (model, strategy), rows in by_pair.items():
        parts = []
        measures = (("age_group", "years"), ("tone_group", "L*"), ("monk", "Monk tones"))
        for attribute, unit in measures:
            r = rows.get(attribute)
            if r is None or r["a_k"] is None:
                continue
            text = (
                f"{ATTRIBUTE_NAMES[attribute]} A_K {r['a_k']:+.1f} pp "
                f"{_interval(r['a_k_low'], r['a_k_high'], 1, sign=True)}"
            )
            if r["mean_shift"] is not None:
                text += (
                    f", mean shift {r['mean_shift']:+.1f} {unit} "
                    f"{_interval(r['mean_shift_low'], r['mean_shift_high'], 1, sign=True)}"
                )
            parts.append(text)
        if parts:
            out.append(
                f"{model} vs training ({strategy}), pooled over "
                f"{rows[next(iter(rows))]['n_generated']} generated faces: "
                + "; ".join(parts)
                + f" ({level} bootstrap intervals at equal n; "
                + (
                    "Monk tones calibrated on annotator labels, L* groups uncalibrated)."
                    if "monk" in rows
                    else "skin tone uncalibrated)."
                )
            )
    worst = [c for c in data["cells"] if c["worst"]]
    for c in worst[:2]:
        out.append(
            f"{c['model_id']} ({c['strategy']}): the cell that changed most is "
            f"{c['gender']}, {c['tone_group']}, {c['age_group']}: {c['change']:+.1f} pp "
            f"{_interval(c['change_low'], c['change_high'], 1, sign=True)} "
            f"({level} Newcombe; BH q = {c['q_value']:.3g})."
            if c["q_value"] is not None
            else f"{c['model_id']}: no intersectional cell could be tested."
        )
    return out
