"""The German official statistics (BAFIS): the agency's table as shipped, the occupation ->
sector mapping, the per-category figures, and the categories stage comparing German prompts
with them. Figures are recomputed here from the agency's own file with plain parsing."""

from __future__ import annotations

import csv
from collections import defaultdict
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest

from corpus_audit.core.errors import LexiconError
from corpus_audit.methods.categories import category_distribution
from corpus_audit.methods.lexicon import german_stats as gs
from corpus_audit.methods.lexicon.prompt_sets import load_categories, load_occupation_prompts
from corpus_audit.stages.categories import official_figures

DATA = resources.files("corpus_audit").joinpath("methods", "lexicon", "data")


@pytest.fixture(scope="module")
def agency_file(shared_data: Path) -> Path:
    return shared_data / "bafis_arena" / "arbeitsagentur_gender_data.csv"


def _plain_agency_counts(path: Path) -> dict[str, dict[str, int]]:
    """sex -> sector -> count, by splitting the agency's lines by hand."""
    out: dict[str, dict[str, int]] = defaultdict(dict)
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = [p.strip().strip('"') for p in line.split(";")]
        if len(parts) == 4 and parts[0] in ("Männer", "Frauen"):
            out[parts[0]][parts[1]] = int(parts[3].replace(".", ""))
    return out


def _shipped(name: str) -> list[dict[str, str]]:
    text = DATA.joinpath(name).read_text(encoding="utf-8")
    return list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))


def test_sector_file_is_the_agency_table_divided(agency_file):
    counts = _plain_agency_counts(agency_file)
    rows = _shipped("de_ba2024_sectors.csv")
    assert [r["sector"] for r in rows] == ["S1", "S2", "S3", "S4", "S5", "ZZ"]
    for r in rows:
        men, women = counts["Männer"][r["sector"]], counts["Frauen"][r["sector"]]
        assert (int(r["men"]), int(r["women"])) == (men, women)
        assert float(r["percent_female"]) == pytest.approx(100 * women / (men + women), abs=5e-5)
    # the published figures, written out: S1 production 14.12 %, S2 personal services 72.72 %
    by = {r["sector"]: float(r["percent_female"]) for r in rows}
    assert (round(by["S1"], 2), round(by["S2"], 2), round(by["S4"], 2)) == (14.12, 72.72, 24.08)
    # the source line the agency asks for
    text = DATA.joinpath("de_ba2024_sectors.csv").read_text(encoding="utf-8")
    assert "© Statistik der Bundesagentur für Arbeit" in text
    # and the package file is what the reader makes of the agency's file
    assert gs.sectors_csv(gs.read_agency_table(agency_file)) == text


def test_mapping_covers_every_occupation_once_with_a_sector():
    mapping = _shipped("de_ba2024_occupation_sectors.csv")
    cats = load_categories()
    assert sorted(r["occupation"] for r in mapping) == sorted(cats.entries)
    assert {r["sector"] for r in mapping} == {"S1", "S2", "S3", "S4", "S5"}
    # every judgement call says so; the plain cases carry no note
    assert all(r["note"] == "" or r["note"].startswith("judgement: ") for r in mapping)


def test_category_figures_recomputed(agency_file):
    counts = _plain_agency_counts(agency_file)
    share = {
        s: 100 * counts["Frauen"][s] / (counts["Frauen"][s] + counts["Männer"][s])
        for s in ("S1", "S2", "S3", "S4", "S5")
    }
    sector = {r["occupation"]: r["sector"] for r in _shipped("de_ba2024_occupation_sectors.csv")}
    members: dict[str, list[str]] = defaultdict(list)
    for r in _shipped("bafis/magbig_categories.csv"):
        members[r["category"]].append(sector[r["occupation"]])
    shipped = {r["category"]: r for r in _shipped("official_stats_de_ba2024.csv")}
    assert set(shipped) == set(members)
    for category, sectors in members.items():
        expected = sum(share[s] for s in sectors) / len(sectors)
        assert float(shipped[category]["percent_female"]) == pytest.approx(expected, abs=0.005)
        assert shipped[category]["country"] == "DE" and shipped[category]["year"] == "2024"
        assert shipped[category]["source"].startswith("© Statistik der Bundesagentur für Arbeit")
    # Construction & Maintenance is production (S1) throughout
    assert float(shipped["Construction & Maintenance"]["percent_female"]) == pytest.approx(
        share["S1"], abs=0.005
    )
    assert gs.build_official_stats() == DATA.joinpath("official_stats_de_ba2024.csv").read_text(
        encoding="utf-8"
    )


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace("7.600.150", "7,600,150"), r":11: '7,600,150' is not a count"),
        (lambda t: t.replace("7.600.150", "7.700.150"), r":10: the men's sectors add up to"),
        (lambda t: t.replace('"Frauen";"S4"', '"Frauen";"S9"'), r":21: sector 'S9' is not"),
        (lambda t: t.replace('"Männer";"S2"', '"Männer";"S1"'), r":12: sector S1 of"),
    ],
)
def test_bad_agency_tables_name_file_and_line(agency_file, tmp_path, edit, match):
    bad = tmp_path / "agency.csv"
    bad.write_text(edit(agency_file.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(LexiconError, match=match):
        gs.read_agency_table(bad)


def test_categories_stage_compares_german_prompts_with_it(make_study, laion_path):
    """A default study compares German prompts with the agency's figures (the categories
    stage's official_figures), and the category distribution's gap is against them."""
    study = make_study([laion_path])
    assert study.config.lexicon.official_stats["de"] == gs.OFFICIAL_FILE
    prompts = load_occupation_prompts("builtin:magbig/direct/de")
    official = official_figures(study, [p.occupation for p in prompts])
    shipped = {
        r["category"]: float(r["percent_female"]) for r in _shipped("official_stats_de_ba2024.csv")
    }
    de = official[official["language"] == "de"].set_index("category")
    assert de["official_pf"].to_dict() == pytest.approx(shipped)
    assert set(de["official_country"]) == {"DE"}
    labels = pd.DataFrame(
        [
            {
                "model_id": "m",
                "prompt_set": p.family,
                "language": p.language,
                "variant": p.variant,
                "category": p.category,
                "label": "female" if i % 3 == 0 else "male",
            }
            for p in prompts
            for i in range(3)
        ]
    )
    table = category_distribution(labels, official)
    for row in table.to_dict("records"):
        assert row["official_pf"] == pytest.approx(shipped[row["category"]])
        assert row["gap_pp"] == pytest.approx(row["percent_female"] - shipped[row["category"]])
