"""`corpus-audit --help` and every command's help, as a user reads them: grouped and short,
every command with a description and an example, every positional documented, one naming
style (hyphens, the underscore spellings still accepted), `run --until` checked against the
study's kind."""

from __future__ import annotations

import argparse
import re

import pytest

from corpus_audit.cli import build_parser, main
from corpus_audit.core.catalogue import ON_DEMAND, RUN_ORDERS, STAGE_NAMES


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) of every command and nested action, each once (aliases skipped)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) in seen:
                    continue
                seen.add(id(sub))
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(build_parser()))


def test_top_level_help_is_grouped_and_fits_40_lines(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert len(out.splitlines()) <= 40, out
    for title in (
        "study:",
        "stages of an amplification study",
        "stages of a PST study",
        "stages of an LLM study",
        "import and export:",
        "tools:",
    ):
        assert title in out
    top = {path[0] for path, _ in COMMANDS if len(path) == 1}
    words = set(re.findall(r"[a-z][a-z-]+", out))
    assert top <= words, top - words  # every command is listed
    assert "_" not in out.split("stages of")[1].split("import and export")[0]  # hyphens


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_has_a_description_and_an_example(path):
    sub = dict(COMMANDS)[path]
    text = sub.format_help()
    assert sub.description, path
    assert "\nexample:\n  corpus-audit " + " ".join(path) in text, text
    assert "_" not in path[-1]  # one naming style


def test_every_positional_is_documented():
    undocumented = [
        f"{' '.join(path)} {action.dest}"
        for path, sub in COMMANDS
        for action in sub._actions
        if not action.option_strings
        and not isinstance(action, argparse._SubParsersAction)
        and not action.help
    ]
    assert undocumented == []


def test_underscore_spellings_are_still_accepted():
    parser = build_parser()
    for name in STAGE_NAMES:
        hyphen = parser.parse_args([name.replace("_", "-"), "d"])
        under = parser.parse_args([name, "d"])
        assert hyphen.stage_name == under.stage_name == name
    assert parser.parse_args(["fetch_models"]).func is parser.parse_args(["fetch-models"]).func
    assert parser.parse_args(["import_images", "d", "x"]).func is not None


def test_run_until_offers_the_kind_stages(capsys):
    text = dict(COMMANDS)[("run",)].format_help()
    for kind, order in RUN_ORDERS.items():
        assert " ".join(dict.fromkeys(n.replace("_", "-") for n in order)) in " ".join(
            text.split()
        ), kind
    assert all(n not in text for n in ON_DEMAND)


def test_run_until_a_stage_of_another_kind_is_one_line(make_study, laion_path, capsys):
    root = make_study([laion_path]).root
    assert main(["run", str(root), "--until", "pst-label"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: stage 'pst_label' is not run in a amplification study")
    assert "who_how" in err and "pst_prompts" not in err
