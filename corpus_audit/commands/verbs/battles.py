"""``corpus-audit battles export|import DIR``: human votes on pairs of generated images, or
another arena's votes, and the models' ratings (the work: :mod:`corpus_audit.commands.battles`,
:mod:`corpus_audit.stages.arena`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus_audit.commands.verbs.base import Subcommands, open_study, out_path
from corpus_audit.commands.verbs.output import print_run
from corpus_audit.methods.preferences.arena_import import OVERALL
from corpus_audit.methods.preferences.battles import ASPECTS


def add_parser(sub: Subcommands) -> None:
    """``battles export`` / ``battles import`` (corpus_audit/commands/battles.py)."""
    p = sub.add_parser(
        "battles", func=run, help="human votes on pairs of generated images; Elo ratings"
    )
    bsub = Subcommands(  # without the shared -q (as always)
        p.add_subparsers(dest="action", required=True), [], prefix="battles "
    )
    pe = bsub.add_study_parser("export", help="write the voting page (HTML) and pair manifest")
    pe.add_argument("--n", type=int, default=200, help="battles to draw (default 200)")
    pe.add_argument(
        "--aspect",
        action="append",
        choices=ASPECTS,
        help="aspect to ask (repeatable; default: all three)",
    )
    pe.add_argument("--models", nargs="+", help="only these models (default: all)")
    pe.add_argument("--seed", type=int, help="draw seed (default: study.seed)")
    pe.add_argument("--out", help="output directory (default: <study>/battles)")
    pi = bsub.add_study_parser(
        "import",
        help="read annotators' vote CSVs, or another arena's votes (BAFIS / LMSYS .json, "
        ".jsonl); rate the models",
    )
    pi.add_argument("files", nargs="+", help="vote CSVs, or another arena's votes (.json, .jsonl)")
    pi.add_argument(
        "--rounds",
        type=int,
        default=1000,
        help="shuffled orders / bootstrap rounds (arena files: at most 10000)",
    )
    pi.add_argument(
        "--format",
        choices=("bafis", "lmsys"),
        help="arena files: the format (default: from the first record)",
    )
    pi.add_argument(
        "--aspect",
        choices=(*ASPECTS, OVERALL),
        help="arena files: the aspect of LMSYS records without one (default: overall)",
    )
    pi.add_argument("--seed", type=int, help="ratings seed (default: study.seed)")


def run(args: argparse.Namespace) -> int:
    from corpus_audit.commands import battles  # the store (DuckDB): not for --help

    with open_study(args) as study:
        if args.action == "export":
            print_run(
                battles.export_battles(
                    study,
                    n=args.n,
                    aspects=args.aspect or ASPECTS,
                    seed=args.seed,
                    models=args.models,
                    out_dir=out_path(args),
                )
            )
        else:
            print_run(
                battles.import_votes(
                    study,
                    [Path(f) for f in args.files],
                    rounds=args.rounds,
                    seed=args.seed,
                    aspect=args.aspect,
                    fmt=args.format,
                )
            )
    return 0
