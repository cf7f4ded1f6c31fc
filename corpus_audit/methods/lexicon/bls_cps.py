"""U.S. BLS Current Population Survey tables 11 (2021) and 11b (2025), by occupation.

Table 11 gives, per detailed occupation, % women and % White, Black, Asian and Hispanic or
Latino among the employed; table 11b the employed in thousands per age group and the median
age. Both are shipped in ``data/bls_cps/`` (public domain; README there) and mapped to the
lexicon's occupations by ``data/bls_cps_map.csv``. Reading rules:

- ``level`` is the official table's indentation (0 = major group ... 3-4 = detailed); a row's
  parents are the nearest rows above it with a smaller level (:attr:`CpsRow.parents`).
- An empty cell is the table's dash: no published figure (None).
- Footnote marks (``(1)``, ``*``, trailing ``\u2020``) are stripped from occupation names.
- Rows whose base is below the publication threshold (50 thousand employed) are kept in the
  table but refused for comparison (:func:`official_shares` returns None with a reason).
- Table 11b's stray title row (``Occupation,0,2025.0,...``) is skipped.

All figures are **self-identified** by survey respondents (employed, 16 and over); images give
**perceived** appearance, so a gap between the two is indicative only. Race groups of table 11
do not sum to 100 (several races may be reported; Hispanic or Latino is an ethnicity of any
race). No official statistic of skin tone exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from corpus_audit.core.errors import LexiconError
from corpus_audit.methods.lexicon.csvfile import read_rows

PUBLICATION_BASE = 50.0  # thousand employed: below this BLS publishes no percentages
TABLE_11 = "BLS CPS table 11, 2021 (self-identified, employed 16+)"
TABLE_11B = "BLS CPS table 11b, 2025 (self-identified, employed 16+)"
AGE_COLUMNS = {  # the study's adult age bins -> the table's columns summed into them
    "16_24": ("age_16_19", "age_20_24"),
    "25_34": ("age_25_34",),
    "35_44": ("age_35_44",),
    "45_54": ("age_45_54",),
    "55_64": ("age_55_64",),
    "65_plus": ("age_65_plus",),
}
AGE_GROUP_BINS = {
    "under_35": ("16_24", "25_34"),
    "35_54": ("35_44", "45_54"),
    "55_plus": ("55_64", "65_plus"),
}
RACE_COLUMNS = {"white": "pct_white", "black": "pct_black", "asian": "pct_asian",
                "hispanic_or_latino": "pct_hispanic"}  # fmt: skip
CAVEATS = {
    "gender": "self-identified sex of employed people (survey) vs perceived gender of faces",
    "race": (
        "self-identified race and ethnicity; the groups do not sum to 100 (several races, "
        "Hispanic or Latino of any race); images give no race, only human annotators' "
        "perception where they were asked"
    ),
    "age": "self-reported age of employed people 16+ vs perceived age of faces (minors left out)",
}
_FOOTNOTE = re.compile(r"(\s*\(\d+\)|\*+|\u2020+)\s*$")


@dataclass(frozen=True)
class CpsRow:
    """One row of a CPS table: the occupation (footnotes stripped), its level, the employed
    in thousands and the other columns as floats (None where the table has a dash)."""

    occupation: str
    level: int
    employed: float | None
    values: dict[str, float | None]
    parents: tuple[str, ...] = field(default=())

    @property
    def below_base(self) -> bool:
        """Fewer employed than BLS publishes percentages for (or no count at all)."""
        return self.employed is None or self.employed < PUBLICATION_BASE


def _number(path: Path, line: int, column: str, raw: str) -> float | None:
    text = raw.strip().replace(",", "")
    if text in ("", "-", "\u2013", "\u2014"):
        return None
    try:
        return float(text)
    except ValueError:
        raise LexiconError(f"{path}:{line}: column {column}: not a number: {raw[:40]!r}") from None


def load_table(path: Path) -> dict[str, CpsRow]:
    """The rows of a converted CPS table (the first row of a name wins; a later duplicate is
    a detailed row of another group and is kept under ``name (parent)``)."""
    header, rows = read_rows(path, comments=True)
    for needed in ("occupation", "level", "total_employed_thousands"):
        if needed not in header:
            raise LexiconError(f"{path}: no column {needed!r} (columns: {', '.join(header)})")
    out: dict[str, CpsRow] = {}
    stack: list[tuple[int, str]] = []
    for line, fields in rows:
        cells = dict(zip(header, fields, strict=True))
        name = _FOOTNOTE.sub("", cells["occupation"].strip())
        level = _number(path, line, "level", cells["level"])
        employed = _number(
            path, line, "total_employed_thousands", cells["total_employed_thousands"]
        )
        if name.lower() == "occupation" and (employed or 0) > 1900:  # the stray title row
            continue
        if level is None:
            raise LexiconError(f"{path}:{line}: no level for {name!r}")
        while stack and stack[-1][0] >= level:
            stack.pop()
        values = {
            c: _number(path, line, c, cells[c])
            for c in header
            if c not in ("occupation", "level", "total_employed_thousands")
        }
        row = CpsRow(name, int(level), employed, values, tuple(n for _, n in stack))
        key = name if name not in out else f"{name} ({stack[-1][1] if stack else '?'})"
        out[key] = row
        stack.append((int(level), name))
    return out


def _data(name: str) -> Path:
    return Path(str(resources.files("corpus_audit.methods.lexicon").joinpath("data", name)))


@cache
def shipped_tables() -> tuple[dict[str, CpsRow], dict[str, CpsRow]]:
    """Tables 11 and 11b as shipped."""
    folder = "bls_cps"
    return (
        load_table(_data(f"{folder}/cpsaat11_2021.csv")),
        load_table(_data(f"{folder}/cpsaat11b_2025.csv")),
    )


@cache
def occupation_rows() -> dict[str, str | None]:
    """Occupation -> its row name in both tables (None: no honest single row)."""
    path = _data("bls_cps_map.csv")
    header, rows = read_rows(path, comments=True)
    out: dict[str, str | None] = {}
    t11, t11b = shipped_tables()
    for line, fields in rows:
        cells = dict(zip(header, fields, strict=True))
        row = cells["row"].strip() or None
        if row is not None and (row not in t11 or row not in t11b):
            raise LexiconError(f"{path}:{line}: {row!r} is not a row of both tables")
        out[cells["occupation"].strip()] = row
    return out


@dataclass(frozen=True)
class OfficialShares:
    """Official shares of one occupation and attribute (percent, or years for median_age),
    or the reason there are none."""

    shares: dict[str, float] | None
    table: str
    caveat: str
    reason: str | None = None


def official_shares(attribute: str, occupation: str) -> OfficialShares:
    """Official figures for ``attribute`` in ``gender`` (female / male %), ``race`` (the four
    groups' %, not summing to 100), ``age_bin`` (the six adult bins' % of the employed),
    ``age_group`` (under_35 / 35_54 / 55_plus %) or ``median_age`` (years)."""
    t11, t11b = shipped_tables()
    table = TABLE_11 if attribute in ("gender", "race") else TABLE_11B
    caveat = CAVEATS[
        "age" if attribute.startswith("age") or attribute == "median_age" else attribute
    ]
    row_name = occupation_rows().get(occupation)
    if row_name is None:
        return OfficialShares(None, table, caveat, "no single row of the BLS tables")
    row = (t11 if table == TABLE_11 else t11b)[row_name]
    if row.below_base:
        return OfficialShares(None, table, caveat, "below the BLS publication base (50,000)")
    shares = _shares(attribute, row)
    if shares is None:
        return OfficialShares(None, table, caveat, "not published for this occupation")
    return OfficialShares(shares, table, caveat)


def _shares(attribute: str, row: CpsRow) -> dict[str, float] | None:
    v = row.values
    if attribute == "gender":
        women = v.get("pct_women")
        return None if women is None else {"female": women, "male": 100.0 - women}
    if attribute == "race":
        out = {k: v.get(c) for k, c in RACE_COLUMNS.items()}
        return None if any(x is None for x in out.values()) else out  # type: ignore[return-value]
    if attribute == "median_age":
        return None if v.get("median_age") is None else {"median_age": v["median_age"]}  # type: ignore[dict-item]
    counts = {b: sum(v.get(c) or 0.0 for c in cols) for b, cols in AGE_COLUMNS.items()}
    total = sum(counts.values())
    if total <= 0:
        return None
    bins = {b: 100.0 * n / total for b, n in counts.items()}
    if attribute == "age_bin":
        return bins
    if attribute == "age_group":
        return {g: sum(bins[b] for b in parts) for g, parts in AGE_GROUP_BINS.items()}
    raise ValueError(f"official_shares: unknown attribute {attribute!r}")
