"""German official statistics (BAFIS): women's share per occupational sector, February 2024,
from the German federal employment agency, and its comparison with the MAGBIG categories.

Source: "© Statistik der Bundesagentur für Arbeit": employees subject to social insurance
(Sozialversicherungspflichtig Beschäftigte) by sex and occupational sector (Berufssektor
S1-S5 of the KldB 2010, ZZ = no information), reference date February 2024, data as of
07.09.2024 (the table the BAFIS authors compared with; ``shared/data/bafis_arena/``).

Three package files (``corpus_audit/methods/lexicon/data/``):

- ``de_ba2024_sectors.csv``: one row per sector, ``sector, name, men, women,
  percent_female`` = 100 * women / (men + women), rounded to 4 decimals; built from the
  agency's CSV by :func:`read_agency_table` (:func:`sectors_csv` writes it);
- ``de_ba2024_occupation_sectors.csv``: ``occupation, sector, note``: each of the 151
  occupations to one sector (S1-S5), judgement calls noted (docs/preferences.md);
- ``official_stats_de_ba2024.csv``: the six MAGBIG categories in the official-statistics
  format (:mod:`corpus_audit.methods.lexicon.official_stats`), what ``lexicon.official_stats =
  {de = "builtin:official_stats_de_ba2024.csv"}`` compares the German prompts with.

**The category rule** (:func:`category_figures`): a category's figure is the mean, over its
occupations, of the women's share of each occupation's sector: each occupation is one prompt
of the category, so the official figure weighs the sectors as the prompts do (a category of
19 personal-service and 15 transport occupations gets 19/34 of S2's share and 15/34 of S5's).
The sector of ``ZZ`` (no information) is never used.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from corpus_audit.methods.lexicon import LexiconError, resolve_path
from corpus_audit.methods.lexicon.csvfile import read_rows
from corpus_audit.methods.lexicon.prompt_sets import load_categories

SECTORS = ("S1", "S2", "S3", "S4", "S5")
SOURCE = (
    "© Statistik der Bundesagentur für Arbeit: Sozialversicherungspflichtig Beschäftigte nach "
    "Geschlecht und Berufssektor (KldB 2010), Stichtag Februar 2024, Datenstand 07.09.2024"
)
YEAR, COUNTRY = 2024, "DE"
SECTORS_FILE = "builtin:de_ba2024_sectors.csv"
MAPPING_FILE = "builtin:de_ba2024_occupation_sectors.csv"
OFFICIAL_FILE = "builtin:official_stats_de_ba2024.csv"
# The agency rounds every published figure (to tens here, for data protection), so a sex's
# sectors may miss its total by up to ROUNDING per sector: the sector counts are used as given.
ROUNDING = 10
_COUNT = re.compile(r"^\d{1,3}(\.\d{3})*$")
_SEX = {"männer": "men", "frauen": "women"}


@dataclass(frozen=True)
class Sector:
    """One occupational sector: key (``S1``), German name, employees by sex."""

    sector: str
    name: str
    men: int
    women: int

    @property
    def percent_female(self) -> float:
        return 100.0 * self.women / (self.men + self.women)


def _german_count(path: Path, line: int, raw: str) -> int:
    value = raw.strip()
    if not _COUNT.match(value):
        raise LexiconError(f"{path}:{line}: {raw!r} is not a count in German number format")
    return int(value.replace(".", ""))


def read_agency_table(path: Path) -> dict[str, Sector]:
    """The agency's CSV (semicolon-separated, German number format, header lines before the
    table): sector -> :class:`Sector`, ZZ included. Checks that each sex's sectors add up to
    the table's total for that sex and that the sexes add up to the grand total, up to the
    agency's rounding (:data:`ROUNDING` per figure); errors name the file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LexiconError(f"{path}: cannot read as UTF-8 text ({exc})") from None
    counts: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    totals: dict[str, tuple[int, int]] = {}
    for line, fields in enumerate(csv.reader(io.StringIO(text), delimiter=";"), start=1):
        if len(fields) != 4:
            continue  # header and footer lines
        first = fields[0].strip()
        if first.startswith("Insgesamt"):
            sex = _SEX.get(first.split(":", 1)[1].strip().lower(), "all")
            totals[sex] = (_german_count(path, line, fields[3]), line)
            continue
        sex = _SEX.get(first.lower())
        if sex is None:
            continue  # the column header
        key = fields[1].strip()
        if key not in (*SECTORS, "ZZ"):
            raise LexiconError(f"{path}:{line}: sector {fields[1]!r} is not S1-S5 or ZZ")
        if key in counts.setdefault(sex, {}):
            raise LexiconError(f"{path}:{line}: sector {key} of {first} appears twice")
        counts[sex][key] = _german_count(path, line, fields[3])
        names[key] = " ".join(fields[2].split())
    for sex in ("men", "women"):
        missing = [k for k in (*SECTORS, "ZZ") if k not in counts.get(sex, {})]
        if missing:
            raise LexiconError(f"{path}: no {sex} row for sector(s) {', '.join(missing)}")
        rounding = ROUNDING * len(counts[sex])  # the agency rounds each figure
        if sex in totals and abs(sum(counts[sex].values()) - totals[sex][0]) > rounding:
            raise LexiconError(
                f"{path}:{totals[sex][1]}: the {sex}'s sectors add up to "
                f"{sum(counts[sex].values())}, not {totals[sex][0]} (beyond rounding)"
            )
    both = totals.get("men", (0,))[0] + totals.get("women", (0,))[0]
    if "all" in totals and abs(both - totals["all"][0]) > 2 * ROUNDING:
        raise LexiconError(f"{path}:{totals['all'][1]}: men and women do not add up to the total")
    return {k: Sector(k, names[k], counts["men"][k], counts["women"][k]) for k in (*SECTORS, "ZZ")}


def sectors_csv(sectors: dict[str, Sector]) -> str:
    """The text of ``de_ba2024_sectors.csv`` for ``sectors`` (S1-S5 and ZZ)."""
    out = io.StringIO()
    out.write(f"# {SOURCE}.\n# percent_female = 100 * women / (men + women), 4 decimals.\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["sector", "name", "men", "women", "percent_female"])
    for s in sectors.values():
        writer.writerow([s.sector, s.name, s.men, s.women, f"{s.percent_female:.4f}"])
    return out.getvalue()


def load_sectors(spec: str = SECTORS_FILE, base: Path | None = None) -> dict[str, Sector]:
    """The sector file (``sector, name, men, women``; ``percent_female`` is checked against
    the counts); errors name the file and line."""
    path = resolve_path(spec, base)
    header, rows = read_rows(path, comments=True)
    need = ("sector", "name", "men", "women", "percent_female")
    missing = [c for c in need if c not in header]
    if missing:
        raise LexiconError(f"{path}: no column(s) {', '.join(missing)}")
    out: dict[str, Sector] = {}
    for line, fields in rows:
        row = dict(zip(header, fields, strict=True))
        key = row["sector"].strip()
        if key not in (*SECTORS, "ZZ") or key in out:
            raise LexiconError(f"{path}:{line}: sector {key!r} is unknown or repeated")
        if not (row["men"].strip().isdigit() and row["women"].strip().isdigit()):
            raise LexiconError(f"{path}:{line}: men and women must be whole numbers")
        sector = Sector(key, row["name"].strip(), int(row["men"]), int(row["women"]))
        if row["percent_female"].strip() != f"{sector.percent_female:.4f}":
            raise LexiconError(
                f"{path}:{line}: percent_female {row['percent_female']!r} is not "
                f"{sector.percent_female:.4f} (100 * women / (men + women))"
            )
        out[key] = sector
    absent = [k for k in SECTORS if k not in out]
    if absent:
        raise LexiconError(f"{path}: no row for sector(s) {', '.join(absent)}")
    return out


def load_occupation_sectors(
    spec: str = MAPPING_FILE, base: Path | None = None
) -> dict[str, tuple[str, str]]:
    """occupation -> (sector S1-S5, note); errors name the file and line."""
    path = resolve_path(spec, base)
    header, rows = read_rows(path, comments=True)
    if "occupation" not in header or "sector" not in header:
        raise LexiconError(f"{path}: needs the columns occupation and sector")
    out: dict[str, tuple[str, str]] = {}
    for line, fields in rows:
        row = dict(zip(header, fields, strict=True))
        occupation = " ".join(row["occupation"].lower().split())
        sector = row["sector"].strip()
        if not occupation or occupation in out:
            raise LexiconError(f"{path}:{line}: occupation {row['occupation']!r} empty or repeated")
        if sector not in SECTORS:
            raise LexiconError(f"{path}:{line}: sector {row['sector']!r} is not one of S1-S5")
        out[occupation] = (sector, row.get("note", "").strip())
    return out


def category_figures(
    sectors: dict[str, Sector],
    mapping: dict[str, tuple[str, str]],
    categories: dict[str, str],
) -> list[dict[str, object]]:
    """Per category (sorted): ``category, percent_female, basis, n_occupations`` by the rule
    in the module docstring; ``categories``: occupation -> category. Every occupation must be
    mapped (a :class:`LexiconError` names the first that is not)."""
    by_category: dict[str, list[str]] = {}
    for occupation, category in categories.items():
        if occupation not in mapping:
            raise LexiconError(f"occupation {occupation!r} has no sector in the mapping")
        by_category.setdefault(category, []).append(mapping[occupation][0])
    out = []
    for category in sorted(by_category):
        keys = by_category[category]
        share = sum(sectors[k].percent_female for k in keys) / len(keys)
        tally = Counter(keys)
        basis = ", ".join(f"{k} x{tally[k]}" for k in sorted(tally))
        out.append(
            {
                "category": category,
                "percent_female": share,
                "basis": basis,
                "n_occupations": len(keys),
            }
        )
    return out


def official_stats_csv(figures: list[dict[str, object]]) -> str:
    """The text of ``official_stats_de_ba2024.csv`` (official-statistics format) for the
    :func:`category_figures` rows (percent_female with 2 decimals)."""
    out = io.StringIO()
    out.write(
        "# German official statistics per MAGBIG category (corpus_audit.methods.lexicon.german_stats):\n"
        "# mean over the category's occupations of the women's share of each occupation's\n"
        "# sector (de_ba2024_occupation_sectors.csv, de_ba2024_sectors.csv).\n"
    )
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["occupation", "category", "percent_female", "source", "year", "country", "note"]
    )
    for f in figures:
        note = f"sectors of its {f['n_occupations']} occupations: {f['basis']}"
        pf = float(f["percent_female"])  # type: ignore[arg-type]
        writer.writerow(["", f["category"], f"{pf:.2f}", SOURCE, YEAR, COUNTRY, note])
    return out.getvalue()


def build_official_stats(base: Path | None = None) -> str:
    """``official_stats_de_ba2024.csv`` as the package files give it (what the test and the
    docs regenerate)."""
    cats = load_categories()
    categories = {o: e.category for o, e in cats.entries.items()}
    return official_stats_csv(
        category_figures(load_sectors(), load_occupation_sectors(), categories)
    )
