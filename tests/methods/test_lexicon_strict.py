"""Issue 23, item 2: lexicon CSVs are read strictly (``lexicon/csvfile.py``), a surface form
must contain a letter, and Excel's byte-order mark is read in a roles CSV and a templates TOML.

Before, ``load_occupations`` and ``load_roles`` used ``csv.DictReader`` leniently: a row with a
stray quote lost a field and turned ``'--`` into a form matching every apostrophe (701
captions for ``doctor`` instead of 11, exit 0), and an unterminated quote swallowed the rows
after it (``pilot`` vanished).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus_audit.methods.lexicon import LexiconError, load_labor_stats, load_occupations
from corpus_audit.methods.lexicon.pst import load_roles, load_templates

BUILTIN_ROLES = Path(__file__).parents[2] / "corpus_audit" / "methods" / "lexicon" / "data" / "pst"
OCC_HEADER = "occupation,article,display,forms\n"


def _write(path: Path, text: str, *, bom: bool = False) -> Path:
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def test_a_row_with_a_stray_quote_is_an_error_naming_its_line(tmp_path):
    path = _write(
        tmp_path / "occ.csv",
        OCC_HEADER + "nurse,a,nurse,nurse|nurses\ndoctor,a,doctor\",'--,doctor|doctors\n",
    )
    with pytest.raises(LexiconError, match=r"occ\.csv:3: 5 fields, the header has 4"):
        load_occupations(str(path))


def test_an_unterminated_quote_does_not_swallow_the_rows_after_it(tmp_path):
    path = _write(
        tmp_path / "occ.csv",
        OCC_HEADER + 'doctor,a,"doctor,doctor|doctors\npilot,a,pilot,pilot|pilots\n',
    )
    with pytest.raises(LexiconError, match=r"occ\.csv:2: "):
        load_occupations(str(path))


@pytest.mark.parametrize("form", ["'--", "&", "123", "--"])
def test_a_form_without_a_letter_is_refused(tmp_path, form):
    path = _write(tmp_path / "occ.csv", OCC_HEADER + f"doctor,a,doctor,doctor|{form}\n")
    with pytest.raises(LexiconError, match=r"occ\.csv:2: form .* of 'doctor' has no letter"):
        load_occupations(str(path))


def test_occupations_with_a_bom_and_quoted_fields_still_load(tmp_path):
    path = _write(
        tmp_path / "occ.csv",
        OCC_HEADER + 'doctor,a,doctor,"doctor|doctors"\nnurse,a,nurse,nurse|nurses\n',
        bom=True,
    )
    assert [o.name for o in load_occupations(str(path))] == ["doctor", "nurse"]


def _roles_text() -> str:
    return (BUILTIN_ROLES / "roles_en.csv").read_text(encoding="utf-8")


def test_roles_csv_with_excel_bom_is_read(tmp_path):
    path = _write(tmp_path / "roles.csv", _roles_text(), bom=True)
    assert len(load_roles(str(path))) == len(load_roles())


def test_roles_csv_with_a_field_over_128_kib_is_one_error(tmp_path):
    lines = _roles_text().splitlines()
    lines.append("huge,male,yes,,huge," + "a" * (200 * 1024) + ",,,")
    path = _write(tmp_path / "roles.csv", "\n".join(lines) + "\n")
    with pytest.raises(LexiconError, match=rf"roles\.csv:{len(lines)}: not valid CSV"):
        load_roles(str(path))


def test_roles_csv_with_a_stray_quote_is_an_error(tmp_path):
    lines = _roles_text().splitlines()
    lines.insert(2, 'pilot,male,yes,,"pilot,pilot|pilots,,,')
    path = _write(tmp_path / "roles.csv", "\n".join(lines) + "\n")
    with pytest.raises(LexiconError, match=r"roles\.csv:3: "):
        load_roles(str(path))


def test_roles_form_without_a_letter_is_refused(tmp_path):
    lines = _roles_text().splitlines()
    lines.append("pilot2,male,yes,,pilot2,pilot2|'--,,,")
    path = _write(tmp_path / "roles.csv", "\n".join(lines) + "\n")
    with pytest.raises(LexiconError, match="has no letter"):
        load_roles(str(path))


def test_templates_toml_with_excel_bom_is_read(tmp_path):
    text = (BUILTIN_ROLES / "templates_en.toml").read_text(encoding="utf-8")
    path = _write(tmp_path / "templates.toml", text, bom=True)
    import dataclasses

    read, builtin = load_templates(str(path)), load_templates()
    assert dataclasses.replace(read, path=builtin.path) == builtin


def test_labor_stats_are_read_strictly(tmp_path):
    path = _write(
        tmp_path / "stats.csv",
        'occupation,percent_female,note\nnurse,87.0,\ndoctor,"40,\npilot,5,\n',
    )
    with pytest.raises(LexiconError, match=r"stats\.csv:3: "):
        load_labor_stats(str(path))


def test_select_refuses_a_lenient_occupations_file_with_one_line(tmp_path, laion_path, capsys):
    """The issue's repro through the CLI: exit 2 and one line, not 701 captions and exit 0."""
    from corpus_audit.cli import main

    occ = _write(
        tmp_path / "occ.csv",
        OCC_HEADER + "nurse,a,nurse,nurse|nurses\ndoctor,a,doctor\",'--,doctor|doctors\n",
    )
    root = tmp_path / "s"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--sample-size", "5"]) == 0
    assert main(["config", "set", str(root), f"lexicon.occupations={occ}"]) == 0
    capsys.readouterr()
    assert main(["select", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "occ.csv:3" in err
