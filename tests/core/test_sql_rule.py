"""One way to run SQL: no module but the store builds SQL text at run time.

A query is one of
- a file under ``corpus_audit/sql/``, run by ``Study.sql`` / ``execute_sql`` (named parameters)
  or ``execute_sql_rows`` (a batch insert) — ``test_layers`` checks no other module reads one;
- a string written in the code (a literal, or a constant holding one), every value bound as a
  parameter;
- a table write or read by name through the store (``insert_rows``, ``clear_tables``,
  ``delete_keys``, ``drop_tables``, ``table_rows``, ``Study.count``, ``Study.fingerprint``),
  where the names are checked as plain identifiers (``identifier``).

So no module outside ``corpus_audit/core/store.py`` hands DuckDB a query it put together
(an f-string, a ``+`` or ``%`` of strings, ``str.format``, ``" ".join``): the one place that
writes names into SQL text is the store. Read with :mod:`ast`; the checker is tested on
snippets of the code it replaced, so it can fail.
"""

from __future__ import annotations

import ast

import pytest
from test_layers import PACKAGE, package_modules

from corpus_audit.core.store import identifier

#: methods that take SQL text as their first argument (DuckDB's and the store's)
SQL_METHODS = frozenset({"execute", "executemany", "sql", "count", "column", "query"})
STORE = f"{PACKAGE}.core.store"


def _built(node: ast.AST) -> bool:
    """Whether ``node`` puts a string together at run time."""
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("format", "join", "replace")
    return False


def built_queries(source: str) -> list[str]:
    """``line: call`` for every SQL call in ``source`` whose query is put together at run time."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_METHODS
            and node.args
            and _built(node.args[0])
        ):
            found.append(f"{node.lineno}: .{node.func.attr}({ast.unparse(node.args[0])[:70]})")
    return found


def test_no_module_but_the_store_builds_sql_text() -> None:
    found = [
        f"{name}:{hit}"
        for name, path in package_modules().items()
        if name != STORE
        for hit in built_queries(path.read_text(encoding="utf-8"))
    ]
    assert not found, "use a literal, a sql/ file or the store's table helpers:\n" + "\n".join(
        found
    )


OFFENDING = {
    "delete by table name": 'for t in TABLES:\n    con.execute(f"DELETE FROM {t}")',
    "insert by name": 'con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")',
    "count of a quoted name": "study.count(f'\"{t}\"')",
    "columns joined": 'con.execute("SELECT " + ", ".join(cols) + " FROM t")',
    "percent format": 'con.execute("DELETE FROM %s" % table)',
    "format": 'study.con.execute("SELECT * FROM {}".format(table)).df()',
    "joined statement": 'con.execute(" ".join(parts))',
}


@pytest.mark.parametrize("snippet", OFFENDING.values(), ids=list(OFFENDING))
def test_the_rule_fires_on_built_queries(snippet: str) -> None:
    assert built_queries(snippet)


def test_the_rule_lets_literals_constants_and_files_through() -> None:
    fine = (
        'con.execute("DELETE FROM labels WHERE image_id = ?", [image_id])\n'
        'con.execute(f"SELECT 1")\n'  # an f-string without a placeholder is a literal
        "con.execute(QUERIES['summary'])\n"
        'study.sql("select/40_samples", seed=seed)\n'
        "clear_tables(con, *ANALYSIS_TABLES)\n"
    )
    assert built_queries(fine) == []


@pytest.mark.parametrize("name", ["labels", "_select_rows", "pst_people2"])
def test_identifiers_the_store_writes_into_sql(name: str) -> None:
    assert identifier(name) == name


@pytest.mark.parametrize("name", ["", "1st", "labels; DROP TABLE x", 'a"b', "a b", "a.b", None])
def test_anything_else_is_refused(name) -> None:
    with pytest.raises(ValueError, match="not a plain SQL identifier"):
        identifier(name)
