"""``corpus-audit validate export|import DIR``: human validation of the perceived-gender labels
(the work: the ``validate_export`` / ``validate_import`` stages,
:mod:`corpus_audit.stages.validate`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus_audit.commands.verbs.base import Subcommands, open_study, out_path
from corpus_audit.commands.verbs.output import print_run


def add_parser(sub: Subcommands) -> None:
    """``validate export`` / ``validate import`` (stages/validate/, commands/validate.py)."""
    p = sub.add_parser("validate", func=run, help="human validation of the perceived-gender labels")
    actions = sub.nested(p)
    export = actions.add_study_parser(
        "export", help="write an annotation sheet (HTML + CSV) for a stratified sample"
    )
    export.add_argument("--n", type=int, default=200)
    export.add_argument("--out", help="output directory (default: <study>/validation)")
    export.add_argument(
        "--race",
        action="store_true",
        help="also ask perceived race or ethnicity (opt-in; human answers only)",
    )
    export.add_argument(
        "--by-attributes",
        action="store_true",
        help="equal quotas per perceived tone and age group within each source and label",
    )
    imports = actions.add_study_parser(
        "import", help="read annotators' label CSVs; report alpha and agreement"
    )
    imports.add_argument("files", nargs="+", help="annotators' filled-in label CSVs")


def run(args: argparse.Namespace) -> int:
    from corpus_audit.commands import validate  # numpy and the store: not for --help

    with open_study(args) as study:
        if args.action == "export":
            print_run(
                validate.export_sheet(
                    study,
                    n=args.n,
                    out_dir=out_path(args),
                    race=args.race,
                    by_attributes=args.by_attributes,
                )
            )
        else:
            print_run(validate.import_labels(study, [Path(f) for f in args.files]))
    return 0
