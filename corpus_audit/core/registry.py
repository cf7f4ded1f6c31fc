"""One small registry for every kind of pluggable thing: stages, corpus readers, embedders,
generators, paraphrasers, classifiers, face detectors, image sources, captioners.

A registry maps a name (what a user writes in ``study.toml``) to an entry (a class, a factory
or a declaration). :meth:`Registry.get` names the known entries when the name is unknown, and
config validation takes its allowed values from :meth:`Registry.names`, so registering a new
backend is the only step that makes it usable.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from corpus_audit.core.errors import ConfigError

T = TypeVar("T")


def load(spec: str) -> Any:
    """The object a lazy entry ``"package.module:attribute"`` names, imported now.

    The one lazy-loading mechanism of the package: stage targets (``Stage.target``), engine
    factories and the registries config validation reads are such strings, so declaring a
    backend or a stage imports nothing until it is used (no torch, spaCy, MediaPipe or PIL at
    config validation). A missing module raises :class:`ModuleNotFoundError` for the caller
    to explain (an engine's optional extra, say).
    """
    module, _, attribute = spec.partition(":")
    if not attribute:
        raise ValueError(f"lazy entry {spec!r} is not of the form 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)


class Registry(Generic[T]):
    """Named entries of one kind, in registration order.

    ``kind`` is the noun used in messages ("corpus reader", "face detector"). An entry may be
    *lazy*: the string ``"package.module:attribute"``, imported by :meth:`get` on first use
    (:func:`load`), so a registry can name a backend whose module imports a heavy library
    (the ``ray`` engine) without importing it; :meth:`names` never imports.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; a name registered twice is a programming error."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> T:
        """Remove and return the entry ``name`` (a test's temporary backend, say)."""
        return self._entries.pop(name)

    def add(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`register`."""
        return lambda entry: self.register(name, entry)

    def get(self, name: str) -> T:
        """The entry named ``name`` (a lazy one imported now, and kept); :class:`ConfigError`
        naming the known ones otherwise. A lazy entry whose module is missing raises
        :class:`ModuleNotFoundError` for the caller to explain."""
        try:
            entry = self._entries[name]
        except KeyError:
            known = ", ".join(self._entries) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r} (known: {known})") from None
        if isinstance(entry, str):
            entry = self._entries[name] = load(entry)
        return entry

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())
