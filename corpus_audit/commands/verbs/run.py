"""``corpus-audit run DIR``: every stage in order (finished work is skipped)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.verbs.base import Subcommands, open_study
from corpus_audit.commands.verbs.output import print_run
from corpus_audit.core.catalogue import STAGE_NAMES


def add_parser(sub: Subcommands) -> None:
    p = sub.add_parser("run", func=run, help="run every stage in order (finished work is skipped)")
    p.add_argument("dir")
    p.add_argument("--until", choices=STAGE_NAMES, help="stop after this stage")


def run(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import run_all  # the store (DuckDB): not for --help

    with open_study(args) as study:
        for done in run_all(study, until=args.until, progress=not args.quiet):
            print_run(done)
    return 0
