"""A backend's own settings table (issue 45, 3): a classifier plugin declares its options, a
study holds them in ``[label.options]``, the config checks them against the declaration
(unknown key, wrong type, out of range: one line naming ``label.options.KEY`` and the
plugin), ``build`` gets them typed, ``config set`` edits them, and a study without the table
keeps its ``[label]`` hash and file."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from corpus_audit.backends import classifiers
from corpus_audit.core.config import StudyConfig, config_from_dict, load_config, write_config
from corpus_audit.core.config_edit import set_config, set_values, show_config
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import Registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_registries import _dist_info  # noqa: E402  (the suite's way to install a plugin)

PLUGIN = """
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from corpus_audit import ClassifierBackend
from corpus_audit.core.config_fields import Help, OneOf, Range


@dataclass(frozen=True)
class Options:
    bias: Annotated[float, Range(ge=0, le=1), Help("p_female of every image, in [0, 1]")] = 0.5
    mode: Annotated[str, OneOf(("fixed", "echo")), Help("fixed | echo")] = "fixed"


class Model:
    def __init__(self, options):
        self.options = options
        self.id = "opted:1"
        self.provenance = {"classifier": self.id, "bias": options.bias, "mode": options.mode}

    def p_female(self, images, faces):
        return np.full(len(images), self.options.bias)

    def close(self):
        pass


BACKEND = ClassifierBackend(
    lambda label, *, device, seed, options: Model(options), lambda label: "opted:1", Options
)
"""


@pytest.fixture
def opted(monkeypatch, tmp_path: Path) -> str:
    """The plugin ``opted`` (distribution ``opted-plugin`` 1.0) installed for this test, in a
    fresh classifier registry (the built-ins copied)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "opted_plugin_mod.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    _dist_info(site, "opted-plugin", "1.0", "corpus_audit.classifiers",
               {"opted": "opted_plugin_mod:BACKEND"})  # fmt: skip
    monkeypatch.syspath_prepend(str(site))
    fresh: Registry = Registry("classifier", "corpus_audit.classifiers")
    for name in ("agegender", "clip"):
        fresh.register(name, classifiers.CLASSIFIERS.get(name))
    monkeypatch.setattr(classifiers, "CLASSIFIERS", fresh)
    return "opted"


def _label(tmp_path: Path, **options) -> StudyConfig:
    return config_from_dict({"label": {"classifier": "opted", "options": options}}, tmp_path)


def test_the_declared_options_are_checked_and_reach_the_backend(opted, tmp_path) -> None:
    config = _label(tmp_path, bias=0.25)
    built = classifiers.build_classifier(config.label)
    assert built.provenance == {"classifier": "opted:1", "bias": 0.25, "mode": "fixed"}
    assert built.p_female([np.zeros((4, 4, 3), np.uint8)], [None]).tolist() == [0.25]
    defaults = classifiers.build_classifier(_label(tmp_path).label)  # none given: defaults
    assert defaults.provenance["bias"] == 0.5
    assert _label(tmp_path, bias=1).label.options == {"bias": 1}  # an int is a float here


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"biass": 0.3}, r"label\.options\.biass: not an option of the classifier plugin "
                         r"'opted' \(opted-plugin 1\.0, .*\) \(its options: bias, mode\)"),
        ({"bias": "high"}, r"label\.options\.bias: expected float, got str 'high' \(an option "
                           r"of the classifier plugin 'opted'"),
        ({"bias": 2.0}, r"label\.options\.bias: 2\.0 is not in \[0, 1\] \(an option of"),
        ({"mode": "loud"}, r"label\.options\.mode: 'loud' is not one of \['fixed', 'echo'\]"),
    ],
)  # fmt: skip
def test_an_option_not_declared_or_of_the_wrong_type_is_refused(
    opted, tmp_path, options, message
) -> None:
    with pytest.raises(ConfigError, match=message):
        _label(tmp_path, **options)


def test_a_backend_without_options_refuses_a_table_and_an_empty_one_changes_nothing(
    tmp_path,
) -> None:
    with pytest.raises(ConfigError, match=r"label\.options\.x: the classifier 'agegender' "
                                          r"declares no options"):  # fmt: skip
        config_from_dict({"label": {"options": {"x": 1}}}, tmp_path)
    plain = StudyConfig(root=tmp_path)
    assert "options" not in plain.to_dict()["label"]  # the [label] hash of before the table
    assert plain.setting_values("label.options") == {"label.options": {}}
    write_config(plain)
    assert "options" not in (tmp_path / "study.toml").read_text(encoding="utf-8")
    same = config_from_dict({"label": {"options": {}}}, tmp_path)
    assert same.section_hash("label") == plain.section_hash("label")


def test_config_set_edits_a_backend_option_and_it_reads_back(opted, tmp_path) -> None:
    (tmp_path / "study.toml").write_text('[label]\nclassifier = "opted"\n', encoding="utf-8")
    before = load_config(tmp_path).section_hash("label")
    changes = set_config(tmp_path, ["label.options.bias=0.75"])
    assert changes == [("label.options", {}, {"bias": 0.75})]
    assert load_config(tmp_path).label.options == {"bias": 0.75}
    assert load_config(tmp_path).section_hash("label") != before  # the label stage sees it
    set_config(tmp_path, ["label.options.mode=echo"])  # unquoted text, added to the table
    assert load_config(tmp_path).label.options == {"bias": 0.75, "mode": "echo"}
    assert 'options = {bias = 0.75, mode = "echo"}' in show_config(tmp_path)
    set_values(tmp_path, {"label.options": {"mode": "fixed"}})  # the whole table
    assert load_config(tmp_path).label.options == {"mode": "fixed"}
    text = (tmp_path / "study.toml").read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match=r"label\.options\.nope: not an option"):
        set_config(tmp_path, ["label.options.nope=1"])
    with pytest.raises(ConfigError, match=r"label\.threshold\.x: label\.threshold is not a table"):
        set_config(tmp_path, ["label.threshold.x=1"])
    assert (tmp_path / "study.toml").read_text(encoding="utf-8") == text  # untouched
