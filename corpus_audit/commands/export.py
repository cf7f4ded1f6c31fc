"""``corpus-audit export DIR``: the study's result tables as Parquet (or CSV) files with a
``manifest.json`` saying what each table and column holds and where the numbers come from.

Every table the schema migrations create is a result table, except the bookkeeping ones
(:data:`BOOKKEEPING`: schema version, stage runs, unfinished marks); ``--tables`` picks some.
Each table is written whole, rows sorted by all columns (``ORDER BY ALL``) so two exports of
the same study are the same files. Parquet keeps every type as DuckDB gives it to Arrow; CSV
writes lists, structs and maps as JSON text and binary as hex.

``manifest.json`` holds, per table, the file, the row count and the columns with their type,
their meaning (the column's comment in ``corpus_audit/sql/schema/*.sql``) and their display
label (``corpus_audit/core/columns.csv``); for the study: the config hash
(:meth:`StudyConfig.section_hash`), the effective config, and each stage's latest run
(status, finish time, config hash and provenance as ``stage_runs`` records them).

The connection of a study may not write files (:data:`~corpus_audit.core.store.LOCKED_SETTINGS`),
so rows are fetched as Arrow and written by pyarrow; table names come from the schema, never
from the command line (a name given there is only compared with them).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_audit.core.catalogue import STAGE_NAMES
from corpus_audit.core.errors import StudyError, printable
from corpus_audit.core.fileio import write_text_atomic

if TYPE_CHECKING:  # DuckDB and pyarrow load when a table is read: `--help` stays light
    import pyarrow as pa

    from corpus_audit.core.store import Study

FORMATS = ("parquet", "csv")
MANIFEST = "manifest.json"
BOOKKEEPING = frozenset({"schema_version", "stage_runs", "stage_unfinished"})

_CREATE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)\s*\(", re.IGNORECASE)
_ALTER = re.compile(
    r"ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+)[^-]*(?:--\s*(.*))?$", re.IGNORECASE
)
_NOT_COLUMNS = {"PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT"}


@dataclass(frozen=True)
class ExportResult:
    """What one export wrote: the folder, the manifest, and ``table -> rows``."""

    out_dir: Path
    manifest: Path
    rows: dict[str, int]


def result_tables() -> list[str]:
    """Every result table of the schema, sorted by name (module docstring)."""
    from corpus_audit.core.store import expected_catalog

    return sorted(expected_catalog().objects["table"] - BOOKKEEPING)


@cache
def schema_comments() -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """``(table -> description, table -> column -> meaning)`` from the ``--`` comments of
    ``corpus_audit/sql/schema/*.sql``: the comment block right above a ``CREATE TABLE`` and
    the comment after a column (continued on comment-only lines below it)."""
    tables: dict[str, str] = {}
    columns: dict[str, dict[str, str]] = {}
    folder = resources.files("corpus_audit").joinpath("sql", "schema")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            _parse_schema(entry.read_text(encoding="utf-8"), tables, columns)
    return tables, columns


def _parse_schema(text: str, tables: dict[str, str], columns: dict[str, dict[str, str]]) -> None:
    block: list[str] = []  # the comment lines just read (a blank line ends a block)
    table: str | None = None  # inside CREATE TABLE (...)
    last: str | None = None  # the column the last comment belongs to
    for raw in text.splitlines():
        code, _, comment = raw.strip().partition("--")
        code, comment = code.strip(), comment.strip()
        if table is None:
            created = _CREATE.search(code)
            altered = _ALTER.search(raw.strip())
            if created:
                table, last = created.group(1), None
                if block:
                    tables.setdefault(table, " ".join(block))
                columns.setdefault(table, {})
            elif altered:
                columns.setdefault(altered.group(1), {}).setdefault(
                    altered.group(2), (altered.group(3) or "").strip()
                )
            block = [*block, comment] if not code and comment else []
            continue
        if not code and comment and last:  # a comment continued on its own line
            columns[table][last] = f"{columns[table][last]} {comment}".strip()
            continue
        closing = code.startswith(")")
        names = (
            [p.split()[0].strip('"') for p in code.split(",") if p.strip()] if not closing else []
        )
        names = [n for n in names if n.upper() not in _NOT_COLUMNS and re.fullmatch(r"\w+", n)]
        if names:
            last = names[-1]
            for name in names:
                columns[table].setdefault(name, "")
            if comment:
                columns[table][last] = comment
        if closing or code.endswith(");"):
            table, block = None, []


@cache
def column_labels() -> dict[str, str]:
    """``column -> display label`` of ``corpus_audit/core/columns.csv``."""
    path = resources.files("corpus_audit").joinpath("core", "columns.csv")
    with path.open(encoding="utf-8", newline="") as fh:
        return {row["key"]: row["label"] for row in csv.DictReader(fh)}


def resolve_tables(names: list[str] | None) -> list[str]:
    """The result tables to export: all of them, or ``names`` (each a result table; an
    unknown one is a :class:`StudyError` listing them)."""
    known = result_tables()
    if not names:
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise StudyError(
            f"export: unknown table {printable(unknown[0])!r} (tables: {', '.join(known)})"
        )
    return [t for t in known if t in set(names)]


def read_table(study: Study, table: str) -> pa.Table:
    """Table ``table`` (a name :func:`result_tables` gives) as Arrow, rows sorted by all
    columns."""
    if table not in result_tables():
        raise StudyError(f"unknown table {printable(table)!r} (tables: see `export --help`)")
    quoted = '"' + table + '"'  # a schema name (\w+), compared above, never user text
    return study.con.sql(f"SELECT * FROM {quoted} ORDER BY ALL").to_arrow_table()


def export_tables(
    study: Study,
    out_dir: Path | None = None,
    *,
    fmt: str = "parquet",
    tables: list[str] | None = None,
) -> ExportResult:
    """Write the result tables (or ``tables``) of ``study`` as ``<table>.parquet`` / ``.csv``
    into ``out_dir`` (default ``<study>/export``) and ``manifest.json`` last."""
    if fmt not in FORMATS:
        raise StudyError(f"export: format {printable(fmt)!r} is not one of {', '.join(FORMATS)}")
    chosen = resolve_tables(tables)
    out = Path(out_dir) if out_dir is not None else study.root / "export"
    out.mkdir(parents=True, exist_ok=True)
    descriptions, meanings = schema_comments()
    labels = column_labels()
    entries = []
    rows: dict[str, int] = {}
    for table in chosen:
        data = read_table(study, table)
        path = out / f"{table}.{fmt}"
        _write(data, path, fmt)
        rows[table] = data.num_rows
        entries.append(
            {
                "table": table,
                "file": path.name,
                "rows": data.num_rows,
                "description": descriptions.get(table, ""),
                "columns": [
                    {
                        "name": field.name,
                        "type": str(field.type),
                        "meaning": meanings.get(table, {}).get(field.name, ""),
                        "label": labels.get(field.name, field.name),
                    }
                    for field in data.schema
                ],
            }
        )
    manifest = write_text_atomic(
        out / MANIFEST,
        json.dumps(_manifest(study, fmt, entries), indent=2, sort_keys=False, default=str) + "\n",
    )
    return ExportResult(out, manifest, rows)


def _manifest(study: Study, fmt: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    from corpus_audit import __version__

    runs = {}
    for stage in STAGE_NAMES:
        last = study.last_run(stage)
        if last is not None:
            runs[stage] = {
                "status": last["status"],
                "finished_at": str(last["finished_at"]),
                "rows_in": last["rows_in"],
                "rows_out": last["rows_out"],
                "config_hash": last["config_hash"],
                "provenance": last["provenance"],
            }
    return {
        "corpus_audit_version": __version__,
        "exported_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "study": {"name": study.config.study.name, "root": str(study.root.resolve())},
        "config_hash": study.config.section_hash(),
        "config": study.config.to_dict(),
        "format": fmt,
        "tables": entries,
        "stage_runs": runs,
    }


def _write(data: pa.Table, path: Path, fmt: str) -> None:
    """``data`` to ``path`` through a temporary file, so a file is whole or absent."""
    part = path.with_name(path.name + ".part")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, part)
    else:
        import pyarrow.csv as pcsv

        pcsv.write_csv(_csv_ready(data), part)
    part.replace(path)


def _csv_ready(data: pa.Table) -> pa.Table:
    """Lists, structs and maps as JSON text, binary as hex: what CSV can hold."""
    import pyarrow as pa

    out = data
    for i, field in enumerate(data.schema):
        kind = field.type
        if pa.types.is_nested(kind):
            text = [None if v is None else json.dumps(v, default=str) for v in data[i].to_pylist()]
        elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            text = [None if v is None else v.hex() for v in data[i].to_pylist()]
        else:
            continue
        out = out.set_column(i, field.name, pa.array(text, pa.string()))
    return out
