"""``corpus-audit amplify``: the amplification measure from published %female tables, no
study needed (the work: :mod:`corpus_audit.commands.amplify`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus_audit.commands.verbs.base import Subcommands, add_switch, out_path
from corpus_audit.commands.verbs.output import print_run
from corpus_audit.core.errors import TableError


def add_parser(sub: Subcommands) -> None:
    """``amplify``: the measure from published %female tables, no study needed."""
    p = sub.add_parser(
        "amplify", func=run, help="amplification from plain %%female tables (CSV/TSV)"
    )
    p.add_argument("--training", help="CSV: occupation,percent_female[,n]")
    p.add_argument("--generated", help="CSV: occupation,prompt,percent_female[,n]")
    p.add_argument(
        "--table",
        action="append",
        metavar="[NAME=]FILE",
        help="wide table occupation,training,<prompt>...[,training_n,<prompt>_n], one per "
        "model (repeatable; the paper's published tables have this shape)",
    )
    p.add_argument(
        "--training-n",
        type=int,
        help="labelled images behind every training value of a --table without counts "
        "(the paper's: 500)",
    )
    p.add_argument(
        "--parity-side",
        choices=["upper", "neither"],
        default="upper",
        help="where exactly 50 lies for the direction-switch exclusion: upper (the paper's "
        "rule, default) or neither (strict)",
    )
    add_switch(p, "--report", "also write amplification.html")
    p.add_argument("--out", help="directory for the results (default ./amplify_results)")


def run(args: argparse.Namespace) -> int:
    # numpy: not for --help
    from corpus_audit.commands.amplify import AmplifyOptions, amplify_tables, amplify_wide

    options = {
        "out_dir": out_path(args),
        "options": AmplifyOptions(parity_side=args.parity_side),
        "report": args.report,
    }
    if args.table:
        if args.training or args.generated:
            raise TableError("amplify: give --table, or --training with --generated, not both")
        tables = [named_table(spec) for spec in args.table]
        done = amplify_wide(tables, training_n=args.training_n, **options)
    elif args.training and args.generated:
        if args.training_n is not None:
            raise TableError("amplify: --training-n goes with --table (long tables carry n)")
        done = amplify_tables(Path(args.training), Path(args.generated), **options)
    else:
        raise TableError("amplify: give --training and --generated, or one or more --table")
    print_run(done)
    return 0


def named_table(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH`` (named by the file's stem)."""
    name, sep, path = spec.partition("=")
    if sep and name and not Path(spec).exists():
        return name, Path(path)
    return Path(spec).stem, Path(spec)
