"""Help text generated from the config classes and the stage catalogue, so it cannot drift.

Every ``study.toml`` setting is a field of a section dataclass in :mod:`corpus_audit.core.config`,
declared once with its type, default, constraints and meaning (its ``Help``,
:mod:`corpus_audit.core.config_fields`). :func:`settings` reads the declarations: the same
ones the checker reads. ``tests/commands/test_cli.py`` checks that every field has a non-empty
meaning, so a new setting without one fails the tests instead of showing an empty line in the
help.

:func:`stage_help` is what ``corpus-audit STAGE --help`` prints under the usage line: the
stage's summary, steps, the tables it reads and writes (from :mod:`corpus_audit.core.catalogue`) and
every setting it reads, as ``section.key (type, default VALUE): meaning``.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
import typing
from dataclasses import dataclass
from typing import Any

from corpus_audit.core.catalogue import Stage, writers
from corpus_audit.core.config import section_classes, toml_value
from corpus_audit.core.config_fields import field_help, hints, split_annotation
from corpus_audit.core.errors import ConfigError

__all__ = ["Setting", "field_help", "section_classes", "setting", "settings", "stage_help"]

WIDTH = 100  # columns of the generated help text


@dataclass(frozen=True)
class Setting:
    """One ``study.toml`` key: ``key`` is ``section.name``; ``default`` is TOML text."""

    key: str
    type: str
    default: str
    meaning: str

    def line(self) -> str:
        """``key (type, default VALUE): meaning``, wrapped to :data:`WIDTH` columns."""
        head = f"{self.key} ({self.type}, default {self.default}): "
        return textwrap.fill(
            head + self.meaning, WIDTH, initial_indent="  ", subsequent_indent="      "
        )


def section_doc(section: str) -> str:
    """The one-paragraph description of ``[section]`` (its class docstring)."""
    cls = section_classes()[section]
    return " ".join((inspect.getdoc(cls) or "").split())


def _type_text(annotation: Any) -> str:
    annotation, _ = split_annotation(annotation)
    origin = typing.get_origin(annotation)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return f"list of {_type_text(item)}"
    if origin is dict:
        return "table"
    return getattr(annotation, "__name__", str(annotation))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc]


def settings(section: str) -> list[Setting]:
    """Every key of ``[section]`` with its type, default and meaning, in file order."""
    cls = section_classes()[section]
    annotations = hints(cls)
    meanings = field_help(cls)
    return [
        Setting(
            f"{section}.{f.name}",
            _type_text(annotations[f.name]),
            toml_value(_default(f)),
            meanings.get(f.name, ""),
        )
        for f in dataclasses.fields(cls)
    ]


def setting(key: str) -> Setting:
    """The :class:`Setting` of ``section.key`` (:class:`ConfigError` when there is none)."""
    section, _, name = key.partition(".")
    if section not in section_classes():
        known = ", ".join(section_classes())
        raise ConfigError(f"{key}: unknown section [{section}] (known: {known})")
    for s in settings(section):
        if s.key == key:
            return s
    known = ", ".join(s.key.partition(".")[2] for s in settings(section))
    raise ConfigError(f"{key}: unknown key in [{section}] (known: {known})")


def stage_settings(stage: Stage) -> list[Setting]:
    """The settings ``stage`` reads: whole sections and single ``section.key`` entries."""
    out: list[Setting] = []
    for entry in stage.config:
        out.extend(settings(entry) if "." not in entry else [setting(entry)])
    return out


def stage_help(stage: Stage) -> str:
    """The ``--help`` description of ``stage`` (see the module docstring)."""
    lines = [textwrap.fill(stage.summary[:1].upper() + stage.summary[1:] + ".", WIDTH), ""]
    if stage.steps:
        lines.append("steps:")
        lines += [
            textwrap.fill(step, WIDTH, initial_indent=f"  {i}. ", subsequent_indent="     ")
            for i, step in enumerate(stage.steps, start=1)
        ]
    if stage.reads:
        reads = [f"{t} ({', '.join(writers(t)) or 'input'})" for t in stage.reads]
        lines.append(textwrap.fill("reads tables: " + ", ".join(reads), WIDTH))
    if stage.writes:
        writes = [f"{t} (rows {stage.owns[t]})" if t in stage.owns else t for t in stage.writes]
        lines.append(textwrap.fill("writes tables: " + ", ".join(writes), WIDTH))
    if stage.needs:
        lines.append("needs (must have run): " + ", ".join(stage.needs))
    if stage.after:
        lines.append("uses the tables of (when they ran): " + ", ".join(stage.after))
    lines += ["", "settings it reads (study.toml; `corpus-audit config set DIR KEY=VALUE`):"]
    lines += [s.line() for s in stage_settings(stage)]
    return "\n".join(lines)
