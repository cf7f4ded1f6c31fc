"""What every verb module uses: the subcommand adder that gives each verb the shared flags,
``--out`` as a path, and the study a verb opens.

A verb module (``corpus_audit/commands/verbs/<verb>.py``) holds ``add_parser(sub)``, which adds
its subcommand(s) with ``sub.add_parser(name, func=run, ...)``, and ``run(args) -> int``, the
handler; the CLI builds the parser from :data:`corpus_audit.commands.verbs.VERBS` and
dispatches to ``args.func``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corpus_audit.core.store import Study


class Subcommands:
    """``add_subparsers()``'s action, giving every subcommand the shared ``parents``."""

    def __init__(self, action: Any, parents: list[argparse.ArgumentParser] | None = None) -> None:
        self.action = action
        self.parents = parents or []

    def add_parser(
        self, name: str, func: Callable[[argparse.Namespace], int] | None = None, **kwargs: Any
    ) -> argparse.ArgumentParser:
        """The subcommand ``name``; ``func`` (the verb module's ``run``) handles it."""
        parser = self.action.add_parser(name, parents=self.parents, **kwargs)
        if func is not None:
            parser.set_defaults(func=func)
        return parser

    def nested(self, parser: argparse.ArgumentParser) -> Subcommands:
        """``parser``'s own actions (``config show``, ``validate export``), same parents."""
        return Subcommands(parser.add_subparsers(dest="action", required=True), self.parents)


def add_switch(parser: argparse.ArgumentParser, name: str, help: str) -> None:
    """An on/off option ``name`` (``--strict``): False unless given."""
    parser.add_argument(name, action="store_true", help=help)


def out_path(args: argparse.Namespace) -> Path | None:
    """``--out`` as a path; None (the command's own default) when it is not given."""
    return Path(args.out) if args.out else None


def open_study(args: argparse.Namespace) -> Study:
    """The study in ``args.dir`` (a directory or its ``study.toml``), open; use it as a
    context manager. The store (DuckDB) is imported here, not when the parser is built."""
    from corpus_audit.core.store import Study

    return Study.open(args.dir)
