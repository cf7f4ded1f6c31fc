"""One small registry for every kind of pluggable thing: stages, corpus readers, embedders,
generators, paraphrasers, classifiers, face detectors, image sources, captioners.

A registry maps a name (what a user writes in ``study.toml``) to an entry (a class, a factory
or a declaration). :meth:`Registry.get` names the known entries when the name is unknown, and
config validation takes its allowed values from :meth:`Registry.names`, so registering a new
backend is the only step that makes it usable.

Plugins: a registry made with an entry-point ``group`` (``corpus_audit.classifiers``,
``corpus_audit.generators``, ...: :data:`PLUGIN_GROUPS`) also holds the entry points that
installed distributions declare in that group, found the first time the registry is asked
for its names or an entry (never at import). An entry point's value is the same lazy
``"module:attribute"`` string a built-in entry may be, naming the object the registry holds
(a ``ClassifierBackend`` for a classifier); it is imported on first use. A built-in name wins
over a plugin of the same name (the plugin is listed as shadowed). A plugin whose module fails
to import raises :class:`PluginError`, one line naming the plugin, its distribution and the
error. Every use of a plugin is counted (:func:`plugin_uses_since`), so a stage run records
the plugins it used, with their distribution versions, in its provenance.
"""

from __future__ import annotations

import importlib
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Generic, TypeVar

from corpus_audit.core import interrupts
from corpus_audit.core.errors import ConfigError, shorten

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


# entry-point group -> the registry (lazy) that holds its plugins. A distribution declares one
# in its pyproject.toml: [project.entry-points."corpus_audit.classifiers"]
# mine = "my_package.module:BACKEND"; then label.classifier = "mine" in study.toml.
PLUGIN_GROUPS = {
    "corpus_audit.classifiers": "corpus_audit.backends.classifiers:CLASSIFIERS",
    "corpus_audit.generators": "corpus_audit.backends.generators:GENERATORS",
    "corpus_audit.text_generators": "corpus_audit.backends.text_generators:TEXT_GENERATORS",
    "corpus_audit.image_sources": "corpus_audit.backends.image_sources:SOURCES",
    "corpus_audit.corpus_readers": "corpus_audit.backends.corpus:READERS",
    "corpus_audit.embedders": "corpus_audit.backends.embeddings:EMBEDDERS",
}


class PluginError(ConfigError):
    """A plugin (an entry point of an installed distribution) that cannot be imported."""


@dataclass(frozen=True)
class Plugin:
    """One entry point found in a registry's group: where it comes from and what it names."""

    kind: str  # the registry's noun: "classifier"
    group: str  # "corpus_audit.classifiers"
    name: str  # what study.toml writes: label.classifier = "<name>"
    value: str  # "package.module:attribute"
    distribution: str  # the installed distribution that declares it ('' when unknown)
    version: str  # its version ('' when unknown)
    shadowed: bool = False  # a built-in entry has the same name (the built-in is used)
    # another distribution declares the same name first (by distribution name); this one is
    # not used: ``plugins`` lists both
    clashes_with: str = ""

    def describe(self) -> str:
        """``name (distribution version, group)`` for messages."""
        where = " ".join(p for p in (self.distribution, self.version) if p) or "unknown"
        where = shorten(where, 80)
        return (
            f"{self.kind} plugin {shorten(self.name)!r} ({where}, entry point group {self.group})"
        )


_USE_SEQUENCE = itertools.count(1)
_LAST_USE: dict[tuple[str, str], tuple[int, Plugin]] = {}  # (group, name) -> (use number, plugin)
_USE_LOCK = threading.Lock()


def plugin_use_mark() -> int:
    """A mark to pass to :func:`plugin_uses_since` (the number of plugin uses so far)."""
    with _USE_LOCK:
        return max((n for n, _ in _LAST_USE.values()), default=0)


def plugin_uses_since(mark: int) -> list[Plugin]:
    """The plugins whose entry was fetched (:meth:`Registry.get`) after ``mark``."""
    with _USE_LOCK:
        return sorted(
            (p for n, p in _LAST_USE.values() if n > mark), key=lambda p: (p.group, p.name)
        )


def _note_use(plugin: Plugin) -> None:
    with _USE_LOCK:
        _LAST_USE[(plugin.group, plugin.name)] = (next(_USE_SEQUENCE), plugin)


def group_entry_points(group: str) -> list[tuple[metadata.EntryPoint, str, str]]:
    """``(entry point, distribution name, version)`` of every entry point in ``group`` of
    the distributions on ``sys.path`` now, sorted by name."""
    out = []
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        name = dist.metadata["Name"] if dist is not None else ""
        out.append((ep, name or "", dist.version if dist is not None else ""))
    return sorted(out, key=lambda row: row[0].name)


def has_members(
    *, strings: Sequence[str] = (), classes: Sequence[str] = (), methods: Sequence[str] = ()
) -> Callable[[Any], bool]:
    """A test of a plugin's object for :attr:`Registry.expects`: true when each attribute of
    ``strings`` is a str, each of ``classes`` a class and each of ``methods`` callable."""

    def test(obj: Any) -> bool:
        return (
            all(isinstance(getattr(obj, n, None), str) for n in strings)
            and all(isinstance(getattr(obj, n, None), type) for n in classes)
            and all(callable(getattr(obj, n, None)) for n in methods)
        )

    return test


class Registry(Generic[T]):
    """Named entries of one kind, in registration order.

    ``kind`` is the noun used in messages ("corpus reader", "face detector"). An entry may be
    *lazy*: the string ``"package.module:attribute"``, imported by :meth:`get` on first use
    (:func:`load`), so a registry can name a backend whose module imports a heavy library
    (the ``ray`` engine) without importing it; :meth:`names` never imports.

    ``group``: the entry-point group whose plugins the registry also holds (module
    docstring); None for a registry without plugins.
    """

    def __init__(
        self,
        kind: str,
        group: str | None = None,
        expects: tuple[str, Callable[[Any], bool]] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        # what a plugin's entry point must name: (its description, a test of the object);
        # a plugin naming anything else is a PluginError when it loads (`plugins` lists it)
        self.expects = expects
        self._entries: dict[str, T] = {}
        self._plugins: dict[str, Plugin] = {}  # name -> plugin (shadowed ones included)
        self._clashes: list[Plugin] = []  # plugins a name clash leaves unused
        self._discovered = group is None
        self._lock = threading.Lock()

    def _discover(self) -> None:
        """Add the plugins of :attr:`group`, once (a built-in name keeps its entry)."""
        if self._discovered:
            return
        with self._lock:
            if self._discovered:
                return
            for ep, dist, version in group_entry_points(self.group or ""):
                shadowed = ep.name in self._entries and ep.name not in self._plugins
                if ep.name in self._plugins:  # two distributions declare one name
                    first = self._plugins[ep.name]  # the first on sys.path wins
                    if (first.distribution, first.value) != (dist, ep.value):
                        self._clashes.append(
                            Plugin(
                                self.kind,
                                self.group or "",
                                ep.name,
                                ep.value,
                                dist,
                                version,
                                clashes_with=first.distribution or "another distribution",
                            )
                        )
                    continue
                plugin = Plugin(
                    self.kind, self.group or "", ep.name, ep.value, dist, version, shadowed
                )
                if not shadowed:
                    self._entries[ep.name] = ep.value  # type: ignore[assignment]
                self._plugins[ep.name] = plugin
            self._discovered = True

    def plugins(self) -> list[Plugin]:
        """The plugins found in :attr:`group`, by name (shadowed ones included, and those a
        name clash leaves unused, right after the one that is used)."""
        self._discover()
        out = []
        for name in sorted(self._plugins):
            out.append(self._plugins[name])
            out.extend(p for p in self._clashes if p.name == name)
        return out

    def plugin(self, name: str) -> Plugin | None:
        """The plugin entry ``name`` comes from, or None for a built-in entry."""
        self._discover()
        plugin = self._plugins.get(name)
        return None if plugin is None or plugin.shadowed else plugin

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
        self._discover()
        try:
            entry = self._entries[name]
        except KeyError:
            known = ", ".join(self._entries) or "none"
            raise ConfigError(f"unknown {self.kind} {name!r} (known: {known})") from None
        plugin = self.plugin(name)
        if isinstance(entry, str):
            if plugin is None:
                entry = self._entries[name] = load(entry)
            else:
                loaded = _load_plugin(plugin)
                if self.expects is not None and not self.expects[1](loaded):
                    raise PluginError(
                        f"{plugin.describe()}: {shorten(plugin.value, 120)!r} names "
                        f"{_shown(loaded)}, not {self.expects[0]}"
                    )
                entry = self._entries[name] = loaded
        if plugin is not None:
            _note_use(plugin)
        return entry

    def names(self) -> tuple[str, ...]:
        """The registered names (built-in ones in registration order, then the plugins')."""
        self._discover()
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        self._discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        self._discover()
        return iter(tuple(self._entries))

    def items(self) -> list[tuple[str, T]]:
        self._discover()
        return list(self._entries.items())


def _load_plugin(plugin: Plugin) -> Any:
    """The object a plugin's entry point names; :class:`PluginError` (one line) when its
    module fails to import or lacks the attribute, whatever the plugin raised: also
    ``SystemExit`` (``sys.exit`` on import), ``KeyboardInterrupt`` the plugin raised itself
    (not a signal: :func:`interrupts.is_signal`) and any other ``BaseException``, which
    would otherwise end the command with the plugin's status and no word."""
    with interrupts.noting_signals():
        try:
            return load(plugin.value)
        except MemoryError:
            raise
        except KeyboardInterrupt as exc:
            if interrupts.is_signal(exc):
                raise
            raise _load_error(plugin, exc) from None
        except BaseException as exc:
            raise _load_error(plugin, exc) from None


def _shown(value: Any) -> str:
    """A short description of an object a plugin named."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return shorten(repr(value), 40)
    return f"a {shorten(type(value).__name__, 40)} object"


def _load_error(plugin: Plugin, exc: BaseException) -> PluginError:
    detail = " ".join(str(exc).split()) or "(no message)"
    if isinstance(exc, SystemExit):
        detail = f"exit status {exc.code!r}" if exc.code is not None else "exit status None"
    return PluginError(
        f"{plugin.describe()}: cannot load {shorten(plugin.value, 120)!r}: "
        f"{type(exc).__name__}: {shorten(detail, 300)}"
    )
