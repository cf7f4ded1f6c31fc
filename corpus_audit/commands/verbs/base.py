"""What every verb module uses: the subcommand adder that gives each verb the shared flags,
``--out`` as a path, and the study a verb opens.

A verb module (``corpus_audit/commands/verbs/<verb>.py``) holds ``add_parser(sub)``, which adds
its subcommand(s) with ``sub.add_parser(name, func=run, ...)`` (``sub.add_study_parser`` for a
command on one study: ``DIR`` first), and ``run(args) -> int``, the handler; the CLI builds
the parser from :data:`corpus_audit.commands.verbs.VERBS` and dispatches to ``args.func``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corpus_audit.commands.verbs.examples import example

if TYPE_CHECKING:
    from corpus_audit.core.store import Study


DIR_HELP = "the study directory (or its study.toml)"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but paragraphs (blank-line separated) stay paragraphs and
    indented lines (an example) are kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in text.split("\n\n"):
            if any(line.startswith(" ") for line in para.splitlines()):
                out.append("\n".join(indent + line for line in para.splitlines()))
            else:
                out.append(super()._fill_text(para, width, indent))
        return "\n\n".join(out)


class Subcommands:
    """``add_subparsers()``'s action, giving every subcommand the shared ``parents``, a
    description (its help when none is given), an example (:mod:`.examples`) and one naming
    style: hyphens, with the underscore spelling accepted as an alias (``llm_texts``)."""

    def __init__(
        self,
        action: Any,
        parents: list[argparse.ArgumentParser] | None = None,
        prefix: str = "",
    ) -> None:
        self.action = action
        self.parents = parents or []
        self.prefix = prefix
        self.helps: dict[str, str] = {}  # name -> one-line help, in the order added
        self.paths: dict[int, str] = {}  # id(parser) -> its command path ("config")

    def add_parser(
        self, name: str, func: Callable[[argparse.Namespace], int] | None = None, **kwargs: Any
    ) -> argparse.ArgumentParser:
        """The subcommand ``name`` (hyphenated; the underscore spelling is an alias);
        ``func`` (the verb module's ``run``) handles it."""
        hyphen, under = name.replace("_", "-"), name.replace("-", "_")
        aliases = list(kwargs.pop("aliases", []))
        if under != hyphen:
            aliases.append(under)
        text = kwargs.get("help") or ""
        self.helps[hyphen] = text.replace("%%", "%")
        kwargs.setdefault("description", text[:1].upper() + text[1:] + "." if text else None)
        kwargs.setdefault("formatter_class", HelpFormatter)
        path = f"{self.prefix}{hyphen}"
        epilog = kwargs.pop("epilog", None)
        shown = f"example:\n  {example(path)}"
        kwargs["epilog"] = f"{epilog}\n\n{shown}" if epilog else shown
        if not self.prefix:  # the top level lists its commands in groups (help_groups.grouped_help)
            kwargs.pop("help", None)
        parser = self.action.add_parser(hyphen, parents=self.parents, aliases=aliases, **kwargs)
        if func is not None:
            parser.set_defaults(func=func)
        self.paths[id(parser)] = path
        return parser

    def add_study_parser(
        self,
        name: str,
        func: Callable[[argparse.Namespace], int] | None = None,
        *,
        dir_help: str = DIR_HELP,
        **kwargs: Any,
    ) -> argparse.ArgumentParser:
        """:meth:`add_parser` for a command on one study: its first argument is ``dir``, the
        study directory (or its ``study.toml``) that :func:`open_study` opens, shown with
        ``dir_help``."""
        parser = self.add_parser(name, func, **kwargs)
        parser.add_argument("dir", help=dir_help)
        return parser

    def nested(self, parser: argparse.ArgumentParser) -> Subcommands:
        """``parser``'s own actions (``config show``, ``validate export``), same parents."""
        return Subcommands(
            parser.add_subparsers(dest="action", required=True, metavar="ACTION"),
            self.parents,
            prefix=f"{self.paths[id(parser)]} ",
        )


def add_switch(parser: argparse.ArgumentParser, name: str, help: str) -> None:
    """An on/off option ``name`` (``--strict``): False unless given."""
    parser.add_argument(name, action="store_true", help=help)


def out_path(args: argparse.Namespace) -> Path | None:
    """``--out`` as a path; None (the command's own default) when it is not given."""
    return Path(args.out) if args.out else None


def open_study(args: argparse.Namespace) -> Study:
    """The study in ``args.dir`` (a directory or its ``study.toml``), open; use it as a
    context manager. The store (DuckDB) is imported here, not when the parser is built."""
    from corpus_audit.core.store import Study  # the store (DuckDB): not for --help

    return Study.open(args.dir)
