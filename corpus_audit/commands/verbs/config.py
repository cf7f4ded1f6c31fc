"""``corpus-audit config show|set DIR``: the effective ``study.toml``, or settings changed in
it (the work: :mod:`corpus_audit.core.config_edit`)."""

from __future__ import annotations

import argparse
from typing import Any

from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.core.config import dump_toml
from corpus_audit.core.config_edit import set_config, show_config
from corpus_audit.core.errors import printable


def add_parser(sub: Subcommands) -> None:
    """``config show`` / ``config set`` (corpus_audit/core/config_edit.py)."""
    p = sub.add_parser(
        "config", func=run, help="show the effective study.toml, or change settings in it"
    )
    actions = sub.nested(p)
    actions.add_study_parser("show", help="print the effective config (every setting) as TOML")
    assign = actions.add_study_parser(
        "set",
        help="change settings, validated like a stage loads them; the file is left as it was "
        "when one is invalid",
        description="Change settings in DIR/study.toml. VALUE is a TOML value (0.8, true, "
        '["a", "b"]); text needs no quotes. Every setting and its meaning: `corpus-audit '
        "STAGE --help`.",
    )
    assign.add_argument(
        "assignments",
        nargs="+",
        metavar="section.key=VALUE",
        help="settings to change, e.g. label.threshold=0.8",
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        print(printable(show_config(args.dir), keep_newlines=True), end="")
        return 0
    for key, old, new in set_config(args.dir, args.assignments):
        print(f"{printable(key)}: {setting(old)} -> {setting(new)}")
    return 0


def setting(value: Any) -> str:
    """``value`` as ``study.toml`` writes it (``0.8``, ``"a"``, ``["a", "b"]``)."""
    return printable(dump_toml({"s": {"v": value}}).splitlines()[1].removeprefix("v = "))
