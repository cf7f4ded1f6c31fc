"""The command line: generated help for every setting, ``config show/set``, ``-q`` anywhere."""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path

import pytest

from corpus_audit.cli import build_parser, main
from corpus_audit.core.catalogue import STAGE_NAMES, stage
from corpus_audit.core.config import StudyConfig, load_config
from corpus_audit.core.config_help import field_help, section_classes, stage_help


@pytest.fixture
def study_dir(tmp_path: Path, laion_path: Path) -> Path:
    root = tmp_path / "study"
    assert main(["init", str(root), "--corpus", str(laion_path), "--seed", "3"]) == 0
    return root


def _sections() -> dict[str, type]:
    """The sections of study.toml, read off StudyConfig here (not through config_help)."""
    hints = typing.get_type_hints(StudyConfig)
    return {f.name: hints[f.name] for f in dataclasses.fields(StudyConfig) if f.name != "root"}


def test_every_config_field_has_a_meaning() -> None:
    assert set(section_classes()) == set(_sections())
    for name, cls in _sections().items():
        meanings = field_help(cls)
        for f in dataclasses.fields(cls):
            assert meanings.get(f.name, "").strip(), f"{name}.{f.name} has no Help in config.py"


def test_meanings_are_the_help_declared_with_the_fields() -> None:
    from corpus_audit.core.config import EngineSection, SelectSection

    engine = field_help(EngineSection)
    assert engine["threads"] == "DuckDB threads, >= 1"  # one line
    # a Help of several lines, joined in order
    assert engine["memory_limit"].startswith("DuckDB memory_limit: a number and a unit")
    assert engine["memory_limit"].endswith("or a share of the RAM (80%)")
    select = field_help(SelectSection)
    assert select["overdraw"].startswith("labelled_images: each subset ranks")
    assert "sample_unit" not in select["overdraw"] and "what N counts" in select["sample_unit"]


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name", STAGE_NAMES)
def test_stage_help_lists_every_setting_it_reads(capsys, name: str) -> None:
    text = _help(capsys, name)
    declared = stage(name)
    assert declared.summary[1:] in text
    for entry in declared.config:
        section, _, key = entry.partition(".")
        keys = [key] if key else [f.name for f in dataclasses.fields(_sections()[section])]
        for k in keys:
            assert f"  {section}.{k} (" in text, f"{name} --help lacks {section}.{k}"
    for table in (*declared.reads, *declared.writes):
        assert table in text
    for step in declared.steps:
        assert step.split()[0] in text


def test_label_help_shows_type_default_and_meaning(capsys) -> None:
    text = " ".join(_help(capsys, "label").split())  # unwrap the lines
    assert "label.threshold (float, default 0.9): winning probability needed" in text
    assert 'label.texts (list of str, default ["A photo of a man", "A photo of a woman"])' in text
    assert "images.max_pixels (int, default 89478485): decompression-bomb guard" in text
    assert 'engine.device (str, default "auto")' in text
    assert "study.seed (int, default 0)" in text
    assert "writes tables: face_filter, faces, labels" in text


def test_stage_help_is_the_generated_text(capsys) -> None:
    assert stage_help(stage("select")) in _help(capsys, "select")


@pytest.mark.parametrize(
    "argv",
    [["-q", "status", "D"], ["status", "-q", "D"], ["status", "D", "--quiet"], ["-q", "run", "D"]],
)
def test_quiet_before_or_after_the_verb(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).quiet is True


@pytest.mark.parametrize("argv", [["status", "D"], ["validate", "export", "D"], ["demo"]])
def test_not_quiet_by_default(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).quiet is False


def test_quiet_after_nested_verbs() -> None:
    args = build_parser().parse_args(["validate", "export", "D", "-q"])
    assert args.quiet is True and args.action == "export"
    assert build_parser().parse_args(["config", "show", "-q", "D"]).quiet is True


def test_config_show_prints_the_effective_config(study_dir: Path, capsys) -> None:
    (study_dir / "study.toml").write_text("[study]\nseed = 5\n[label]\nthreshold = 0.75\n")
    assert main(["config", "show", str(study_dir)]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["study"]["seed"] == 5 and shown["label"]["threshold"] == 0.75
    assert shown["label"]["classifier"] == "agegender"  # a default, filled in
    assert shown["select"]["sample_size"] == 500
    assert set(shown) == set(_sections())


def test_config_set_validates_and_writes(study_dir: Path, capsys) -> None:
    argv = ["config", "set", str(study_dir), "label.classifier=clip", "label.threshold=0.8"]
    assert main([*argv, 'generate.captions_as_prompts=["keyword", "nn"]', "-q"]) == 0
    out = capsys.readouterr().out
    assert 'label.classifier: "agegender" -> "clip"' in out
    assert "label.threshold: 0.9 -> 0.8" in out
    config = load_config(study_dir)
    assert config.label.classifier == "clip" and config.label.threshold == 0.8
    assert config.generate.captions_as_prompts == ["keyword", "nn"]
    assert config.study.seed == 3  # the rest is kept
    assert main(["config", "set", str(study_dir), "select.prefilter=false"]) == 0
    assert load_config(study_dir).select.prefilter is False
    assert not [p.name for p in study_dir.iterdir() if "tmp" in p.name]


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("label.threshold=0.3", "label.threshold: 0.3 is not in [0.5, 1]"),
        ("label.threshold=abc", "label.threshold: 'abc' is not a float value"),
        ("label.batch_size=true", "label.batch_size: expected int, got a boolean"),
        ("label.thresold=0.8", "label.thresold: unknown key in [label]"),
        ("labels.threshold=0.8", "labels.threshold: unknown section [labels]"),
        ("engine.device=gpu", "engine.device: 'gpu' is not auto, cpu, cuda, cuda:N or mps"),
        ("label=clip", "expected section.key=VALUE"),
        ("select.sample_size", "expected section.key=VALUE"),
    ],
)
def test_config_set_refuses_a_bad_value_without_touching_the_file(
    study_dir: Path, capsys, assignment: str, message: str
) -> None:
    before = (study_dir / "study.toml").read_bytes()
    # a good assignment first: all or nothing
    assert main(["config", "set", str(study_dir), "study.seed=9", assignment]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert (study_dir / "study.toml").read_bytes() == before
    assert sorted(p.name for p in study_dir.iterdir()) == ["study.duckdb", "study.toml"]


def test_config_on_a_folder_without_a_study(tmp_path: Path, capsys) -> None:
    assert main(["config", "show", str(tmp_path)]) == 2
    assert "no study config here" in capsys.readouterr().err
    assert main(["config", "set", str(tmp_path), "study.seed=1"]) == 2
    assert not (tmp_path / "study.toml").exists()
