"""No setting is silently ignored (issue 41, point 3): for EVERY stage and EVERY setting its
catalogue entry declares, a change to another valid value makes the stage stale in `status`,
named, and the next run of the stage either redoes its work or says why it need not.

The walk uses one study, built once, on a real corpus file: every stage's run is recorded
through `Study.stage`, the bookkeeping every stage body runs in (what a stage writes is
tested in its own file; `test_label.py` reruns `label` with real models after
`label.threshold` and `label.min_face_fraction` change). Each setting gets another value that
`config set` would accept (validated by `config_from_dict`, as `config set` does), and then:

- `status` says ``config changed since this run (study.toml: KEY)``;
- a rerun that found nothing to redo (a skip, the case that hid the label.threshold bug)
  says either the stage's declared reason (``KEY changed: REASON``, `Stage.unaffected`) or
  ``KEY ... changed since the last run, but this run redid nothing``: never nothing.
"""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from corpus_audit.core.catalogue import STAGES
from corpus_audit.core.config import config_from_dict, section_classes
from corpus_audit.core.config_fields import OneOf, Registered
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.pipeline import init_study, stage_status, status
from corpus_audit.core.store import Study, changed_settings, setting_notes

# Values for settings whose other valid value cannot be guessed from the type (files that
# must exist, registered names, lists with rules); each is checked like any other.
EXPLICIT: dict[str, Any] = {
    "corpus.format": "parquet",
    "corpus.groups": {"*laion*": "LAION"},
    "storage.endpoint_url": "http://127.0.0.1:9000",
    "lexicon.occupations": "builtin:occupations_de.csv",
    "lexicon.prompts": ["builtin:prompts_en.csv"],
    "lexicon.gender_terms": "builtin:gender_terms_de.toml",
    "lexicon.labor_stats": "builtin:labor_stats_de.csv",
    "lexicon.official_stats": "builtin:official_stats_de.csv",
    "label.classifier": "clip",
    "label.texts": ["a photo of a man", "a photo of a woman"],
    "generate.models": ["fake:tiny"],
    "llm.models": ["openai:gpt-4o-mini"],
    "images.sources": [{"kind": "dir", "path": "images"}],
    "engine.device": "cpu",
    "indicators.ner_pipes": ["tok2vec", "ner"],
    "generate.api_key_env": "OTHER_API_KEY",
    "llm.api_key_env": "OTHER_API_KEY",
    "variants.columns": {"alt": "caption"},
    "pst.faircritic_writer": "transformers",
}
# Settings that have one valid value today (one registered backend): nothing to change to.
# The walk fails when a second value becomes valid, so the setting is then walked too.
ONE_VALUE = {"label.face_detector": "mediapipe", "neighbors.embedder": "sbert"}


def declared_settings() -> list[tuple[str, str]]:
    """``(stage, section.key)`` for every stage and every setting its ``config`` covers."""
    from corpus_audit.core.config import StudyConfig

    data = StudyConfig().to_dict()
    out = []
    for name, spec in STAGES.items():
        for entry in spec.config:
            section, _, key = entry.partition(".")
            for k in [key] if key else list(data[section]):
                out.append((name, f"{section}.{k}"))
    return out


SETTINGS = declared_settings()


def _annotation(key: str) -> Any:
    section, _, name = key.partition(".")
    return typing.get_type_hints(section_classes()[section], include_extras=True)[name]


def candidates(key: str, value: Any) -> list[Any]:
    """Other values to try for setting ``key`` (current ``value``), most natural first."""
    out: list[Any] = []
    if key in EXPLICIT:
        out.append(EXPLICIT[key])
    for marker in getattr(_annotation(key), "__metadata__", ()):
        if isinstance(marker, OneOf):
            out += [c for c in marker.choices if c != value]
        if isinstance(marker, Registered):
            out += list(marker.also)
            found = __import__("corpus_audit.core.registry", fromlist=["load"]).load(
                marker.registry
            )
            out += list(found.names() if hasattr(found, "names") else found())
    if isinstance(value, bool):
        out.append(not value)
    elif isinstance(value, int):
        out += [value + 1, value - 1, value * 2, 1, 0, 2]
    elif isinstance(value, float):
        out += [round(value + 0.05, 4), round(value - 0.05, 4), value * 2, 0.5, 0.95, 1.0, 1.5]
    elif isinstance(value, str):
        out += [value + "x", "x", "auto", "cpu", "4GB"]
    elif isinstance(value, list):
        out += [value + value[:1], value[:1], ["x"]] if value else [["x"]]
    elif isinstance(value, dict):
        out.append({})
    elif value is None:
        out += [1, "x", 0.5]
    return [c for c in out if c != value]


def another_valid_value(data: dict[str, Any], root: Path, key: str) -> Any:
    """A value of ``key`` other than the current one that the config checks accept."""
    section, _, name = key.partition(".")
    tried = []
    for value in candidates(key, data[section][name]):
        trial = copy.deepcopy(data)
        trial[section][name] = value
        try:
            config_from_dict(json.loads(json.dumps(trial, default=str)), root)
        except (ConfigError, TypeError, ValueError) as exc:
            tried.append(f"{value!r}: {exc}")
            continue
        return value
    pytest.fail(f"{key}: no other valid value among the candidates:\n" + "\n".join(tried))


@pytest.fixture(scope="module")
def walked(tmp_path_factory, laion_path) -> tuple[Study, dict]:
    """A study on the real LAION sample in which every stage has a recorded run, and the
    table fingerprints `status` caches (no table changes during the walk)."""
    root = tmp_path_factory.mktemp("walk") / "study"
    study = init_study(root, [str(laion_path)])
    for name in STAGES.names():
        with study.stage(name):
            pass
    fingerprints: dict = {}
    status(study)  # every stage current
    yield study, fingerprints
    study.close()


@pytest.mark.parametrize(("stage", "key"), SETTINGS, ids=[f"{s}:{k}" for s, k in SETTINGS])
def test_a_changed_setting_is_stale_and_never_silent(walked, stage: str, key: str):
    study, fingerprints = walked
    assert stage_status(study, stage, fingerprints).note == ""
    data = study.config.to_dict()
    section, _, name = key.partition(".")
    if key in ONE_VALUE:
        assert data[section][name] == ONE_VALUE[key]
        for other in candidates(key, ONE_VALUE[key]):
            trial = copy.deepcopy(data)
            trial[section][name] = other
            with pytest.raises(ConfigError):
                config_from_dict(trial, study.root)
        return
    value = another_valid_value(data, study.root, key)
    target = getattr(study.config, section)
    before = getattr(target, name)
    try:
        setattr(target, name, _typed(target, name, value))
        note = stage_status(study, stage, fingerprints).note
        assert f"config changed since this run (study.toml: {key}" in note, note
        # what the next run of the stage says when it finds nothing to redo (Study.stage
        # appends these notes to every run: see test_the_rerun_itself_says_it below)
        values = study.config.setting_values(*STAGES.get(stage).config)
        changed = changed_settings(study.last_run(stage), values)
        assert changed == [key]
        said = " | ".join(setting_notes(stage, changed, skipped=True))
        reason = STAGES.get(stage).unaffected_reason(key)
        if reason is not None:
            assert said == f"{key} changed: {reason}"
        else:
            assert said == (
                f"{key} changed since the last run, but this run redid nothing: its stored "
                "results keep the earlier value"
            )
            # a run that redid its work does not claim it ignored the setting
            assert setting_notes(stage, changed, skipped=False) == []
    finally:
        setattr(target, name, before)


def test_the_rerun_itself_says_it(walked):
    """The notes above are what a real run records: `label` reruns after a speed setting
    (declared) and after a face setting that the run then found nothing to redo for."""
    study, _ = walked
    study.config.label.batch_size = 7
    study.config.label.clip_model = "ViT-B-32"
    try:
        with study.stage("label") as run:
            run.skipped = True
        assert run.messages == [
            f"label.batch_size changed: {STAGES.get('label').unaffected_reason('label.batch_size')}",
            "label.clip_model changed since the last run, but this run redid nothing: its "
            "stored results keep the earlier value",
        ]
        recorded = study.last_run("label")["provenance"]
        assert recorded["messages"] == run.messages
        assert recorded["config_values"]["label.batch_size"] == 7
        assert stage_status(study, "label").note.startswith("rerun ")  # counts of the done run
    finally:
        study.config.label.batch_size = 32
        study.config.label.clip_model = "ViT-L-14"
        with study.stage("label"):
            pass


def _typed(section: Any, name: str, value: Any) -> Any:
    """``value`` as the section's field holds it (a config built from the dict)."""
    cls = type(section)
    data = {name: value}
    built = config_from_dict(
        {"study": {}, **{_section_of(cls): data}}, Path(".")
    )  # the field's own conversion
    return getattr(getattr(built, _section_of(cls)), name)


def _section_of(cls: type) -> str:
    return {c: n for n, c in section_classes().items()}[cls]


def test_every_unaffected_reason_names_a_declared_setting():
    """A stage's reasons cover only settings it declares, and each says something."""
    declared = {(s, k) for s, k in declared_settings()}
    for name, spec in STAGES.items():
        for key, reason in spec.unaffected.items():
            keys = {k for s, k in declared if s == name}
            assert key in keys or any(k.startswith(key + ".") for k in keys), (name, key)
            assert len(reason) > 10
