"""``corpus-audit texts FILE... --out DIR``: the who/how analysis of any text corpus (the work:
:mod:`corpus_audit.commands.texts`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.commands.verbs.init import CORPUS_FORMATS
from corpus_audit.commands.verbs.output import print_run


def add_parser(sub: Subcommands) -> None:
    """``texts``: the who/how analysis of any text corpus (corpus_audit/commands/texts.py)."""
    p = sub.add_parser(
        "texts", func=run, help="who and how (association, marked words, SRBS) of any text corpus"
    )
    p.add_argument("files", nargs="+", help="text corpus files (parquet, CSV/TSV, JSONL, hf)")
    p.add_argument("--out", required=True, help="directory for study.toml + study.duckdb")
    p.add_argument("--format", choices=CORPUS_FORMATS)
    p.add_argument("--text-column", help="text column (default: TEXT/caption/text)")
    p.add_argument(
        "--occupation-column", help="occupation of each text (default: found by the lexicon)"
    )
    p.add_argument("--gender-column", help="specified gender: female/male/non_binary/empty")


def run(args: argparse.Namespace) -> int:
    # the store (DuckDB): not for --help
    from corpus_audit.commands.texts import TextColumns, run_texts

    columns = TextColumns(
        text_column=args.text_column or "",
        occupation_column=args.occupation_column or "",
        gender_column=args.gender_column or "",
        fmt=args.format,
    )
    done = run_texts(args.files, Path(args.out), columns, progress=not args.quiet)
    print_run(done)
    return 0
