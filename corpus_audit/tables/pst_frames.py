"""Between the PST DataFrames and the study tables (``sql/schema/002_pst.sql``).

The DataFrames of :mod:`corpus_audit.methods.pst` name two columns after SQL keywords; the tables call
them ``group_name`` (``group``) and ``role_order`` (``order``). Frames are inserted by column
name through a registered view; table names are constants of the code, never config text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corpus_audit.core.store import insert_rows, table_rows
from corpus_audit.methods.lexicon.pst import PstPrompt

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from corpus_audit.core.store import Study

TO_SQL = {"group": "group_name", "order": "role_order"}
FROM_SQL = {v: k for k, v in TO_SQL.items()}


def insert_frame(
    con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame, **extra: Any
) -> int:
    """Insert ``frame`` (plus constant columns ``extra``) into ``table`` by column name;
    returns the rows inserted."""
    if frame.empty:
        return 0
    data = frame.rename(columns=TO_SQL).assign(**extra)
    data = data.astype(object).where(data.notna(), None)  # pandas NA/NaN -> SQL NULL
    return insert_rows(con, table, data)


def read_frame(
    study: Study, table: str, where: str = "TRUE", params: list[Any] | None = None
) -> pd.DataFrame:
    """Rows of ``table`` matching ``where`` (SQL written in code; values in ``params``), with
    the DataFrame column names of :mod:`corpus_audit.methods.pst`."""
    frame = table_rows(study.con, table, where, params).df()
    return frame.rename(columns=FROM_SQL)


def stored_prompts(study: Study) -> dict[str, PstPrompt]:
    """The study's ``pst_prompts`` as :class:`PstPrompt` objects, by prompt id."""
    frame = read_frame(study, "pst_prompts")
    out = {}
    for row in frame.to_dict("records"):
        clean = {k: (None if v is None or v != v else v) for k, v in row.items()}
        out[str(clean["prompt_id"])] = PstPrompt(**clean)
    return out
