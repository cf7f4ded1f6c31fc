"""``corpus-audit status DIR``: which stages are done, with their counts, then the notes of
:mod:`corpus_audit.core.status_notes` (shortfalls, API and imported images, LLM texts)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.commands.verbs.output import print_table
from corpus_audit.core.errors import printable
from corpus_audit.core.status_notes import status_notes


def add_parser(sub: Subcommands) -> None:
    sub.add_study_parser("status", func=run, help="which stages are done, with their counts")


def run(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import status  # the store (DuckDB): not for --help
    from corpus_audit.core.snapshot import close_reader, open_for_reading  # the same

    # read-only: a study another process holds (a notebook) is read from a snapshot
    study, snapshot = open_for_reading(args.dir, writable=True)
    try:
        rows = []
        for s in status(study):
            dropped = ", ".join(f"{k}={v}" for k, v in sorted(s.dropped.items()))
            rows.append(
                {
                    "stage": s.stage,
                    "status": s.status,
                    "rows_in": s.rows_in,
                    "rows_out": s.rows_out,
                    "dropped": dropped or None,
                    "finished": str(s.finished_at)[:19] if s.finished_at else None,
                    "note": s.note or None,
                }
            )
        print_table(rows)
        for line in status_notes(study):
            print(printable(line))
    finally:
        close_reader(study, snapshot)
    return 0
