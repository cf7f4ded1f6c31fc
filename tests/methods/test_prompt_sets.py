"""MAGBIG/BAFIS prompt tables, the six categories, and official statistics (METHODS §3).

The shipped tables are checked against the real files in ../shared/data/bafis; expected
values are read from those files or written out here, never taken from the loader itself.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from corpus_audit.methods.lexicon import LexiconError, load_labor_stats
from corpus_audit.methods.lexicon.official_stats import (
    category_statistics,
    load_official_stats,
    occupation_statistics,
)
from corpus_audit.methods.lexicon.prompt_sets import (
    available_prompt_sets,
    is_prompt_table_spec,
    load_categories,
    load_occupation_prompts,
    prompts_frame,
)

DATA = Path(__file__).resolve().parents[2] / "corpus_audit" / "methods" / "lexicon" / "data"
SIX = (
    "Administration & Office",
    "Business & Management",
    "Construction & Maintenance",
    "Healthcare & Social Services",
    "Service & Hospitality",
    "Technical & Engineering",
)
# The SOC-prefix rule of data/bafis/README.md, written out again (longest prefix wins).
RULE = {
    "11": "Business & Management",
    "13": "Business & Management",
    "15": "Technical & Engineering",
    "17": "Technical & Engineering",
    "19": "Technical & Engineering",
    "19-3": "Healthcare & Social Services",
    "21": "Healthcare & Social Services",
    "23": "Business & Management",
    "25": "Healthcare & Social Services",
    "27": "Technical & Engineering",
    "27-2": "Service & Hospitality",
    "29": "Healthcare & Social Services",
    "31": "Healthcare & Social Services",
    "33": "Service & Hospitality",
    "35": "Service & Hospitality",
    "37": "Service & Hospitality",
    "37-3": "Construction & Maintenance",
    "39": "Service & Hospitality",
    "41": "Business & Management",
    "41-2": "Service & Hospitality",
    "43": "Administration & Office",
    "45": "Construction & Maintenance",
    "47": "Construction & Maintenance",
    "49": "Construction & Maintenance",
    "51": "Technical & Engineering",
    "51-3": "Service & Hospitality",
    "53": "Service & Hospitality",
}


def rule(soc: str) -> str:
    return RULE.get(soc[:4]) or RULE[soc[:2]]


def shared_rows(shared_data: Path, name: str) -> list[dict[str, str]]:
    with open(shared_data / "bafis" / name, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


# -- shipped tables -----------------------------------------------------------------------
def test_shipped_tables_are_the_shared_files_unchanged(shared_data: Path):
    shipped = sorted(p.name for p in (DATA / "bafis").glob("*_occupations_*.csv"))
    shared = sorted(p.name for p in (shared_data / "bafis").glob("*.csv"))
    assert shipped == shared and len(shipped) == 8
    for name in shipped:
        assert (DATA / "bafis" / name).read_bytes() == (shared_data / "bafis" / name).read_bytes()


def test_available_prompt_sets_list_each_file_with_its_languages():
    table = available_prompt_sets().set_index("spec")
    ten = "en ar de es fr it ja ko ru zh"
    assert table.loc["builtin:magbig/direct", "languages"] == ten
    assert table.loc["builtin:magbig/indirect", "languages"] == ten
    assert table.loc["builtin:magbig/direct_feminine", "languages"] == "ar de es fr it ru"
    assert table.loc["builtin:bafis/direct", "languages"] == "en de"
    assert table.loc["builtin:bafis/groups", "languages"] == "en de"
    assert table.loc["builtin:bafis/german_gender_star", "languages"] == "de"
    assert table.loc["builtin:bafis/direct_feminine", "languages"] == "de"
    assert set(table["occupations"]) == {151}


@pytest.mark.parametrize(
    ("spec", "file", "language"),
    [
        ("builtin:magbig/direct/de", "magbig_occupations_direct.csv", "de"),
        ("builtin:magbig/indirect/ja", "magbig_occupations_indirect.csv", "ja"),
        ("builtin:bafis/german_gender_star/de", "bafis_occupations_german_gender_star.csv", "de"),
        ("builtin:bafis/groups/en", "bafis_occupations_groups.csv", "en"),
    ],
)
def test_builtin_spec_gives_the_files_column(shared_data, spec, file, language):
    prompts = load_occupation_prompts(spec)
    rows = shared_rows(shared_data, file)
    family, variant = spec.split(":")[1].split("/")[:2]
    assert [p.occupation for p in prompts] == [r["occupation"] for r in rows]
    assert [p.text for p in prompts] == [r[language].strip() for r in rows]
    first = prompts[0]
    assert (first.family, first.variant, first.language) == (family, variant, language)
    assert first.prompt_set == f"{family}/{variant}/{language}"
    assert first.prompt_id == f"{family}/{variant}/{language}:1:{rows[0]['occupation']}"
    assert first.prompts_row() == {
        "prompt_id": first.prompt_id,
        "prompt_set": first.prompt_set,
        "template_id": 1,
        "occupation": rows[0]["occupation"],
        "text": rows[0][language].strip(),
    }


def test_known_prompts_and_categories():
    de = {p.occupation: p for p in load_occupation_prompts("builtin:magbig/direct/de")}
    assert de["accountant"].text == "Ein Foto vom Gesicht eines Buchhalters."
    assert de["accountant"].category == "Business & Management"
    assert de["nurse"].category == "Healthcare & Social Services"
    assert de["plumber"].category == "Construction & Maintenance"
    assert de["receptionist"].category == "Administration & Office"
    star = {
        p.occupation: p.text for p in load_occupation_prompts("builtin:bafis/german_gender_star")
    }
    assert star["accountant"] == "Ein Foto eine*r Buchhalter*in."


def test_all_languages_without_a_language_part():
    prompts = load_occupation_prompts("builtin:bafis/direct")
    assert [p.language for p in prompts] == ["en"] * 151 + ["de"] * 151
    frame = prompts_frame(prompts)
    columns = "prompt_id prompt_set family variant language occupation category text"
    assert list(frame.columns) == columns.split()
    assert frame["prompt_id"].is_unique and len(frame) == 302


def test_spec_errors_name_what_exists():
    with pytest.raises(LexiconError, match=r"no column for language 'en'.*languages: ar, de, es"):
        load_occupation_prompts("builtin:magbig/direct_feminine/en")
    with pytest.raises(LexiconError, match=r"no such built-in prompt table.*magbig/direct"):
        load_occupation_prompts("builtin:magbig/nonexistent/de")
    with pytest.raises(LexiconError, match="names language 'de' but 'en'"):
        load_occupation_prompts("builtin:magbig/direct/de", language="en")
    assert is_prompt_table_spec("builtin:magbig/direct/de")
    assert is_prompt_table_spec("my_prompts.csv")
    assert not is_prompt_table_spec("builtin:prompts_en.toml")


def test_user_file_family_variant_and_language(tmp_path: Path):
    path = tmp_path / "mine_occupations_direct.csv"
    path.write_text(
        "occupation,en,pt-br\nNurse ,A photo of a nurse.,Uma foto de uma enfermeira.\n"
        'unknown job,"A photo, quoted.",Uma foto.\n',
        encoding="utf-8",
    )
    prompts = load_occupation_prompts(path.name, base=tmp_path, language="pt-br")
    assert [(p.prompt_set, p.occupation, p.category, p.text) for p in prompts] == [
        (
            "mine/direct/pt-br",
            "nurse",
            "Healthcare & Social Services",
            "Uma foto de uma enfermeira.",
        ),
        ("mine/direct/pt-br", "unknown job", None, "Uma foto."),
    ]
    other = tmp_path / "prompts.csv"
    other.write_text("occupation,de\nnurse,Ein Foto.\n", encoding="utf-8")
    (p,) = load_occupation_prompts(str(other), categories=None)
    assert (p.family, p.variant, p.category) == ("prompts", "default", None)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"job,en\nnurse,x\n", r"needs a column 'occupation'"),
        (b"occupation\nnurse\n", r"no language columns"),
        (b"occupation,English\nnurse,x\n", r"column 'english' is not a language code"),
        (b"occupation,en,en\nnurse,x,y\n", r":1: column 'en' appears twice"),
        (
            b"occupation,en\nnurse,x\nNurse,y\n",
            r":3: duplicate occupation 'nurse' \(first on line 2\)",
        ),
        (b"occupation,en\nnurse,x\n,y\n", r":3: empty occupation"),
        (b"occupation,en\nnurse,  \n", r":2: empty 'en' prompt for 'nurse'"),
        (
            b'occupation,en\nnurse,"two\nlines"\nceo,x\n',
            r":2: the 'en' prompt for 'nurse' contains",
        ),
        (b"occupation,en\nnurse,x\nceo,x,y\n", r":3: 3 fields, the header has 2"),
        (b'occupation,en\nnurse,x\nceo,"open\n', r":3: not valid CSV"),
        (b"occupation,en\nnurse,caf\xe9\n", r"not UTF-8"),
        (b"", r"empty file"),
        (b"occupation,en\n", r"no prompts"),
    ],
)
def test_bad_prompt_files_name_file_and_line(tmp_path: Path, content: bytes, match: str):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(LexiconError, match=match) as info:
        load_occupation_prompts(str(path))
    assert str(path) in str(info.value)


def test_missing_user_file():
    with pytest.raises(LexiconError, match="not found"):
        load_occupation_prompts("/nonexistent/prompts.csv")


# -- categories ---------------------------------------------------------------------------
def test_every_shipped_occupation_has_one_of_the_six_categories(shared_data: Path):
    cmap = load_categories()
    assert cmap.categories == SIX
    occupations = {
        r["occupation"] for r in shared_rows(shared_data, "magbig_occupations_direct.csv")
    }
    assert set(cmap.entries) == occupations
    sizes = {c: len(cmap.occupations(c)) for c in SIX}
    assert sizes == {
        "Service & Hospitality": 37,
        "Healthcare & Social Services": 30,
        "Technical & Engineering": 28,
        "Business & Management": 25,
        "Construction & Maintenance": 16,
        "Administration & Office": 15,
    }


def test_categories_follow_the_documented_soc_rule():
    cmap = load_categories()
    unassigned = []
    for entry in cmap.entries.values():
        if entry.soc_2018 is None:
            unassigned.append(entry.occupation)
            continue
        assert entry.category == rule(entry.soc_2018), entry
    assert unassigned == ["supervisor"]
    assert cmap.category("supervisor") == "Business & Management"


@pytest.mark.parametrize(
    ("example", "soc", "bafis_category"),
    [  # BAFIS data/hisco_occupations.csv, "MAGBIG category", with SOC 2018 equivalents
        ("physician", "29-1210", "Healthcare & Social Services"),
        ("clergyman", "21-2011", "Healthcare & Social Services"),
        ("astronomer", "19-2011", "Technical & Engineering"),
        ("optician (lens maker)", "51-9083", "Technical & Engineering"),
        ("sculptor", "27-1013", "Technical & Engineering"),
        ("blacksmith", "51-4022", "Technical & Engineering"),
        ("navigator", "53-5021", "Service & Hospitality"),
        ("piper", "27-2042", "Service & Hospitality"),
        ("actor", "27-2011", "Service & Hospitality"),
        ("brewer", "51-3099", "Service & Hospitality"),
        ("clerk", "43-9061", "Administration & Office"),
        ("secretary", "43-6014", "Administration & Office"),
        ("foreman", "47-1011", "Construction & Maintenance"),
        ("miner", "47-5040", "Construction & Maintenance"),
    ],
)
def test_rule_reproduces_the_bafis_examples(example, soc, bafis_category):
    assert rule(soc) == bafis_category, example


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("occupation\nnurse\n", r"needs the column\(s\) category"),
        ("occupation,category\nnurse,\n", r":2: empty occupation or category"),
        ("occupation,category\nnurse,A\nnurse,B\n", r":3: duplicate occupation 'nurse'"),
        (
            "occupation,category,aliases\nnurse,A,\ndoctor,A,nurse\n",
            r":3: alias 'nurse' of 'doctor'",
        ),
    ],
)
def test_bad_category_files(tmp_path: Path, content: str, match: str):
    path = tmp_path / "cats.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LexiconError, match=match):
        load_categories(str(path))


# -- official statistics ------------------------------------------------------------------
def test_bls_file_reads_with_both_loaders(shared_data: Path):
    old = load_labor_stats()
    assert old == load_labor_stats(str(shared_data / "labor_stats_us_bls2024_pst.csv"))
    stats = load_official_stats("builtin:labor_stats_us_bls2024_pst.csv")
    assert len(stats.rows) == 40
    assert {r.key: r.percent_female for r in stats.rows} == old
    nurse = stats.get("occupation", "nurse")
    assert (nurse.percent_female, nurse.year, nurse.country) == (87.9, 2024, "US")
    assert "Bureau of Labor Statistics" in nurse.source


def test_occupations_map_to_statistics_by_key_or_alias():
    us = load_official_stats("builtin:labor_stats_us_bls2024_pst.csv")
    table = occupation_statistics(
        us, ["nurse", "doctor", "security guard", "pilot"], load_categories()
    )
    got = table.set_index("occupation")
    assert got.loc["nurse", "official_key"] == "nurse" and got.loc["nurse", "official_pf"] == 87.9
    assert got.loc["doctor", "official_key"] == "physician"
    assert got.loc["doctor", "official_pf"] == 43.8
    assert got.loc["security guard", "official_pf"] == 24.3
    assert pd.isna(got.loc["pilot", "official_key"])  # no BLS row in the PST table


def test_category_statistics_average_the_prompt_occupations():
    us = load_official_stats("builtin:labor_stats_us_bls2024_pst.csv")
    cmap = load_categories()
    table = category_statistics(us, cmap).set_index("category")
    # Administration & Office occupations with a PST row: clerk 84.3, executive assistant
    # (as secretary) 92.5, receptionist 90.3.
    assert table.loc["Administration & Office", "official_pf"] == pytest.approx(
        (84.3 + 92.5 + 90.3) / 3
    )
    assert table.loc["Administration & Office", "official_basis"] == "mean of 3 occupations"
    # Restricted to two occupations of the prompt set:
    small = category_statistics(us, cmap, ["nurse", "doctor"]).set_index("category")
    assert small.loc["Healthcare & Social Services", "official_pf"] == pytest.approx(
        (87.9 + 43.8) / 2
    )
    assert pd.isna(small.loc["Technical & Engineering", "official_pf"])


def test_category_rows_and_employment_weights(tmp_path: Path):
    path = tmp_path / "de.csv"
    path.write_text(
        "# German figures for a test\n"
        "occupation,category,percent_female,source,year,country,note,employed\n"
        ",healthcare & social services,75.5,BA test table,2024,de,,\n"
        "nurse,,80,BA test table,2024,DE,,300\n"
        "doctor,,50,BA test table,2024,DE,,100\n"
        "ceo,,,BA test table,2024,DE,same as doctor,\n",
        encoding="utf-8",
    )
    stats = load_official_stats(str(path))
    assert stats.get("occupation", "ceo").percent_female == 50.0  # same as doctor
    assert stats.get("category", "Healthcare & Social Services").line == 3
    cmap = load_categories()
    table = category_statistics(stats, cmap).set_index("category")
    assert table.loc["Healthcare & Social Services", "official_pf"] == 75.5
    assert table.loc["Healthcare & Social Services", "official_basis"] == "category"
    assert table.loc["Healthcare & Social Services", "official_country"] == "DE"
    # Without the category row the two occupations are weighted by employment.
    only = category_statistics(stats, cmap, ["nurse", "doctor"])
    assert only.set_index("category").loc["Healthcare & Social Services", "official_pf"] == 75.5
    path.write_text(
        path.read_text().replace(",healthcare & social services,75.5", ",Technical & Engineering,")
    )
    weighted = category_statistics(load_official_stats(str(path)), cmap).set_index("category")
    assert weighted.loc["Healthcare & Social Services", "official_pf"] == pytest.approx(
        (80 * 300 + 50 * 100) / 400
    )
    assert weighted.loc["Healthcare & Social Services", "official_basis"] == (
        "employment-weighted mean of 2 occupations"
    )


def test_template_loads_with_no_values():
    stats = load_official_stats("builtin:official_stats_template.csv")
    assert sorted(r.key for r in stats.rows) == list(SIX)
    assert all(r.percent_female is None and r.country == "DE" for r in stats.rows)
    table = category_statistics(stats, load_categories())
    assert table["official_pf"].isna().all()


HEADER = "occupation,category,percent_female,source,year,country\n"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (
            "nurse,,50,S,2024,US\nnurse,,51,S,2024,US\n",
            r":3: duplicate occupation 'nurse' \(first on line 2\)",
        ),
        ("nurse,Healthcare & Social Services,50,S,2024,US\n", r":2: fill exactly one .*both"),
        (",,50,S,2024,US\n", r":2: fill exactly one .*neither"),
        ("nurse,,150,S,2024,US\n", r":2: percent_female 150.0 is not in \[0, 100\]"),
        ("nurse,,half,S,2024,US\n", r":2: percent_female 'half' is not a finite number"),
        ("nurse,,nan,S,2024,US\n", r":2: percent_female 'nan' is not a finite number"),
        ("nurse,,50,,2024,US\n", r":2: empty source"),
        ("nurse,,50,S,24,US\n", r":2: year '24' is not a year"),
        ("nurse,,50,S,2024,USA\n", r":2: country 'USA' is not an ISO 3166 two-letter code"),
    ],
)
def test_bad_statistics_rows_name_file_and_line(tmp_path: Path, body: str, match: str):
    path = tmp_path / "stats.csv"
    path.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(LexiconError, match=match) as info:
        load_official_stats(str(path))
    assert str(path) in str(info.value)


def test_statistics_file_level_errors(tmp_path: Path):
    path = tmp_path / "stats.csv"
    path.write_text("occupation,percent_female\nnurse,50\n", encoding="utf-8")
    with pytest.raises(LexiconError, match=r"needs the column\(s\) source, year, country"):
        load_official_stats(str(path))
    path.write_text(
        "occupation,percent_female,source,year,country,note\nceo,,S,2024,US,same as chief\n",
        encoding="utf-8",
    )
    with pytest.raises(LexiconError, match=r":2: 'ceo' is 'same as chief', which is not in"):
        load_official_stats(str(path))
    path.write_text(
        "category,percent_female,source,year,country\nHealth,50,S,2024,DE\n", encoding="utf-8"
    )
    with pytest.raises(LexiconError, match=r":2: category 'Health' is not one of Administration"):
        category_statistics(load_official_stats(str(path)), load_categories())
