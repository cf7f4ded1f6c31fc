"""``corpus-audit fetch-models [DEST]``: MediaPipe's face-detection models into the model
folder (the work: :mod:`corpus_audit.commands.fetch_models`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus_audit.commands.fetch_models import fetch_and_report
from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.core.model_dir import model_dir


def add_parser(sub: Subcommands) -> None:
    p = sub.add_parser(
        "fetch-models",
        func=run,
        help="download the face-detection models into the model folder",
        description="Take MediaPipe's two face-detection models out of the mediapipe 0.10.21 "
        "wheel (downloaded with pip, not installed), check their SHA-256 and write them into "
        "the model folder every stage reads: $CORPUS_AUDIT_MODEL_DIR, else the user cache. "
        "Files already there with the right hash are kept. Prints the folder and what it "
        "fetched.\n\nexample:\n  corpus-audit fetch-models",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "dest",
        nargs="?",
        help="folder for the models (default: $CORPUS_AUDIT_MODEL_DIR, else the user cache)",
    )


def run(args: argparse.Namespace) -> int:
    """Fetch into ``args.dest`` (or the model folder); errors are the CLI's one line."""
    dest = Path(args.dest).expanduser().absolute() if args.dest else model_dir()
    return fetch_and_report(dest)
