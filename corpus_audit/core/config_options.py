"""A backend's own settings table in ``study.toml``: ``[label.options]`` for the classifier
``label.classifier`` names (a plugin's, say), checked against the backend's own declaration.

A backend declares its settings as a small dataclass whose fields are declared like the
sections' keys (``Annotated[float, Range(ge=0), Help("...")] = 1.0``; the vocabulary of
:mod:`corpus_audit.core.config_fields`) and hands it to its registry entry as the attribute
``options`` (``ClassifierBackend(build, row_id, options=MyOptions)``). A section that holds
such a table declares it with :func:`options_field` and checks it in its ``rules()`` with
:func:`check_options`; the stage builds the backend with :func:`backend_options`, the same
values as an instance of the declaration. An unknown key, a value of the wrong type or out of
its range, or a table given to a backend that declares none is a
:class:`~corpus_audit.core.errors.ConfigError` naming ``section.options.key`` and the backend.

Nothing here imports a backend module: the registry is named by a lazy ``"module:NAME"``
string, loaded when a table is checked; an empty table loads nothing (a plugin's module is
imported only when its options are given). An empty table is not written to ``study.toml``
and leaves the section's hash as it was before the table existed (``omit_empty``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Annotated, Any

from corpus_audit.core.config_fields import Help, check_type, hints
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import Registry, load

#: a table whose default (empty) is left out of ``study.toml`` and of the section's hash
OMIT_EMPTY = {"omit_empty": True}

BackendOptions = Annotated[
    dict[str, Any],
    Help(
        "the backend's own settings, as it declares them (a plugin's options): unknown keys "
        "and wrong types are refused naming the key and the backend; {} = none"
    ),
]


def options_field() -> Any:
    """The ``options`` field of a section (``options: BackendOptions = options_field()``)."""
    return field(default_factory=dict, metadata=OMIT_EMPTY)


def _who(registry: Registry[Any], name: str) -> str:
    """``the classifier 'clip'``, or the plugin's description (its distribution)."""
    plugin = registry.plugin(name)
    return f"the {plugin.describe()}" if plugin is not None else f"the {registry.kind} {name!r}"


def declared(registry: Registry[Any], name: str) -> type | None:
    """The settings dataclass the entry ``name`` declares (its ``options``), or None."""
    options = getattr(registry.get(name), "options", None)
    return options if isinstance(options, type) and dataclasses.is_dataclass(options) else None


def backend_options(registry: str, name: str, values: dict[str, Any], prefix: str) -> Any:
    """``values`` (the ``prefix`` table, e.g. ``label.options``) as an instance of the
    settings the backend ``name`` of ``registry`` (``"module:NAME"``) declares, the keys not
    given at their defaults; None when it declares none and ``values`` is empty. :class:`ConfigError` naming ``prefix.key`` and
    the backend for an unknown key, a wrong type or a value out of range."""
    reg: Registry[Any] = load(registry)
    declaration = declared(reg, name)
    if declaration is None:
        if values:
            first = next(iter(values))
            raise ConfigError(f"{prefix}.{first}: {_who(reg, name)} declares no options")
        return None
    known = [f.name for f in dataclasses.fields(declaration) if f.init]
    annotations = hints(declaration)
    checked = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(
                f"{prefix}.{key}: not an option of {_who(reg, name)} "
                f"(its options: {', '.join(known) or 'none'})"
            )
        try:
            checked[key] = check_type(f"{prefix}.{key}", value, annotations[key])
        except ConfigError as exc:
            raise ConfigError(f"{exc} (an option of {_who(reg, name)})") from None
    try:
        return declaration(**checked)
    except ConfigError as exc:  # the declaration's own rules across its fields
        raise ConfigError(f"{prefix}: {exc} (the options of {_who(reg, name)})") from None


def check_options(registry: str, name: str, values: dict[str, Any], prefix: str) -> None:
    """:func:`backend_options` for its checks only (a section's ``rules()``); an empty table
    loads nothing."""
    if values:
        backend_options(registry, name, values, prefix)
