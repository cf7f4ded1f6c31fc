"""Official statistics: % women per occupation or per occupational category, with provenance.

File format (CSV, UTF-8; a line starting with ``#`` is a comment; docs/preferences.md):

=================  ===========================================================================
column             meaning
=================  ===========================================================================
occupation         an occupation key (lower case English, as in the prompt tables), or empty
category           a category name (as in the categories file, any case), or empty;
                   each row fills exactly one of ``occupation`` and ``category`` (a file may
                   have only one of the two columns)
percent_female     % women among the employed, 0-100; empty = no statistic
source             who published the figure (and the table), free text, required
year               the reference year, an integer (1900-2100), required
country            ISO 3166-1 alpha-2 code of the population (``US``, ``DE``), required
note               optional; an empty ``percent_female`` whose note reads ``same as OTHER``
                   takes OTHER's value (OTHER on the same level)
employed           optional; number of employed persons (digits only), used to weight the
                   occupations of a category when the file gives no row for the category
=================  ===========================================================================

``labor_stats_us_bls2024_pst.csv`` (U.S. BLS 2024, 40 PST occupations) is in this format and
still reads with :func:`corpus_audit.methods.lexicon.load_labor_stats`, which ignores the extra
columns. ``official_stats_template.csv`` lists the six MAGBIG categories with empty values for
a user to fill (e.g. with the German federal employment agency's figures).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit.methods.lexicon import LexiconError, resolve_path
from corpus_audit.methods.lexicon.csvfile import read_rows
from corpus_audit.methods.lexicon.prompt_sets import CategoryMap

OCCUPATION = "occupation"
CATEGORY = "category"
REQUIRED = ("percent_female", "source", "year", "country")
_COUNTRY = re.compile(r"^[A-Z]{2}$")

OFFICIAL_CATEGORY_COLUMNS = (
    "category",
    "official_pf",
    "official_source",
    "official_year",
    "official_country",
    "official_basis",
    "official_n_occupations",
)
OFFICIAL_OCCUPATION_COLUMNS = (
    "occupation",
    "category",
    "official_key",
    "official_pf",
    "official_source",
    "official_year",
    "official_country",
)


@dataclass(frozen=True)
class OfficialStat:
    """One row: ``level`` is ``occupation`` or ``category``; ``key`` the occupation key (lower
    case) or the category as written; ``percent_female`` in [0, 100] or None; ``line`` where it
    is in the file."""

    level: str
    key: str
    percent_female: float | None
    source: str
    year: int
    country: str
    note: str
    employed: float | None
    line: int


@dataclass(frozen=True)
class OfficialStats:
    """The rows of one statistics file, read by :func:`load_official_stats`."""

    path: Path
    rows: tuple[OfficialStat, ...]

    def get(self, level: str, key: str) -> OfficialStat | None:
        wanted = key.casefold() if level == CATEGORY else key
        return next(
            (
                r
                for r in self.rows
                if r.level == level and (r.key.casefold() if level == CATEGORY else r.key) == wanted
            ),
            None,
        )

    def frame(self) -> Any:
        """DataFrame with the :class:`OfficialStat` fields as columns."""
        fields = list(OfficialStat.__dataclass_fields__)
        return pd.DataFrame([asdict(r) for r in self.rows], columns=fields)


def _number(path: Path, line: int, column: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan  # reported below with the infinities
    if not math.isfinite(value):
        raise LexiconError(f"{path}:{line}: {column} {raw!r} is not a finite number")
    return value


def _parse_row(path: Path, line: int, row: dict[str, str]) -> tuple[OfficialStat, str | None]:
    """One row and, for an empty value noted ``same as OTHER``, OTHER."""
    occupation = " ".join(row.get(OCCUPATION, "").strip().lower().split())
    category = " ".join(row.get(CATEGORY, "").split())
    if bool(occupation) == bool(category):
        raise LexiconError(
            f"{path}:{line}: fill exactly one of 'occupation' and 'category' "
            f"(got {'both' if occupation else 'neither'})"
        )
    level, key = (OCCUPATION, occupation) if occupation else (CATEGORY, category)
    source = row["source"].strip()
    if not source:
        raise LexiconError(f"{path}:{line}: empty source (who published the figure)")
    year_raw = row["year"].strip()
    if not re.fullmatch(r"\d{4}", year_raw) or not 1900 <= int(year_raw) <= 2100:
        raise LexiconError(f"{path}:{line}: year {year_raw!r} is not a year (1900-2100)")
    country = row["country"].strip().upper()
    if not _COUNTRY.match(country):
        raise LexiconError(
            f"{path}:{line}: country {row['country']!r} is not an ISO 3166 two-letter code"
        )
    note = row.get("note", "").strip()
    raw = row["percent_female"].strip()
    value: float | None = None
    same_as = None
    if raw:
        value = _number(path, line, "percent_female", raw)
        if not 0 <= value <= 100:
            raise LexiconError(f"{path}:{line}: percent_female {value} is not in [0, 100]")
    elif note.lower().startswith("same as "):
        same_as = note[len("same as ") :].strip()
    employed_raw = row.get("employed", "").strip()
    employed = None
    if employed_raw:
        if not employed_raw.isdigit():
            raise LexiconError(
                f"{path}:{line}: employed {employed_raw!r} is not a whole number (digits only, "
                "no thousands separators)"
            )
        employed = float(employed_raw)
    stat = OfficialStat(level, key, value, source, int(year_raw), country, note, employed, line)
    return stat, same_as


def load_official_stats(spec: str, base: Path | None = None) -> OfficialStats:
    """Read an official-statistics CSV (format in the module docstring).

    Raises :class:`LexiconError` naming the file and line: a missing column, a row with both or
    neither key, a duplicate key, a value outside [0, 100], a bad year or country code, a
    ``same as`` note naming a key that is not in the file.
    """
    path = resolve_path(spec, base)
    header, rows = read_rows(path, comments=True)
    missing = [c for c in REQUIRED if c not in header]
    if OCCUPATION not in header and CATEGORY not in header:
        missing.insert(0, "occupation or category")
    if missing:
        raise LexiconError(f"{path}: needs the column(s) {', '.join(missing)}")
    parsed: list[OfficialStat] = []
    pending: list[tuple[int, str]] = []
    seen: dict[tuple[str, str], int] = {}
    for line, fields in rows:
        stat, same_as = _parse_row(path, line, dict(zip(header, fields, strict=True)))
        ident = (stat.level, stat.key.casefold())
        if ident in seen:
            raise LexiconError(
                f"{path}:{line}: duplicate {stat.level} {stat.key!r} (first on line {seen[ident]})"
            )
        seen[ident] = line
        if same_as is not None:
            pending.append((len(parsed), same_as))
        parsed.append(stat)
    if not parsed:
        raise LexiconError(f"{path}: no statistics (only a header)")
    for index, other in pending:
        stat = parsed[index]
        target = next(
            (r for r in parsed if r.level == stat.level and r.key.casefold() == other.casefold()),
            None,
        )
        if target is None:
            raise LexiconError(
                f"{path}:{stat.line}: {stat.key!r} is 'same as {other}', which is not in the file"
            )
        parsed[index] = OfficialStat(**{**asdict(stat), "percent_female": target.percent_female})
    return OfficialStats(path, tuple(parsed))


def _joined(values: Iterable[Any]) -> str | None:
    """Distinct values as text, sorted and joined by ``; `` (None when there are none)."""
    distinct = sorted({str(v) for v in values if v is not None})
    return "; ".join(distinct) if distinct else None


def occupation_row(stats: OfficialStats, occupation: str, categories: CategoryMap | None):
    """The statistic of ``occupation`` by its own key, else by its aliases in order; None."""
    key = " ".join(occupation.lower().split())
    entry = categories.entries.get(key) if categories is not None else None
    for name in (key, *(entry.aliases if entry else ())):
        found = stats.get(OCCUPATION, name)
        if found is not None:
            return found
    return None


def occupation_statistics(
    stats: OfficialStats, occupations: Iterable[str], categories: CategoryMap | None = None
) -> Any:
    """The official row of each occupation (by key or alias): DataFrame with the columns
    :data:`OFFICIAL_OCCUPATION_COLUMNS` (``official_pf`` in [0, 100], ``official_year`` an
    integer); where the file has no row (or no value) for the occupation they are missing
    (pandas NA)."""
    rows = []
    for occupation in occupations:
        found = occupation_row(stats, occupation, categories)
        rows.append(
            {
                "occupation": occupation,
                "category": categories.category(occupation) if categories else None,
                "official_key": found.key if found else None,
                "official_pf": found.percent_female if found else None,
                "official_source": found.source if found else None,
                "official_year": found.year if found else None,
                "official_country": found.country if found else None,
            }
        )
    frame = pd.DataFrame(rows, columns=list(OFFICIAL_OCCUPATION_COLUMNS))
    frame["official_year"] = frame["official_year"].astype("Int64")
    return frame


def category_statistics(
    stats: OfficialStats, categories: CategoryMap, occupations: Iterable[str] | None = None
) -> Any:
    """Official %female per category: DataFrame with :data:`OFFICIAL_CATEGORY_COLUMNS`
    (``official_pf`` in [0, 100]; ``official_source``, ``official_year`` and
    ``official_country`` are text, distinct values joined by ``; `` when the averaged rows
    differ; missing values are pandas NA).

    A category row of the file is used as it is (``official_basis`` = ``category``). Otherwise
    the occupation rows (by key or alias) of the category's ``occupations`` (default: all the
    categories file lists) are averaged: weighted by ``employed`` when every one of them has
    it (``employment-weighted mean of N occupations``), else unweighted (``mean of N
    occupations``; a rough figure: occupations differ in size). No value: None throughout.
    A category row whose name is not a category of ``categories`` raises
    :class:`LexiconError` naming the file and line (a typo would silently lose the comparison).
    """
    for row in stats.rows:
        if row.level == CATEGORY and categories.canonical(row.key) is None:
            raise LexiconError(
                f"{stats.path}:{row.line}: category {row.key!r} is not one of "
                f"{', '.join(categories.categories)} ({categories.path.name})"
            )
    wanted = None if occupations is None else {" ".join(o.lower().split()) for o in occupations}
    out = []
    for category in categories.categories:
        row = stats.get(CATEGORY, category)
        if row is not None and row.percent_female is not None:
            value, used, basis = row.percent_female, [row], CATEGORY
        else:
            members = [o for o in categories.occupations(category) if wanted is None or o in wanted]
            used = [
                r
                for r in (occupation_row(stats, o, categories) for o in members)
                if r is not None and r.percent_female is not None
            ]
            value, basis = _mean(used)
        out.append(
            {
                "category": category,
                "official_pf": value,
                "official_source": _joined(r.source for r in used) if value is not None else None,
                "official_year": _joined(r.year for r in used) if value is not None else None,
                "official_country": _joined(r.country for r in used) if value is not None else None,
                "official_basis": basis,
                "official_n_occupations": 0 if basis == CATEGORY else len(used),
            }
        )
    return pd.DataFrame(out, columns=list(OFFICIAL_CATEGORY_COLUMNS))


def _mean(rows: list[OfficialStat]) -> tuple[float | None, str | None]:
    if not rows:
        return None, None
    values = [r.percent_female for r in rows if r.percent_female is not None]
    weights = [r.employed for r in rows]
    if all(w is not None for w in weights) and sum(weights) > 0:  # type: ignore[arg-type]
        total = sum(weights)  # type: ignore[arg-type]
        value = sum(v * w for v, w in zip(values, weights, strict=True)) / total  # type: ignore[operator]
        return value, f"employment-weighted mean of {len(rows)} occupations"
    return sum(values) / len(values), f"mean of {len(rows)} occupations"
