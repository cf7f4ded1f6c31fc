"""``corpus-audit fetch-models [DEST]``: MediaPipe's face-detection models out of the mediapipe
0.10.21 wheel (the work: :mod:`corpus_audit.commands.fetch_models`, which the Makefile also
runs as ``python -m corpus_audit.commands.fetch_models DEST``)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.verbs.base import Subcommands


def add_parser(sub: Subcommands) -> None:
    p = sub.add_parser(
        "fetch-models",
        func=run,
        help="download MediaPipe's face-detection models (from the mediapipe 0.10.21 wheel)",
        description="Take the two face-detection models out of the mediapipe 0.10.21 wheel "
        "(downloaded with pip, not installed) into DEST_DIR; files already there are kept.",
    )
    p.add_argument(
        "dest",
        nargs="?",
        help="folder for the models (default: $CORPUS_AUDIT_MODEL_DIR, else .cache/models)",
    )


def run(args: argparse.Namespace) -> int:
    """Fetch into ``args.dest`` (or the face detector's model folder)."""
    from corpus_audit.backends.faces import model_dir  # mediapipe's folder rule, not for --help
    from corpus_audit.commands.fetch_models import main

    return main([args.dest] if args.dest else [str(model_dir())])
