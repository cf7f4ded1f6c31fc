"""The BLS CPS tables 11 and 11b: reading rules and the occupation mapping."""

from __future__ import annotations

import pytest

from corpus_audit.core.errors import LexiconError
from corpus_audit.methods.lexicon import bls_cps


def test_shipped_tables_hierarchy_dashes_and_the_stray_row():
    t11, t11b = bls_cps.shipped_tables()
    assert "Occupation" not in t11b  # the stray title row of 11b is skipped
    assert len(t11) == len(t11b) == 595
    nurses = t11["Registered nurses"]
    assert nurses.level == 3 and nurses.values["pct_women"] == pytest.approx(86.7)
    assert nurses.parents[-1] == "Healthcare practitioners and technical occupations"
    fashion = t11["Fashion designers"]
    assert fashion.values["pct_women"] is None and fashion.below_base  # a dash, 33 thousand
    assert t11b["Registered nurses"].values["median_age"] == pytest.approx(42.3)


def test_official_shares_by_hand_and_refusals():
    ages = bls_cps.official_shares("age_group", "nurse").shares
    # 11b 2025 registered nurses: (8 + 193 + 953) of 3,530 thousand are under 35
    assert ages["under_35"] == pytest.approx(100 * 1154 / 3530)
    assert sum(ages.values()) == pytest.approx(100)
    assert bls_cps.official_shares("gender", "firefighter").shares["female"] == pytest.approx(5.1)
    race = bls_cps.official_shares("race", "nurse").shares
    assert sum(race.values()) != pytest.approx(100)  # groups do not sum
    below = bls_cps.official_shares("gender", "fashion designer")
    assert below.shares is None and "publication base" in below.reason
    assert bls_cps.official_shares("gender", "teacher").reason.startswith("no single row")
    assert "perceived" in below.caveat


def test_mapping_names_rows_of_both_tables():
    rows = bls_cps.occupation_rows()
    assert len(rows) == 62 and rows["attorney"] == "Lawyers" and rows["manager"] is None


def test_footnotes_and_bad_files(tmp_path):
    good = tmp_path / "t.csv"
    good.write_text(
        "occupation,level,total_employed_thousands,pct_women\n"
        "Total (1),0,100,50\nBakers*,1,60,40.5\nTiny,1,10,\n",
        encoding="utf-8",
    )
    table = bls_cps.load_table(good)
    assert set(table) == {"Total", "Bakers", "Tiny"}
    assert table["Bakers"].parents == ("Total",) and table["Tiny"].below_base
    bad = tmp_path / "bad.csv"
    bad.write_text("occupation,level,total_employed_thousands\nBakers,1,lots\n", encoding="utf-8")
    with pytest.raises(LexiconError, match=r"bad.csv:2: column total_employed_thousands"):
        bls_cps.load_table(bad)
    missing = tmp_path / "missing.csv"
    missing.write_text("occupation,employed\nBakers,1\n", encoding="utf-8")
    with pytest.raises(LexiconError, match=r"missing.csv: no column 'level'"):
        bls_cps.load_table(missing)
