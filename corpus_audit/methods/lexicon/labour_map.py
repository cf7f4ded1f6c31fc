"""Which labour statistic stands beside an occupation's generated %female.

The mapping is data, ``data/labour_stats_map.csv`` (``language,occupation,table,key,source,
note``; its header comment says how it was built): per prompt language and occupation, the
shipped table and the row of it whose ``percent_female`` is the occupation's labour
statistic. :func:`load_labour_map` reads it and the tables it names into
``{(language, occupation): LabourStat}``; an occupation or language it does not list has no
statistic (the caller leaves the comparison empty, never guesses).

Tables: ``occupation`` (or ``sector``) and ``percent_female`` columns, ``#`` comment lines
allowed, optional ``source`` and ``year`` (what ``LabourStat.source`` says unless the map row
gives its own); an empty ``percent_female`` whose ``note`` reads ``same as OTHER`` takes
OTHER's value (as :func:`corpus_audit.methods.lexicon.load_labor_stats`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from corpus_audit.core.errors import LexiconError
from corpus_audit.methods.lexicon import BUILTIN_PREFIX, parse_percent_female, resolve_path
from corpus_audit.methods.lexicon.csvfile import read_rows

DEFAULT_MAP = "builtin:labour_stats_map.csv"
_MAP_COLUMNS = ("language", "occupation", "table", "key", "source", "note")


@dataclass(frozen=True)
class LabourStat:
    """One occupation's labour statistic: % women in [0, 100] and where it comes from."""

    percent_female: float
    source: str


@dataclass(frozen=True)
class _Row:
    percent_female: float | None
    source: str


def load_labour_map(spec: str = DEFAULT_MAP, base: Path | None = None) -> dict[tuple, LabourStat]:
    """``{(language, occupation): LabourStat}`` from the map file ``spec`` (``builtin:`` or a
    path relative to ``base``); rows without a key, or whose table row has no figure, are left
    out. A table named in a ``builtin:`` map is a builtin file too. Raises
    :class:`LexiconError` naming the file and line for a missing column, an unknown table
    row or a figure outside [0, 100]."""
    path = resolve_path(spec, base)
    header, rows = read_rows(path, comments=True)
    missing = [c for c in _MAP_COLUMNS if c not in header]
    if missing:
        raise LexiconError(f"{path}: needs the columns {', '.join(missing)}")
    tables: dict[str, dict[str, _Row]] = {}
    out: dict[tuple, LabourStat] = {}
    for line, fields in rows:
        row = {k: v.strip() for k, v in zip(header, fields, strict=True)}
        key = row["key"].lower()
        if not row["table"] or not key:
            continue
        table_spec = (BUILTIN_PREFIX if spec.startswith(BUILTIN_PREFIX) else "") + row["table"]
        if table_spec not in tables:
            tables[table_spec] = _read_table(resolve_path(table_spec, path.parent))
        found = tables[table_spec].get(key)
        if found is None:
            raise LexiconError(f"{path}:{line}: {row['table']} has no row {row['key']!r}")
        if found.percent_female is None:
            continue
        occupation = " ".join(row["occupation"].lower().split())
        out[(row["language"].lower(), occupation)] = LabourStat(
            found.percent_female, row["source"] or found.source
        )
    return out


def map_digest(spec: str = DEFAULT_MAP, base: Path | None = None) -> str:
    """SHA-256 (16 hex digits) of the map file and every table it names: what the statistics
    beside a generated %female depend on (``analyze`` puts it in its input fingerprint)."""
    path = resolve_path(spec, base)
    header, rows = read_rows(path, comments=True)
    digest = hashlib.sha256(path.read_bytes())
    col = header.index("table") if "table" in header else None
    names = sorted(
        {fields[col].strip() for _, fields in rows if col is not None and fields[col].strip()}
    )
    prefix = BUILTIN_PREFIX if spec.startswith(BUILTIN_PREFIX) else ""
    for name in names:
        digest.update(name.encode())
        digest.update(resolve_path(prefix + name, path.parent).read_bytes())
    return digest.hexdigest()[:16]


def _read_table(path: Path) -> dict[str, _Row]:
    """A statistics table by its lower-cased ``occupation`` (or ``sector``) key."""
    header, rows = read_rows(path, comments=True)
    key_col = "occupation" if "occupation" in header else "sector"
    if key_col not in header or "percent_female" not in header:
        raise LexiconError(f"{path}: needs columns occupation (or sector) and percent_female")
    values: dict[str, _Row] = {}
    same_as: dict[str, str] = {}
    for line, fields in rows:
        row = {k: v.strip() for k, v in zip(header, fields, strict=True)}
        name = row[key_col].lower()
        source = _source(row.get("source", ""), row.get("year", ""))
        raw = row["percent_female"]
        note = row.get("note", "").lower()
        if not raw:
            values[name] = _Row(None, source)
            if note.startswith("same as "):
                same_as[name] = note[len("same as ") :].strip()
            continue
        values[name] = _Row(parse_percent_female(raw, f"{path}:{line}"), source)
    for name, other in same_as.items():
        if other not in values:
            raise LexiconError(f"{path}: '{name}' is 'same as {other}', which is not in the file")
        values[name] = _Row(values[other].percent_female, values[name].source)
    return values


def _source(source: str, year: str) -> str:
    """``source`` with ``year`` appended unless the text already names it."""
    if year and year not in source:
        return f"{source}, {year}" if source else year
    return source
