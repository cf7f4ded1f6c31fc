"""``corpus-audit demo [DIR]``: the audit on the bundled demo corpus (the work:
:mod:`corpus_audit.commands.demo`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.commands.verbs.output import print_run


def add_parser(sub: Subcommands) -> None:
    p = sub.add_parser(
        "demo",
        func=run,
        help="run the audit on the bundled demo corpus (three pages)",
        description="Run every stage on the bundled demo corpus (real LAION-400M, MS-COCO and "
        "CC3M captions) into DIR, then write the three pages: the caption audit, the paper's "
        "published amplification tables, and a leaderboard from the BAFIS arena's votes. "
        "Needs the demo extra: pip install 'corpus_audit[demo]'. A second run resumes.",
    )
    p.add_argument(
        "dir", nargs="?", default="demo_study", help="the demo study directory (default demo_study)"
    )


def run(args: argparse.Namespace) -> int:
    from corpus_audit.commands.demo import run_demo  # the store (DuckDB): not for --help

    run_demo(Path(args.dir), progress=not args.quiet, echo=print_run)
    return 0
