"""Each verb in one place: ``commands/verbs/<verb>.py`` holds its parser and its handler,
``cli.py`` only builds the parser from them, dispatches and turns errors into one line; the
rules of a verb (what ``init --kind`` sets, the notes of ``status``) live in ``core``."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import corpus_audit.cli
from corpus_audit.cli import build_parser, main
from corpus_audit.commands.verbs import VERBS
from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.core.catalogue import STAGE_NAMES, stage
from corpus_audit.core.errors import StudyError
from corpus_audit.core.kinds import LLM_LABOR_STATS, init_settings, kind_settings
from corpus_audit.core.registry import load
from corpus_audit.core.status_notes import NOTES

MAX_CLI_LINES = 200
# what a light command (`--help`, `status`, `config show`) must not load at parser building
HEAVY = ("duckdb", "numpy", "pandas", "torch", "spacy", "mediapipe", "diffusers",
         "transformers", "ray", "open_clip", "PIL")  # fmt: skip


def _verbs_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name."""
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _built_by(module: object) -> dict[str, argparse.ArgumentParser]:
    """The subcommands ``module.add_parser`` adds to an empty parser."""
    parser = argparse.ArgumentParser()
    module.add_parser(Subcommands(parser.add_subparsers(dest="command")))  # type: ignore[attr-defined]
    return _verbs_of(parser)


def test_cli_py_is_small() -> None:
    lines = Path(corpus_audit.cli.__file__).read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_CLI_LINES, f"cli.py has {lines} lines (at most {MAX_CLI_LINES})"


@pytest.mark.parametrize("module", VERBS, ids=lambda m: m.__name__.rpartition(".")[2])
def test_every_verb_has_its_parser_and_handler_in_its_module(module: object) -> None:
    built = _built_by(module)
    assert built, f"{module.__name__}.add_parser adds no subcommand"  # type: ignore[attr-defined]
    for name, parser in built.items():
        handler = parser.get_default("func")
        assert handler is module.run, f"{name}: handler {handler} is not in {module.__name__}"  # type: ignore[attr-defined]


def test_the_cli_has_exactly_the_verbs_of_the_verb_modules() -> None:
    from_modules = [name for module in VERBS for name in _built_by(module)]
    assert len(from_modules) == len(set(from_modules)), "a verb added by two modules"
    assert list(_verbs_of(build_parser())) == from_modules
    assert set(STAGE_NAMES) <= set(from_modules)


def test_a_stage_verb_takes_the_flags_of_its_declaration() -> None:
    parser = build_parser()
    args = parser.parse_args(["recaption", "d", "--model", "m", "--variant", "v"])
    assert set(stage("recaption").options) == {"model", "variant"}
    assert (args.model, args.variant) == ("m", "v")
    with pytest.raises(SystemExit):  # a stage declaring no options takes none
        parser.parse_args(["select", "d", "--model", "m"])


def test_building_the_parser_loads_no_heavy_library() -> None:
    code = (
        "import sys; from corpus_audit.cli import build_parser; build_parser(); "
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_status_note_names_a_function() -> None:
    for _, entry in NOTES:
        assert callable(load(entry)), entry


# -- what `init --kind` sets: core/kinds.py -----------------------------------------------------
def test_an_llm_study_takes_its_texts_from_the_models_and_the_labour_statistics() -> None:
    settings, notes = init_settings(
        "llm", has_corpus=False, models=["openai:m"], flags={"lexicon": {"occupations": "o.csv"}}
    )
    assert settings["llm"] == {"enabled": True, "models": ["openai:m"]}
    assert settings["texts"] == {"source": "llm"}
    assert settings["lexicon"] == {"labor_stats": LLM_LABOR_STATS, "occupations": "o.csv"}
    assert notes == []
    assert kind_settings("llm")["llm"] == {"enabled": True, "models": None}


def test_flags_win_over_the_preset_and_unset_flags_change_nothing() -> None:
    settings, _ = init_settings(
        "amplification",
        has_corpus=True,
        preset="paper",
        flags={"select": {"sample_size": 7}, "study": {"seed": None}},
    )
    assert settings["select"]["sample_size"] == 7
    assert "seed" not in settings.get("study", {})
    assert "pst" not in settings and "llm" not in settings


@pytest.mark.parametrize(
    ("kind", "has_corpus", "models", "message"),
    [
        ("amplification", False, None, "give --corpus"),
        ("pst", True, ["openai:m"], "--model is for a --kind llm study"),
        ("bogus", True, None, "unknown study kind"),
    ],
)
def test_init_settings_refuse_what_a_kind_cannot_take(kind, has_corpus, models, message) -> None:
    with pytest.raises(StudyError, match=message):
        init_settings(kind, has_corpus=has_corpus, models=models)


def test_init_llm_writes_the_kind_settings(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    assert main(["-q", "init", str(root), "--kind", "llm", "--model", "openai:gpt-x"]) == 0
    written = tomllib.loads((root / "study.toml").read_text(encoding="utf-8"))
    assert written["llm"]["enabled"] is True and written["llm"]["models"] == ["openai:gpt-x"]
    assert written["lexicon"]["labor_stats"] == LLM_LABOR_STATS
    assert main(["-q", "init", str(tmp_path / "t"), "--model", "openai:gpt-x"]) == 2
    assert "--model is for a --kind llm study" in capsys.readouterr().err


def test_battles_import_takes_sheets_or_arena_files_not_both(tmp_path, laion_path, capsys):
    root = tmp_path / "s"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--sample-size", "5"]) == 0
    sheet = tmp_path / "votes.csv"
    sheet.write_text("pair_id,aspect,vote\n", encoding="utf-8")
    arena = tmp_path / "votes.jsonl"
    arena.write_text("", encoding="utf-8")
    capsys.readouterr()
    assert main(["battles", "import", str(root), str(sheet), str(arena)]) == 2
    assert "not both in one call" in capsys.readouterr().err
    assert main(["battles", "import", str(root), str(sheet)]) == 2  # sheets: import_battles
    err = capsys.readouterr().err  # the runner names the missing stage and its command
    assert "`battles_export`, which has not run; run `corpus-audit battles export" in err
