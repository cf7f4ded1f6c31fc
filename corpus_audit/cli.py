"""Command line: ``corpus-audit``. The only module that parses arguments and prints.

Stage subcommands call the stage function of the same name (see ``pipeline.STAGES``) and
print its :class:`~corpus_audit.core.store.StageRun`: counts, drop reasons, summary table, notes.
Errors the user can fix (bad config, bad corpus, unknown occupation) print one line naming
the file and problem and exit with status 2; nothing in the study is changed by them.

Everything printed goes through :func:`corpus_audit.core.errors.printable` (control characters
from corpus data are shown escaped, never sent to the terminal). SIGTERM (what ``timeout``,
schedulers and container stops send) is handled like Ctrl-C (:mod:`corpus_audit.core.interrupts`):
the batch in flight is rolled back, finished batches are kept, worker processes are stopped,
exit status 143 (130 for Ctrl-C). Output cut short by a closed pipe (``| head``) ends the
command quietly with status 141. A DuckDB I/O error (a damaged ``study.duckdb``) is one line.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from corpus_audit import __version__
from corpus_audit.core import interrupts
from corpus_audit.core.errors import CorpusAuditError, printable
from corpus_audit.core.metrics import format_value, header

EXIT_USER_ERROR = 2
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, as if killed by the signal
EXIT_INTERRUPT = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141, what a shell reports for `cmd | head`


def _print_table(rows: list[dict[str, Any]], *, max_rows: int = 80) -> None:
    if not rows:
        return
    keys = list(rows[0])
    cols = [printable(header(c)) for c in keys]  # labels and direction arrows: metrics.py
    cells = [[_fmt(r.get(c)) for c in keys] for r in rows[:max_rows]]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
    if len(rows) > max_rows:
        print(f"... {len(rows) - max_rows} more rows")


def _fmt(value: Any) -> str:
    return printable(format_value(value, 3, "-"))


def _print_run(run: Any) -> None:
    state = "skipped (nothing to do)" if run.skipped else "done"
    print(f"[{run.name}] {state}: {run.rows_in} in, {run.rows_out} out")
    for reason, count in sorted(run.dropped.items()):
        print(f"  dropped {count}: {printable(reason)}")
    _print_table(run.summary)
    for message in run.messages:
        print(f"  {printable(message)}")
    for name, path in run.outputs.items():
        print(f"  {printable(name)}: {printable(path)}")


# -- commands -------------------------------------------------------------------------------
def cmd_init(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import init_study

    notes: list[str] = []
    preset: dict[str, dict[str, Any]] = {}
    if args.preset:
        from corpus_audit.core.preset import load_preset, resolve

        preset, notes = resolve(load_preset(args.preset))
    overrides = {
        "corpus": {
            "text_column": args.text_column,
            "url_column": args.url_column,
            "format": args.format,
        },
        "select": {"sample_size": args.sample_size},
        "study": {"seed": args.seed, "name": args.name},
        "lexicon": {"occupations": args.occupations},
        "pst": {"enabled": True if args.kind == "pst" else None},
    }
    if args.kind == "llm":  # docs/who_vs_how.md: the texts come from llm.models
        overrides["llm"] = {"enabled": True, "models": args.model or None}
        overrides["texts"] = {"source": "llm"}
        overrides["lexicon"]["labor_stats"] = "builtin:more_of_the_same/occupations_en.csv"
    elif args.model:
        from corpus_audit.core.errors import StudyError

        raise StudyError("init: --model is for a --kind llm study (llm.models)")
    if not args.corpus and args.kind not in ("pst", "llm"):
        from corpus_audit.core.errors import StudyError

        raise StudyError("init: give --corpus (only a --kind pst or llm study may go without one)")
    for section, values in overrides.items():  # flags given on the command line win
        preset.setdefault(section, {}).update({k: v for k, v in values.items() if v is not None})
    study = init_study(Path(args.dir), args.corpus or [], overrides=preset, overwrite=args.force)
    study.close()
    print(f"study created: {printable(Path(args.dir) / 'study.toml')}")
    if args.preset:
        print(f"  settings of the {args.preset!r} preset written")
    for note in notes:
        print(f"  {printable(note)}")
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import stage_function
    from corpus_audit.core.store import Study

    with Study.open(args.dir) as study:
        _stage_options(study, args)
        _print_run(stage_function(args.command)(study, progress=not args.quiet))
    return 0


# flags of a stage command that set a config key (written to study.toml before the run)
STAGE_OPTIONS = {
    "recaption": {
        "model": "captioning model: a local directory, a cached hub id, or paraphrase:SPEC",
        "variant": "name of the caption variant to write (default: recaption.variant)",
    },
}


def _stage_options(study: Any, args: argparse.Namespace) -> None:
    """Write the stage's flags into its config section (validated) and ``study.toml``."""
    from corpus_audit.core.config import write_config

    given = {k: getattr(args, k) for k in STAGE_OPTIONS.get(args.command, {})}
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return
    section = getattr(study.config, args.command)
    for key, value in given.items():
        setattr(section, key, value)
    section.validate()
    write_config(study.config)


def cmd_run(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import run_all
    from corpus_audit.core.store import Study

    with Study.open(args.dir) as study:
        for run in run_all(study, until=args.until, progress=not args.quiet):
            _print_run(run)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from corpus_audit.core.pipeline import status
    from corpus_audit.core.store import Study

    with Study.open(args.dir) as study:
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
        _print_table(rows)
        from corpus_audit.backends.openai_images import status_lines as api_lines
        from corpus_audit.report.imports import status_lines as import_lines
        from corpus_audit.stages.subsets import study_shortfall

        for line in [*study_shortfall(study), *api_lines(study), *import_lines(study)]:
            print(printable(line))
        if study.config.llm.enabled:
            from corpus_audit.stages.llm_texts import status_lines

            for line in status_lines(study):
                print(printable(line))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from corpus_audit.commands import validate

    return _export_or_import(
        args,
        export=lambda study: validate.export_sheet(study, n=args.n, out_dir=_out_path(args)),
        load=lambda study: validate.import_labels(study, [Path(f) for f in args.files]),
    )


def cmd_battles(args: argparse.Namespace) -> int:
    from corpus_audit.commands import battles

    return _export_or_import(
        args,
        export=lambda study: battles.export_battles(
            study,
            n=args.n,
            aspects=args.aspect or battles.ASPECTS,
            seed=args.seed,
            models=args.models,
            out_dir=_out_path(args),
        ),
        load=lambda study: _import_votes(study, args),
    )


def _import_votes(study: Any, args: argparse.Namespace) -> Any:
    """``battles import``: annotator sheets (``.csv``) against the exported pairs, or vote
    files of another arena (``.json`` / ``.jsonl``: corpus_audit/commands/arena.py)."""
    from corpus_audit.commands import arena as arena_study
    from corpus_audit.commands import battles
    from corpus_audit.core.errors import CorpusAuditError

    files = [Path(f) for f in args.files]
    arena = [arena_study.is_arena_file(f) for f in files]
    if any(arena) and not all(arena):
        raise CorpusAuditError(
            "battles import: give either annotator sheets (.csv) or arena vote files "
            "(.json, .jsonl), not both in one call"
        )
    if all(arena):
        return arena_study.import_arena(
            study,
            files,
            rounds=args.rounds,
            seed=args.seed,
            aspect=args.aspect or arena_study.OVERALL,
            fmt=args.format,
        )
    return battles.import_battles(study, files, rounds=args.rounds, seed=args.seed)


def _export_or_import(
    args: argparse.Namespace, *, export: Callable[[Any], Any], load: Callable[[Any], Any]
) -> int:
    """Open the study, run ``export`` or ``load`` (``import``) on it by ``args.action``."""
    from corpus_audit.core.store import Study

    with Study.open(args.dir) as study:
        _print_run(export(study) if args.action == "export" else load(study))
    return 0


def _out_path(args: argparse.Namespace) -> Path | None:
    """``--out`` as a path; None (the command's own default) when it is not given."""
    return Path(args.out) if args.out else None


def cmd_amplify(args: argparse.Namespace) -> int:
    from corpus_audit.commands.amplify import amplify_tables, amplify_wide
    from corpus_audit.core.errors import TableError

    options = {
        "out_dir": _out_path(args),
        "parity_side": args.parity_side,
        "report": args.report,
    }
    if args.table:
        if args.training or args.generated:
            raise TableError("amplify: give --table, or --training with --generated, not both")
        tables = [_named_table(spec) for spec in args.table]
        run = amplify_wide(tables, training_n=args.training_n, **options)
    elif args.training and args.generated:
        if args.training_n is not None:
            raise TableError("amplify: --training-n goes with --table (long tables carry n)")
        run = amplify_tables(Path(args.training), Path(args.generated), **options)
    else:
        raise TableError("amplify: give --training and --generated, or one or more --table")
    _print_run(run)
    return 0


def _named_table(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH`` (named by the file's stem)."""
    name, sep, path = spec.partition("=")
    if sep and name and not Path(spec).exists():
        return name, Path(path)
    return Path(spec).stem, Path(spec)


def cmd_regenerate(args: argparse.Namespace) -> int:
    from corpus_audit.core.store import Study
    from corpus_audit.stages.generate import save_regenerated

    with Study.open(args.dir) as study:
        path, same = save_regenerated(study, args.image_id, _out_path(args), exact=not args.alone)
    verdict = {True: "identical to", False: "differs from", None: "no stored file to compare with"}
    print(f"{printable(path)}: {verdict[same]}{' the stored image' if same is not None else ''}")
    return 0


def cmd_import_images(args: argparse.Namespace) -> int:
    from corpus_audit.commands.import_images import import_images
    from corpus_audit.core.errors import ManifestError
    from corpus_audit.core.store import Study

    with Study.open(args.dir) as study:
        if args.verify:
            from corpus_audit.commands.import_images import verify_imports

            run = verify_imports(study)
        elif not args.sources:
            raise ManifestError("import-images: give one or more SOURCE files or folders")
        else:
            run = import_images(study, args.sources, model=args.model, strict=args.strict)
    _print_run(run)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from corpus_audit.core.config_edit import set_config, show_config

    if args.action == "show":
        print(printable(show_config(args.dir), keep_newlines=True), end="")
        return 0
    for key, old, new in set_config(args.dir, args.assignments):
        print(f"{printable(key)}: {_fmt_setting(old)} -> {_fmt_setting(new)}")
    return 0


def _fmt_setting(value: Any) -> str:
    from corpus_audit.core.config import dump_toml

    return printable(dump_toml({"s": {"v": value}}).splitlines()[1].removeprefix("v = "))


def cmd_texts(args: argparse.Namespace) -> int:
    from corpus_audit.commands.texts import run_texts

    run = run_texts(
        args.files,
        Path(args.out),
        text_column=args.text_column or "",
        occupation_column=args.occupation_column or "",
        gender_column=args.gender_column or "",
        fmt=args.format,
        progress=not args.quiet,
    )
    _print_run(run)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from corpus_audit.commands.demo import run_demo

    run_demo(Path(args.dir), progress=not args.quiet, echo=_print_run)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``corpus-audit`` parser: global flags, then one subcommand family per function."""
    parser = argparse.ArgumentParser(
        prog="corpus-audit",
        description="Audit image-caption corpora for gender-occupation bias and its amplification.",
    )
    parser.add_argument("--version", action="version", version=f"corpus_audit {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    sub = _Subcommands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    sub.parents = [_quiet_after_the_verb()]
    for add_family in (
        _add_init_parser,
        _add_run_parsers,
        _add_stage_parsers,
        _add_config_parser,
        _add_validate_parser,
        add_battles_parser,
        _add_amplify_parser,
        _add_regenerate_parser,
        _add_import_images_parser,
        _add_texts_parser,
        _add_demo_parser,
    ):
        add_family(sub)  # the order here is the order of `corpus-audit --help`
    from corpus_audit.commands import export, fetch_models, plugins

    for verb in (export, plugins, fetch_models):  # commands/<verb>.py: add_parser + run
        verb.add_parser(sub)
    return parser


def _quiet_after_the_verb() -> argparse.ArgumentParser:
    """``-q`` after the verb too: SUPPRESS leaves the top-level value alone when not given."""
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars"
    )
    return quiet


class _Subcommands:
    """``add_subparsers()``'s action, giving every subcommand the shared ``parents``."""

    def __init__(self, action: Any) -> None:
        self.action = action
        self.parents: list[argparse.ArgumentParser] = []

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self.action.add_parser(name, parents=self.parents, **kwargs)

    def nested(self, parser: argparse.ArgumentParser) -> _Subcommands:
        """``parser``'s own actions (``config show``, ``validate export``), same parents."""
        actions = _Subcommands(parser.add_subparsers(dest="action", required=True))
        actions.parents = self.parents
        return actions


def _add_init_parser(sub: _Subcommands) -> None:
    p = sub.add_parser("init", help="create a study directory with study.toml")
    p.add_argument("dir")
    p.add_argument(
        "--kind",
        choices=["amplification", "pst", "llm"],
        default="amplification",
        help="amplification (default), pst: the Paired Stereotype Test (docs/pst.md), or llm: "
        "who-vs-how on texts language models write (docs/who_vs_how.md)",
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
        help="corpus files, directories or globs (optional with --kind pst: the caption side)",
    )
    p.add_argument("--format", choices=["auto", "parquet", "csv", "jsonl", "hf"])
    p.add_argument("--text-column", help="caption column (default: TEXT/caption/text)")
    p.add_argument("--url-column", help="URL column (default: URL/url)")
    p.add_argument("--sample-size", type=int, help="captions per occupation sample (default 500)")
    p.add_argument("--seed", type=int, help="study seed (default 0)")
    p.add_argument("--name", help="study name")
    p.add_argument("--occupations", help="occupation lexicon CSV (default: the 62 of the paper)")
    p.add_argument("--force", action="store_true", help="overwrite an existing study.toml")
    p.add_argument(
        "--preset",
        help="start from a preset's settings: 'paper' = the paper's (CLIP ViT-L-14 at 0.9, "
        "MediaPipe short range, SD 1.4 + 1.5, 500 per subset, ...); flags above win",
    )
    p.set_defaults(func=cmd_init)


def _add_run_parsers(sub: _Subcommands) -> None:
    """``run`` (every stage in order) and ``status``."""
    from corpus_audit.core.catalogue import STAGE_NAMES

    p = sub.add_parser("run", help="run every stage in order (finished work is skipped)")
    p.add_argument("dir")
    p.add_argument("--until", choices=STAGE_NAMES, help="stop after this stage")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("status", help="which stages are done, with their counts")
    p.add_argument("dir")
    p.set_defaults(func=cmd_status)


def _add_stage_parsers(sub: _Subcommands) -> None:
    """One command a stage; help generated from the catalogue and the config classes."""
    from corpus_audit.core.catalogue import STAGE_NAMES, stage
    from corpus_audit.core.config_help import stage_help

    for name in STAGE_NAMES:
        declared = stage(name)
        p = sub.add_parser(
            name,
            help=declared.summary.replace("%", "%%"),
            description=stage_help(declared),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("dir", help="the study directory")
        for option, text in STAGE_OPTIONS.get(name, {}).items():  # e.g. recaption --model
            p.add_argument(f"--{option}", help=text)
        p.set_defaults(func=cmd_stage)


def _add_config_parser(sub: _Subcommands) -> None:
    """``config show`` / ``config set`` (corpus_audit/core/config_edit.py)."""
    p = sub.add_parser("config", help="show the effective study.toml, or change settings in it")
    actions = sub.nested(p)
    show = actions.add_parser("show", help="print the effective config (every setting) as TOML")
    show.add_argument("dir")
    assign = actions.add_parser(
        "set",
        help="change settings, validated like a stage loads them; the file is left as it was "
        "when one is invalid",
        description="Change settings in DIR/study.toml. VALUE is a TOML value (0.8, true, "
        '["a", "b"]); text needs no quotes. Every setting and its meaning: `corpus-audit '
        "STAGE --help`.",
    )
    assign.add_argument("dir")
    assign.add_argument("assignments", nargs="+", metavar="section.key=VALUE")
    p.set_defaults(func=cmd_config)


def _add_validate_parser(sub: _Subcommands) -> None:
    """``validate export`` / ``validate import`` (corpus_audit/commands/validate.py)."""
    p = sub.add_parser("validate", help="human validation of the perceived-gender labels")
    actions = sub.nested(p)
    export = actions.add_parser(
        "export", help="write an annotation sheet (HTML + CSV) for a stratified sample"
    )
    export.add_argument("dir")
    export.add_argument("--n", type=int, default=200)
    export.add_argument("--out", help="output directory (default: <study>/validation)")
    imports = actions.add_parser(
        "import", help="read annotators' label CSVs; report alpha and agreement"
    )
    imports.add_argument("dir")
    imports.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_validate)


def add_battles_parser(sub: Any) -> None:
    """``battles export`` / ``battles import`` (corpus_audit/commands/battles.py)."""
    from corpus_audit.methods.preferences.battles import ASPECTS

    p = sub.add_parser("battles", help="human votes on pairs of generated images; Elo ratings")
    bsub = p.add_subparsers(dest="action", required=True)
    pe = bsub.add_parser("export", help="write the voting page (HTML) and pair manifest")
    pe.add_argument("dir")
    pe.add_argument("--n", type=int, default=200, help="battles to draw (default 200)")
    pe.add_argument(
        "--aspect",
        action="append",
        choices=ASPECTS,
        help="aspect to ask (repeatable; default: all three)",
    )
    pe.add_argument("--models", nargs="+", help="only these models (default: all)")
    pe.add_argument("--seed", type=int, help="draw seed (default: study.seed)")
    pe.add_argument("--out", help="output directory (default: <study>/battles)")
    pi = bsub.add_parser(
        "import",
        help="read annotators' vote CSVs, or another arena's votes (BAFIS / LMSYS .json, "
        ".jsonl); rate the models",
    )
    pi.add_argument("dir")
    pi.add_argument("files", nargs="+")
    pi.add_argument(
        "--rounds",
        type=int,
        default=1000,
        help="shuffled orders / bootstrap rounds (arena files: at most 10000)",
    )
    pi.add_argument(
        "--format",
        choices=("bafis", "lmsys"),
        help="arena files: the format (default: from the first record)",
    )
    pi.add_argument(
        "--aspect",
        choices=("bias", "image_quality", "prompt_alignment", "overall"),
        help="arena files: the aspect of LMSYS records without one (default: overall)",
    )
    pi.add_argument("--seed", type=int, help="ratings seed (default: study.seed)")
    p.set_defaults(func=cmd_battles)


def _add_amplify_parser(sub: _Subcommands) -> None:
    """``amplify``: the measure from published %female tables, no study needed."""
    p = sub.add_parser("amplify", help="amplification from plain %%female tables (CSV/TSV)")
    p.add_argument("--training", help="CSV: occupation,percent_female[,n]")
    p.add_argument("--generated", help="CSV: occupation,prompt,percent_female[,n]")
    p.add_argument(
        "--table",
        action="append",
        metavar="[NAME=]FILE",
        help="wide table occupation,training,<prompt>...[,training_n,<prompt>_n], one per "
        "model (repeatable; the paper's published tables have this shape)",
    )
    p.add_argument(
        "--training-n",
        type=int,
        help="labelled images behind every training value of a --table without counts "
        "(the paper's: 500)",
    )
    p.add_argument(
        "--parity-side",
        choices=["upper", "neither"],
        default="upper",
        help="where exactly 50 lies for the direction-switch exclusion: upper (the paper's "
        "rule, default) or neither (strict)",
    )
    p.add_argument("--report", action="store_true", help="also write amplification.html")
    p.add_argument("--out", help="directory for the results (default ./amplify_results)")
    p.set_defaults(func=cmd_amplify)


def _add_regenerate_parser(sub: _Subcommands) -> None:
    p = sub.add_parser(
        "regenerate", help="make one generated image again from its recorded seed and settings"
    )
    p.add_argument("dir")
    p.add_argument("image_id", help="images.image_id of a generated image")
    p.add_argument("--out", help="PNG to write (default: <study>/regenerated/<image_id>.png)")
    p.add_argument(
        "--alone",
        action="store_true",
        help="generate it alone instead of replaying its batch (same within 1-2 pixel levels)",
    )
    p.set_defaults(func=cmd_regenerate)


def _add_import_images_parser(sub: _Subcommands) -> None:
    """``import-images``: another model's images as generated images (commands/import_images.py)."""
    p = sub.add_parser(
        "import-images",
        help="register images made elsewhere (DALL-E 3, Midjourney, any model) as generated "
        "images: a CSV/JSONL manifest, a <prompt>/<n>.png folder, or BAFIS's metadata.json",
        description="Register another model's images in the study (docs/generate.md, 'Auditing "
        "DALL-E 3, Midjourney or any model'). A bad source is one line naming the file and "
        "line, and nothing is imported; importing the same source again adds nothing.",
    )
    p.add_argument("dir", help="the study directory")
    p.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="a manifest (.csv/.tsv/.jsonl: file, prompt_id or prompt, model, [seed, index]), "
        "a folder of <prompt text>/<n>.png, or a BAFIS folder / metadata.json",
    )
    p.add_argument("--model", help="the model's name (needed by the folder layout; overrides "
                   "the manifest's model column)")  # fmt: skip
    p.add_argument(
        "--strict",
        action="store_true",
        help="a missing, unreadable or non-image file is an error (default: a drop reason)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="hash every imported file again; list those missing or changed since their import",
    )
    p.set_defaults(func=cmd_import_images)


def _add_texts_parser(sub: _Subcommands) -> None:
    """``texts``: the who/how analysis of any text corpus (corpus_audit/commands/texts.py)."""
    p = sub.add_parser(
        "texts", help="who and how (association, marked words, SRBS) of any text corpus"
    )
    p.add_argument("files", nargs="+", help="text corpus files (parquet, CSV/TSV, JSONL, hf)")
    p.add_argument("--out", required=True, help="directory for study.toml + study.duckdb")
    p.add_argument("--format", choices=["auto", "parquet", "csv", "jsonl", "hf"])
    p.add_argument("--text-column", help="text column (default: TEXT/caption/text)")
    p.add_argument(
        "--occupation-column", help="occupation of each text (default: found by the lexicon)"
    )
    p.add_argument("--gender-column", help="specified gender: female/male/non_binary/empty")
    p.set_defaults(func=cmd_texts)


def _add_demo_parser(sub: _Subcommands) -> None:
    p = sub.add_parser("demo", help="run the audit on the bundled demo corpus")
    p.add_argument("dir", nargs="?", default="demo_study")
    p.set_defaults(func=cmd_demo)


def _interrupted(exc: KeyboardInterrupt) -> int:
    print("interrupted; finished batches are kept, rerun to continue", file=sys.stderr)
    return EXIT_SIGTERM if isinstance(exc, interrupts.Terminated) else EXIT_INTERRUPT


def _quiet_broken_pipe() -> int:
    """stdout's reader went away (``| head``): stop quietly, without Python's complaint at
    exit about the unflushed buffer."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args = build_parser().parse_args(argv)
    restore = None
    if threading.current_thread() is threading.main_thread():
        restore = interrupts.install()
    try:
        code = _dispatch(args)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    finally:
        if restore is not None:
            restore()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_broken_pipe()
    return code


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command; user errors, interrupts and damaged files become one line and a status."""
    try:
        return args.func(args)
    except CorpusAuditError as exc:
        print(f"error: {printable(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except BrokenPipeError:
        raise
    except MemoryError as exc:
        # numpy's message names the array ("Unable to allocate 7.45 GiB for an array ...")
        text = str(exc).strip()
        detail = printable(text.splitlines()[0] if text else "MemoryError")
        print(
            f"error: {args.command}: out of memory ({detail}); lower the counts or sizes it "
            "works with (analysis.bootstrap, variants.replicates, --rounds, batch sizes) or "
            "free memory; committed work is kept",
            file=sys.stderr,
        )
        return EXIT_USER_ERROR
    except Exception as exc:
        stop = interrupts.requested()
        if stop is not None:  # DuckDB reports a signal during a query as 'Query interrupted'
            return _interrupted(stop)
        from corpus_audit.core.store import read_error

        message = read_error(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
