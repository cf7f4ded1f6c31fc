"""``corpus-audit regenerate DIR IMAGE_ID``: make one generated image again from its recorded
seed and settings (the work: :func:`corpus_audit.stages.generate.save_regenerated`)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.verbs.base import Subcommands, add_switch, open_study, out_path
from corpus_audit.core.errors import printable


def add_parser(sub: Subcommands) -> None:
    p = sub.add_study_parser(
        "regenerate",
        func=run,
        help="make one generated image again from its recorded seed and settings",
    )
    p.add_argument("image_id", help="images.image_id of a generated image")
    p.add_argument("--out", help="PNG to write (default: <study>/regenerated/<image_id>.png)")
    add_switch(
        p,
        "--alone",
        "generate it alone instead of replaying its batch (same within 1-2 pixel levels)",
    )


def run(args: argparse.Namespace) -> int:
    from corpus_audit.stages.generate import save_regenerated  # numpy, DuckDB: not for --help

    with open_study(args) as study:
        path, same = save_regenerated(study, args.image_id, out_path(args), exact=not args.alone)
    verdict = {True: "identical to", False: "differs from", None: "no stored file to compare with"}
    print(f"{printable(path)}: {verdict[same]}{' the stored image' if same is not None else ''}")
    return 0
