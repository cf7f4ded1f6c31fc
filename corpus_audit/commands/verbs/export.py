"""``corpus-audit export DIR``: every result table (or the ``--tables`` named) as Parquet or CSV
with a ``manifest.json`` (the work: :func:`corpus_audit.commands.export.export_tables`)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.export import FORMATS, export_tables
from corpus_audit.commands.verbs.base import Subcommands, add_switch, open_study, out_path
from corpus_audit.core.errors import printable


def add_parser(sub: Subcommands) -> None:
    p = sub.add_study_parser(
        "export",
        func=run,
        help="write the result tables (Parquet or CSV) with a manifest.json of their columns "
        "and the study's provenance",
        description="Write every result table of the study that has rows (or the --tables "
        "named) to --out (default: DIR/export), one file per table, and manifest.json: per "
        "table its rows and columns with their meaning, and the study's config hash and "
        "per-stage provenance. The export is atomic as a whole: written to a hidden folder "
        "beside --out and swapped in, so an interrupted or failed export leaves the previous "
        "one as it was; an earlier export in --out is replaced whole, a folder holding other "
        "files is refused. Tables are streamed in batches (bounded memory). A table of a "
        "stage left partial is refused unless --allow-partial. In CSV, text starting like a "
        "spreadsheet formula (= + - @) gets a leading apostrophe. "
        "Example: corpus-audit export my_study --format csv --out my_study_csv",
        dir_help="the study directory",
    )
    p.add_argument("--format", choices=FORMATS, default="parquet", help="default: parquet")
    p.add_argument("--tables", nargs="+", metavar="TABLE", help="only these tables")
    p.add_argument("--out", help="output directory (default: DIR/export)")
    add_switch(
        p,
        "--include-empty",
        "also write the tables without rows (default: left out, unless named by --tables)",
    )
    add_switch(
        p,
        "--allow-partial",
        "export the tables of a stage whose last run did not finish (marked 'partial' in "
        "the manifest); refused by default",
    )


def run(args: argparse.Namespace) -> int:
    """Export, then print one line per table and the manifest's path."""
    with open_study(args) as study:
        result = export_tables(
            study,
            out_path(args),
            fmt=args.format,
            tables=args.tables,
            allow_partial=args.allow_partial,
            include_empty=args.include_empty,
        )
    for table, n in result.rows.items():
        print(f"  {table}: {n} rows")
    total = sum(result.rows.values())
    print(
        f"exported {len(result.rows)} tables ({total} rows) as {args.format}: "
        f"{printable(result.manifest)}"
    )
    return 0
