"""Read the analysis tables back (for the report, the notebook and the CLI summary)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.amplification import paper_layout


def rows(study: Study, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Result of ``sql`` as a list of dicts."""
    cur = study.con.execute(sql, params or [])
    return dicts(cur)


def summary_table(study: Study) -> list[dict[str, Any]]:
    """``amplification_summary`` rows, ordered by model, strategy, template (average last)."""
    return rows(
        study,
        "SELECT * FROM amplification_summary ORDER BY model_id, strategy, template_id NULLS LAST",
    )


def table3(study: Study) -> dict[str, list[dict[str, Any]]]:
    """The paper's Table 3 layout: ``{model: [strategy row, ...]}`` (see ``paper_layout``)."""
    templates = [r["template_id"] for r in dicts(study.sql("analyze/templates"))]
    return paper_layout(summary_table(study), templates=templates or (1, 2, 3, 4))


def amplification_pairs(study: Study) -> list[dict[str, Any]]:
    """Every ``amplification`` row, ordered by model, strategy, template, occupation."""
    return rows(
        study,
        "SELECT * FROM amplification ORDER BY model_id, strategy, template_id, occupation",
    )


def table3_frame(study: Study):
    """Table 3 as a pandas DataFrame: index (model, strategy), columns #1..#4 and average;
    cells are mean amplification in percentage points."""
    records = []
    for model, lines in table3(study).items():
        for line in lines:
            rec = {"model": model, "strategy": line["strategy"]}
            for col, cell in line.items():
                if col != "strategy":
                    rec[col] = None if cell is None else cell.get("mean")
            records.append(rec)
    if not records:
        return pd.DataFrame(columns=["model", "strategy"]).set_index(["model", "strategy"])
    return pd.DataFrame.from_records(records).set_index(["model", "strategy"])
