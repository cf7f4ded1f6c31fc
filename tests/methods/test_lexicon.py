"""The lexicon data files and loaders: occupations, articles, prompts, gender terms, stats."""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_audit.methods.lexicon import (
    LexiconError,
    indefinite_article,
    load_gender_terms,
    load_labor_stats,
    load_occupations,
    load_prompt_set,
    pick_occupations,
    render_prompts,
)

PAPER_OCCUPATIONS = """accountant, architect, assistant, athlete, attorney, author, baker, bartender, ceo, chef,
comedian, cook, dancer, dentist, dietitian, doctor, engineer, entrepreneur, fashion designer,
filmmaker, firefighter, graphic designer, hairdresser, housekeeper, intern, janitor,
journalist, lawyer, librarian, manager, mechanic, musician, nurse, nutritionist, painter,
pharmacist, photographer, physician, pilot, poet, politician, president, prime minister,
professor, programmer, psychologist, receptionist, reporter, researcher, salesperson,
scientist, senator, singer, student, supervisor, surgeon, teacher, technician, therapist,
tutor, veterinarian, writer"""


def test_builtin_occupations_are_the_papers_62():
    occs = load_occupations()
    expected = [o.strip() for o in PAPER_OCCUPATIONS.replace("\n", " ").split(",")]
    assert [o.name for o in occs] == expected
    assert len(occs) == 62


def test_forms_include_plurals_synonyms_and_hyphen_variants():
    occs = {o.name: o for o in load_occupations()}
    assert "teachers" in occs["teacher"].forms
    assert {"prime minister", "prime-minister", "prime ministers"} <= set(
        occs["prime minister"].forms
    )
    assert {"hairstylist", "hair-stylist", "hair stylists"} <= set(occs["hairdresser"].forms)
    assert {"ceo", "ceos"} <= set(occs["ceo"].forms)
    assert occs["ceo"].display == "CEO"


@pytest.mark.parametrize(
    ("phrase", "article"),
    [
        ("engineer", "an"),
        ("intern", "an"),
        ("accountant", "an"),
        ("author", "an"),
        ("CEO", "a"),
        ("MBA student", "an"),
        ("FBI agent", "an"),
        ("university professor", "a"),
        ("European senator", "a"),
        ("hour", "an"),
        ("honest broker", "an"),
        ("nurse", "a"),
        ("one-man band", "a"),
        ("umpire", "an"),
        ("user researcher", "a"),
    ],
)
def test_indefinite_article_follows_sound(phrase, article):
    assert indefinite_article(phrase) == article


def test_builtin_articles_agree_with_the_rule():
    for occ in load_occupations():
        assert occ.article == indefinite_article(occ.display), occ.name


def test_prompts_render_with_articles():
    prompts = render_prompts(load_prompt_set(), load_occupations())
    assert len(prompts) == 4 * 62
    texts = {(p["template_id"], p["occupation"]): p["text"] for p in prompts}
    assert texts[(1, "engineer")] == "A photo of the face of an engineer"
    assert texts[(2, "ceo")] == "A portrait photo of a CEO"
    assert texts[(3, "intern")] == "A photo of an intern smiling"
    assert texts[(4, "nurse")] == "A photo of a nurse at work"
    assert len({p["prompt_id"] for p in prompts}) == len(prompts)


def test_duplicate_occupation_is_an_error_naming_file_and_line(tmp_path: Path):
    f = tmp_path / "occ.csv"
    f.write_text("occupation,article,display,forms\nnurse,a,nurse,nurses\nteacher,,,\nNurse,,,\n")
    with pytest.raises(LexiconError, match=r"occ\.csv:4: duplicate occupation 'nurse'"):
        load_occupations(str(f))


def test_form_claimed_by_two_occupations_is_an_error(tmp_path: Path):
    f = tmp_path / "occ.csv"
    f.write_text("occupation,forms\ndoctor,doctors|physician\nphysician,physicians\n")
    with pytest.raises(
        LexiconError, match="form 'physician' of 'physician' already belongs to 'doctor'"
    ):
        load_occupations(str(f))


def test_user_lexicon_without_article_column_gets_the_rule(tmp_path: Path):
    f = tmp_path / "occ.csv"
    f.write_text("occupation,forms\nelectrician,electricians\nplumber,plumbers\n")
    occs = load_occupations(str(f))
    assert [(o.name, o.article) for o in occs] == [("electrician", "an"), ("plumber", "a")]


def test_missing_lexicon_and_bad_header(tmp_path: Path):
    with pytest.raises(LexiconError, match="not found"):
        load_occupations(str(tmp_path / "nope.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("job,forms\nnurse,nurses\n")
    with pytest.raises(LexiconError, match="bad.csv: needs a header"):
        load_occupations(str(bad))
    with pytest.raises(LexiconError, match="no such built-in"):
        load_occupations("builtin:klingon.csv")


def test_unknown_occupation_is_named():
    with pytest.raises(LexiconError, match="astronaut"):
        pick_occupations(load_occupations(), ["nurse", "astronaut"])


def test_gender_terms_cover_methods_list():
    terms = load_gender_terms()
    assert {"man", "men", "gentleman", "gentlemen", "boy", "boys", "male", "gent"} <= set(
        terms.words["male"]
    )
    assert {"woman", "women", "lady", "ladies", "girl", "girls", "female"} <= set(
        terms.words["female"]
    )
    assert terms.pronouns["male"] == ("he", "him", "his", "himself")
    assert terms.pronouns["female"] == ("she", "her", "hers", "herself")
    assert terms.name_guesses["male"] == ("male", "mostly_male")


def test_labor_stats_match_shared_file(shared_data: Path):
    stats = load_labor_stats()
    assert len(stats) == 40
    assert stats["mechanician"] == pytest.approx(8.5)
    assert stats["secretary"] == pytest.approx(92.5)
    assert stats["accountant"] == stats["auditor"] == pytest.approx(58.8)  # "same as auditor"
    assert stats["cleaner"] == stats["housekeeper"]
    assert stats["chief"] is None  # N/A in the source table
    assert stats == load_labor_stats(str(shared_data / "labor_stats_us_bls2024_pst.csv"))
