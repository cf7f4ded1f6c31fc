"""One verb a stage (``corpus-audit select DIR``, ...): the stage's declaration in
:mod:`corpus_audit.core.catalogue` is its help and its flags; running it calls the stage
function and prints its :class:`~corpus_audit.core.store.StageRun`."""

from __future__ import annotations

import argparse
from typing import Any

from corpus_audit.commands.verbs.base import Subcommands, open_study
from corpus_audit.commands.verbs.output import print_run
from corpus_audit.core.catalogue import STAGE_NAMES, stage
from corpus_audit.core.config import write_config
from corpus_audit.core.config_help import stage_help
from corpus_audit.core.extras import require_stages
from corpus_audit.core.study_lock import run_lock


def add_parser(sub: Subcommands) -> None:
    """One command a stage; help generated from the catalogue and the config classes."""
    for name in STAGE_NAMES:
        declared = stage(name)
        p = sub.add_study_parser(
            name,
            func=run,
            help=declared.summary.replace("%", "%%"),
            description=stage_help(declared),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.set_defaults(stage_name=name)
        for option, text in declared.options.items():  # e.g. recaption --model
            p.add_argument(f"--{option}", help=text)


def run(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import stage_function  # the store (DuckDB): not for --help

    require_stages([args.stage_name])  # before the flags are written
    with open_study(args) as study, run_lock(study.root):  # the flags' write included
        write_options(study, args)
        print_run(stage_function(args.stage_name)(study, progress=not args.quiet))
    return 0


def write_options(study: Any, args: argparse.Namespace) -> None:
    """Write the stage's flags given (its declaration's ``options``) into its config
    section, validated, and ``study.toml``."""
    given = {k: getattr(args, k) for k in stage(args.stage_name).options}
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return
    section = getattr(study.config, args.stage_name)
    for key, value in given.items():
        setattr(section, key, value)
    section.validate()
    write_config(study.config)
