"""``corpus-audit plugins``: the backends installed distributions add through entry points.

One row per entry point of the groups in
:data:`corpus_audit.core.registry.PLUGIN_GROUPS` (``corpus_audit.classifiers``, ...): its
name (what ``study.toml`` writes), the distribution and version that declare it, the object
it names, and whether it imports. A plugin that fails to import (whatever it raises,
``SystemExit`` included), that names an object of the wrong kind, or that a name clash leaves
unused (two distributions declaring one name: both are listed) is also one line on stderr
naming the plugin and the problem, and the exit status is then 2. Names are cut in messages
(:func:`corpus_audit.core.errors.shorten`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.core.registry import PLUGIN_GROUPS, Plugin, Registry, load


@dataclass(frozen=True)
class PluginStatus:
    """A plugin and whether its entry loads: ``error`` is '' when it does."""

    plugin: Plugin
    error: str = ""


def plugin_statuses(*, check: bool = True) -> list[PluginStatus]:
    """Every plugin of every group, by group and name; ``check`` imports each (its module
    runs) to fill in ``error``."""
    out = []
    for spec in PLUGIN_GROUPS.values():
        registry: Registry[Any] = load(spec)
        for plugin in registry.plugins():
            error = ""
            if plugin.clashes_with:
                error = (
                    f"{plugin.describe()}: not used: {plugin.clashes_with} declares the same "
                    "name first (on sys.path) and is used; uninstall one of the two"
                )
            elif plugin.shadowed:
                error = f"shadowed by the built-in {plugin.kind} {plugin.name!r}"
            elif check:
                try:
                    registry.get(plugin.name)
                except CorpusAuditError as exc:
                    error = str(exc)
            out.append(PluginStatus(plugin, error))
    return out
