"""``corpus-audit export DIR``: every result table (or the ``--tables`` named) as Parquet or CSV
with a ``manifest.json`` (the work: :func:`corpus_audit.commands.export.export_tables`)."""

from __future__ import annotations

import argparse

from corpus_audit.commands.export import FORMATS, export_tables
from corpus_audit.commands.verbs.base import Subcommands, open_study, out_path
from corpus_audit.core.errors import printable


def add_parser(sub: Subcommands) -> None:
    p = sub.add_parser(
        "export",
        func=run,
        help="write the result tables (Parquet or CSV) with a manifest.json of their columns "
        "and the study's provenance",
        description="Write every result table of the study (or the --tables named) to --out "
        "(default: DIR/export), one file per table, and manifest.json: per table its rows and "
        "columns with their meaning, and the study's config hash and per-stage provenance.",
    )
    p.add_argument("dir", help="the study directory")
    p.add_argument("--format", choices=FORMATS, default="parquet", help="default: parquet")
    p.add_argument("--tables", nargs="+", metavar="TABLE", help="only these tables")
    p.add_argument("--out", help="output directory (default: DIR/export)")


def run(args: argparse.Namespace) -> int:
    """Export, then print one line per table and the manifest's path."""
    with open_study(args) as study:
        result = export_tables(study, out_path(args), fmt=args.format, tables=args.tables)
    for table, n in result.rows.items():
        print(f"  {table}: {n} rows")
    total = sum(result.rows.values())
    print(
        f"exported {len(result.rows)} tables ({total} rows) as {args.format}: "
        f"{printable(result.manifest)}"
    )
    return 0
