"""``corpus-audit run DIR``: every stage in order (finished work is skipped)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.verbs.base import Subcommands, open_study
from corpus_audit.commands.verbs.output import print_run
from corpus_audit.core.catalogue import RUN_ORDERS


def add_parser(sub: Subcommands) -> None:
    p = sub.add_study_parser(
        "run",
        func=run,
        help="run every stage of the study's kind in order (finished work is skipped)",
    )
    kinds = "; ".join(
        f"{kind}: {' '.join(dict.fromkeys(s.replace('_', '-') for s in order))}"
        for kind, order in RUN_ORDERS.items()
    )
    p.add_argument(
        "--until",
        metavar="STAGE",
        help=f"stop after this stage, one of the study kind's ({kinds})",
    )


def run(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import run_all  # the store (DuckDB): not for --help

    with open_study(args) as study:
        until = args.until.replace("-", "_") if args.until else None  # who-how = who_how
        for done in run_all(study, until=until, progress=not args.quiet):
            print_run(done)
    return 0
