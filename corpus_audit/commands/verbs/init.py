"""``corpus-audit init DIR``: create a study directory with ``study.toml``.

What a preset and each ``--kind`` set is decided in :mod:`corpus_audit.core.kinds`; this verb
names the flags and prints what it made.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from corpus_audit.commands.verbs.base import Subcommands, add_switch
from corpus_audit.core.errors import printable
from corpus_audit.core.kinds import KINDS, init_settings

CORPUS_FORMATS = ["auto", "parquet", "csv", "jsonl", "hf"]  # --format of init and texts


def add_parser(sub: Subcommands) -> None:
    p = sub.add_study_parser("init", func=run, help="create a study directory with study.toml")
    p.add_argument(
        "--kind",
        choices=list(KINDS),
        default="amplification",
        help="amplification (default), pst: the Paired Stereotype Test (docs/pst.md), llm: "
        "who-vs-how on texts language models write (docs/who_vs_how.md), or images: a model "
        "audited from its images alone, no corpus (docs/model_only.md)",
    )
    p.add_argument(
        "--model",
        action="append",
        help="with --kind llm: a text generator, transformers:<path or hub id> or "
        "openai:<model> (repeat for several; llm.models)",
    )
    p.add_argument(
        "--corpus",
        nargs="+",
        help="corpus files, directories or globs (optional with --kind pst: the caption side; "
        "none with --kind llm or images)",
    )
    p.add_argument("--format", choices=CORPUS_FORMATS)
    p.add_argument("--text-column", help="caption column (default: TEXT/caption/text)")
    p.add_argument("--url-column", help="URL column (default: URL/url)")
    p.add_argument("--sample-size", type=int, help="captions per occupation sample (default 500)")
    p.add_argument("--seed", type=int, help="study seed (default 0)")
    p.add_argument("--name", help="study name")
    p.add_argument("--occupations", help="occupation lexicon CSV (default: the 62 of the paper)")
    add_switch(p, "--force", "overwrite an existing study.toml")
    p.add_argument(
        "--preset",
        help="start from a preset's settings: 'paper' = the paper's (CLIP ViT-L-14 at 0.9, "
        "MediaPipe short range, SD 1.4 + 1.5, 500 per subset, ...); flags above win",
    )


def run(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import init_study  # the store (DuckDB): not for --help

    flags = {  # the flags given on the command line win over the preset and the kind
        "corpus": {
            "text_column": args.text_column,
            "url_column": args.url_column,
            "format": args.format,
        },
        "select": {"sample_size": args.sample_size},
        "study": {"seed": args.seed, "name": args.name},
        "lexicon": {"occupations": args.occupations},
    }
    settings, notes = init_settings(
        args.kind, has_corpus=bool(args.corpus), preset=args.preset, models=args.model, flags=flags
    )
    study = init_study(Path(args.dir), args.corpus or [], overrides=settings, overwrite=args.force)
    try:
        print(f"study created: {printable(Path(args.dir) / 'study.toml')}")
        if args.kind == "images":  # its prompts at once: images can be imported right away
            _write_prompts(study)
    finally:
        study.close()
    if args.preset:
        print(f"  settings of the {args.preset!r} preset written")
    for note in notes:
        print(f"  {printable(note)}")
    return 0


def _write_prompts(study: Any) -> None:
    """Run the ``prompts`` stage of a new ``--kind images`` study and say what comes next."""
    from corpus_audit.core.pipeline import stage_function  # the store (DuckDB): not for --help

    run = stage_function("prompts")(study, progress=False)
    sets = run.provenance.get("prompt_sets") or []
    print(
        f"  {run.rows_out} prompts ({printable(', '.join(sets))}, "
        f"{run.provenance.get('occupations')} occupations) from the lexicon"
    )
    root = printable(study.root)
    print(
        f"  next: corpus-audit import-images {root} SOURCE --model NAME (or set "
        f"generate.models and run corpus-audit generate {root}), then label, analyze, report"
    )
