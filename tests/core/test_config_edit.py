"""``config set`` edits study.toml with tomlkit: every value reads back, comments stay (issue 32).

The old hand-written writer emitted a raw DEL (U+007F) that TOML forbids: ``config set``
reported success and the next command could not open the study. These tests write values
through the real command line, then open the study the way every command does.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from corpus_audit.cli import main
from corpus_audit.core.config import StudyConfig, load_config, toml_value, write_config
from corpus_audit.core.store import Study

C0 = "".join(chr(c) for c in range(1, 32))  # every C0 control but NUL (TOML has no NUL)
TEXTS = {
    "del": "a\x7fb",
    "c0": f"x{C0}y",
    "c1": "nel\x85next\x9fend",  # C1 controls: TOML allows them raw
    "separators": "line\u2028para\u2029end",
    "quotes": "she said \"hi\" and 'bye' \"\"\" ''' \\ \\\\ \\n \\u0041",
    "unicode": "Ärztin · 医生 · طبيبة · 👩\u200d⚕️ · \U0010fffd",
    "bidi": "a\u202eb\u2066c",
    "long": "long " * 4000,
    "toml-like": '[study]\nname = "x" # not a comment',
}


@pytest.fixture
def study_dir(tmp_path: Path, laion_path: Path) -> Path:
    root = tmp_path / "study"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--seed", "3"]) == 0
    return root


def _reopened(root: Path) -> StudyConfig:
    """The config as the next command sees it: the study opened (database and all)."""
    with Study.open(root) as study:
        return study.config


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_config_set_writes_every_text_so_the_study_opens_with_it(
    study_dir: Path, name: str, capsys
) -> None:
    text = TEXTS[name]
    # unquoted: the text itself (the ends are trimmed, so keep them printable)
    assert main(["-q", "config", "set", str(study_dir), f"study.name=<{text}>"]) == 0
    assert _reopened(study_dir).study.name == f"<{text}>"
    # a TOML value: a list of texts and a table of texts, written escaped and read back
    texts = toml_value([text, "A photo of a woman"])
    table = toml_value({"caption2": text})
    argv = ["config", "set", str(study_dir), f"label.texts={texts}", f"variants.columns={table}"]
    assert main(["-q", *argv]) == 0
    config = _reopened(study_dir)
    assert config.label.texts == [text, "A photo of a woman"]
    assert config.variants.columns == {"caption2": text}
    assert config.study.name == f"<{text}>" and config.study.seed == 3  # the rest is kept
    capsys.readouterr()


def test_a_raw_del_is_what_used_to_break_the_study(study_dir: Path) -> None:
    assert main(["-q", "config", "set", str(study_dir), "recaption.prompt=a\x7fb"]) == 0
    raw = (study_dir / "study.toml").read_text(encoding="utf-8")
    assert "\x7f" not in raw  # escaped, as TOML requires
    assert tomllib.loads(raw)["recaption"]["prompt"] == "a\x7fb"
    assert _reopened(study_dir).recaption.prompt == "a\x7fb"


def test_written_configs_read_back_every_text(tmp_path: Path) -> None:
    """``init`` and ``texts`` write the whole file (write_config): the same texts read back."""
    config = StudyConfig(root=tmp_path)
    config.study.name = "".join(TEXTS.values())
    config.label.texts = [TEXTS["del"], TEXTS["c0"]]
    config.corpus.paths = [TEXTS["quotes"], TEXTS["unicode"]]
    config.variants.columns = {"v1": TEXTS["c1"]}
    config.generate.api_prices = {TEXTS["quotes"]: 0.5, "dall-e-3:1024x1024": 1}
    write_config(config)
    assert load_config(tmp_path).to_dict() == config.to_dict()


def test_config_set_keeps_comments_order_and_layout(study_dir: Path) -> None:
    path = study_dir / "study.toml"
    original = (
        "# my study: do not touch the label settings\n"
        "[study]\n"
        'name = "nurses"  # shown in the report\n'
        "seed = 3 # the seed we registered\n"
        "\n"
        "# the sample we agreed on\n"
        "[select]\n"
        "sample_size = 7\n"
        "prefilter = true   # faster\n"
        "\n"
        "[label]\n"
        "# tried 0.8 first\n"
        "threshold = 0.9\n"
    )
    path.write_text(original, encoding="utf-8")
    argv = ["config", "set", str(study_dir), "study.seed=9", "label.threshold=0.8"]
    assert main(["-q", *argv, "select.overdraw=2", "analysis.bootstrap=50", "study.name=n"]) == 0
    assert main(["-q", "config", "set", str(study_dir), "label.batch_size=4"]) == 0
    edited = path.read_text(encoding="utf-8")
    expected = (
        original.replace('"nurses"', '"n"')
        .replace("seed = 3 #", "seed = 9 #")
        .replace("threshold = 0.9", "threshold = 0.8")
        .replace("faster\n", "faster\noverdraw = 2\n")
    )
    expected = expected.replace("threshold = 0.8\n", "threshold = 0.8\nbatch_size = 4\n")
    assert edited == expected + "\n[analysis]\nbootstrap = 50\n"
    config = load_config(study_dir)
    assert (config.study.seed, config.label.threshold, config.select.overdraw) == (9, 0.8, 2.0)
    assert config.analysis.bootstrap == 50 and config.select.sample_size == 7


def test_a_new_key_goes_after_the_last_key_of_its_section(study_dir: Path) -> None:
    """Not after the comment lines that introduce the next section."""
    path = study_dir / "study.toml"
    path.write_text(
        '[study]\nname = "x"\n\n# the sample we agreed on\n[select]\nsample_size = 7\n',
        encoding="utf-8",
    )
    assert main(["-q", "config", "set", str(study_dir), "study.seed=4"]) == 0
    assert path.read_text(encoding="utf-8") == (
        '[study]\nname = "x"\nseed = 4\n\n# the sample we agreed on\n[select]\nsample_size = 7\n'
    )


def test_config_set_refuses_text_that_is_not_utf8(study_dir: Path, capsys) -> None:
    """Undecodable command-line bytes arrive as lone surrogates: refused, file untouched."""
    before = (study_dir / "study.toml").read_bytes()
    assert main(["config", "set", str(study_dir), "study.name=a\udcffb"]) == 2
    assert "study.name: the value is not valid UTF-8 text" in capsys.readouterr().err
    assert (study_dir / "study.toml").read_bytes() == before


def test_config_show_and_set_agree_on_escapes(study_dir: Path, capsys) -> None:
    """What ``config show`` prints is TOML that reads back as the values set."""
    assert main(["-q", "config", "set", str(study_dir), 'study.name="tab\\there \\"q\\""']) == 0
    capsys.readouterr()
    assert main(["config", "show", str(study_dir)]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["study"]["name"] == 'tab\there "q"'


@pytest.mark.parametrize(
    "setting",
    ["llm.timeout_s=inf", "llm.backoff_s=nan", "llm.max_backoff_s=-inf", "generate.api_timeout=inf",
     "generate.api_backoff=nan", "generate.api_max_backoff=inf"],
)  # fmt: skip
def test_config_set_refuses_nan_and_infinite_durations(study_dir: Path, setting: str, capsys):
    """Issue 33 (Medium): ``config set`` accepted an infinite timeout or backoff, and the
    commands that read it failed later. Refused now, one line, the file unchanged (NaN and
    -inf were already refused by the ranges on 7afa816: the ``inf`` cases are the finding)."""
    before = (study_dir / "study.toml").read_bytes()
    assert main(["-q", "config", "set", str(study_dir), setting]) == 2
    err = capsys.readouterr().err.strip()
    key = setting.partition("=")[0]
    assert len(err.splitlines()) == 1 and f"{key}: " in err, err
    assert (study_dir / "study.toml").read_bytes() == before
