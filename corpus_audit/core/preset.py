"""Presets: named sets of study settings kept as data (``corpus_audit/core/presets/<name>.toml``).

A preset file holds study.toml sections with the keys it sets and a ``[preset]`` table
(``name``, ``description``, ``first_installed``: keys whose value is the first installed of a
list, e.g. the paper's spaCy pipeline or, when it is missing, the closest one). ``paper`` holds
the settings of Seshadri, Singh & Elazar; :func:`differences` compares a study's config with it
(the report header lists them, ``analyze`` counts them).
"""

from __future__ import annotations

import importlib.util
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from corpus_audit.core.config import ConfigError, StudyConfig, config_from_dict

PAPER = "paper"


@dataclass(frozen=True)
class Preset:
    """One preset file: ``values`` (section -> key -> value), ``first_installed``
    (``"section.key"`` -> candidates, first preferred) and its ``description``."""

    name: str
    description: str
    values: dict[str, dict[str, Any]]
    first_installed: dict[str, list[str]] = field(default_factory=dict)


def preset_names() -> list[str]:
    """Names of the presets shipped with corpus_audit."""
    folder = resources.files("corpus_audit").joinpath("core", "presets")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_preset(name: str) -> Preset:
    """The preset called ``name``; :class:`ConfigError` naming the known ones otherwise."""
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r} (known: {', '.join(preset_names())})")
    path = resources.files("corpus_audit").joinpath("core", "presets", f"{name}.toml")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    meta = data.pop("preset", {})
    config_from_dict(data, root=".", source=f"preset {name}")  # validates sections and keys
    return Preset(
        name=meta.get("name", name),
        description=meta.get("description", ""),
        values=data,
        first_installed={k: list(v) for k, v in meta.get("first_installed", {}).items()},
    )


def installed(package: str) -> bool:
    """Whether a Python package (a spaCy pipeline is one) can be imported here."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def resolve(preset: Preset) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The preset's overrides for ``init`` with each ``first_installed`` key set to the first
    installed candidate, and one note per key where that is not the preferred one."""
    values = {section: dict(keys) for section, keys in preset.values.items()}
    notes = []
    for dotted, candidates in preset.first_installed.items():
        section, key = dotted.split(".", 1)
        chosen = next((c for c in candidates if installed(c)), None)
        if chosen is None:
            notes.append(
                f"{dotted}: none of {', '.join(candidates)} is installed; kept "
                f"{candidates[0]!r} (install it before running the stage)"
            )
            chosen = candidates[0]
        elif chosen != candidates[0]:
            notes.append(
                f"{dotted}: the {preset.name} preset's {candidates[0]!r} is not installed; "
                f"using {chosen!r}, the closest installed (install {candidates[0]} for the "
                f"{preset.name}'s)"
            )
        values.setdefault(section, {})[key] = chosen
    return values, notes


def differences(config: StudyConfig, preset: Preset) -> list[dict[str, Any]]:
    """Every setting the preset names whose value in ``config`` differs: ``key``
    (``section.key``), ``study`` and ``preset`` values, in the preset file's order."""
    out = []
    for section, keys in preset.values.items():
        current = getattr(config, section)
        for key, wanted in keys.items():
            have = getattr(current, key)
            if isinstance(wanted, float) or isinstance(have, float):
                same = isinstance(have, int | float) and abs(float(have) - float(wanted)) < 1e-12
            else:
                same = have == wanted
            if not same:
                out.append({"key": f"{section}.{key}", "study": have, "preset": wanted})
    return out


def paper_differences(config: StudyConfig) -> list[dict[str, Any]]:
    """:func:`differences` against the ``paper`` preset; a ``first_installed`` key compares
    with the paper's own choice (the first candidate)."""
    preset = load_preset(PAPER)
    return differences(config, preset)
