"""``corpus-audit plugins``: the backends installed distributions add through entry points
(the work: :func:`corpus_audit.commands.plugins.plugin_statuses`)."""

from __future__ import annotations

import argparse
import sys

from corpus_audit.commands.plugins import plugin_statuses
from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.core.errors import printable, shorten
from corpus_audit.core.registry import PLUGIN_GROUPS


def add_parser(sub: Subcommands) -> None:
    sub.add_parser(
        "plugins",
        func=run,
        help="list the classifiers, generators, readers, ... that installed packages add",
        description="List the plugins installed distributions declare in the entry point "
        f"groups {', '.join(PLUGIN_GROUPS)}, with their versions, and import each.",
    )


def run(args: argparse.Namespace) -> int:
    """Print the plugins; status 2 when one fails to import."""
    rows = plugin_statuses()
    if not rows:
        print(f"no plugins installed (entry point groups: {', '.join(PLUGIN_GROUPS)})")
        return 0
    failed = 0
    for row in rows:
        p = row.plugin
        state = "ok" if not row.error else ("shadowed" if p.shadowed else "FAILED")
        if p.clashes_with:
            state = "CLASH"
        print(
            f"{p.group}  {shorten(p.name)}  {shorten(p.distribution or '-', 80)} "
            f"{shorten(p.version or '-', 40)}  {shorten(p.value, 120)}  {state}"
        )
        if row.error and not p.shadowed:
            failed += 1
            print(f"error: {printable(row.error)}", file=sys.stderr)
    return 2 if failed else 0
