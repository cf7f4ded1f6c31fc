"""``corpus-audit import-images DIR SOURCE...``: another model's images as generated images
(the work: the ``import_images`` stage, :mod:`corpus_audit.stages.import_images`)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.verbs.base import Subcommands, add_switch, open_study
from corpus_audit.commands.verbs.output import print_run
from corpus_audit.core.errors import ManifestError


def add_parser(sub: Subcommands) -> None:
    """``import-images``: another model's images as generated images (stages/import_images/)."""
    p = sub.add_study_parser(
        "import-images",
        func=run,
        help="register images made elsewhere (DALL-E 3, Midjourney, any model) as generated "
        "images: a CSV/JSONL manifest, a <prompt>/<n>.png folder, or BAFIS's metadata.json",
        description="Register another model's images in the study (docs/generate.md, 'Auditing "
        "DALL-E 3, Midjourney or any model'). A bad source is one line naming the file and "
        "line, and nothing is imported; importing the same source again adds nothing.",
        dir_help="the study directory",
    )
    p.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="a manifest (.csv/.tsv/.jsonl: file, prompt_id or prompt, model, [seed, index]), "
        "a folder of <prompt text>/<n>.png, or a BAFIS folder / metadata.json",
    )
    p.add_argument("--model", help="the model's name (needed by the folder layout; overrides "
                   "the manifest's model column)")  # fmt: skip
    add_switch(
        p,
        "--strict",
        "a missing, unreadable or non-image file is an error (default: a drop reason)",
    )
    add_switch(
        p,
        "--verify",
        "hash every imported file again; list those missing or changed since their import",
    )


def run(args: argparse.Namespace) -> int:
    from corpus_audit.stages import import_images  # numpy and the store: not for --help

    with open_study(args) as study:
        if args.verify:
            done = import_images.verify_imports(study)
        elif not args.sources:
            raise ManifestError("import-images: give one or more SOURCE files or folders")
        else:
            done = import_images.import_images(
                study, args.sources, model=args.model, strict=args.strict
            )
            done.name = "import-images"  # the command's header (the stage: import_images)
    print_run(done)
    return 0
