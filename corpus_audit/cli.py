"""Command line: ``corpus-audit``. Builds the parser from the verbs, dispatches, and turns errors
into one line and an exit status.

Each verb is one module of :mod:`corpus_audit.commands.verbs` holding its parser and its handler
(stage verbs: one module, from the stages' declarations in :mod:`corpus_audit.core.catalogue`).
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

from corpus_audit import __version__
from corpus_audit.commands.verbs import VERBS
from corpus_audit.commands.verbs.base import Subcommands
from corpus_audit.commands.verbs.help_groups import grouped_help
from corpus_audit.commands.verbs.output import set_verbose
from corpus_audit.core import interrupts
from corpus_audit.core.errors import CorpusAuditError, printable, read_error

EXIT_USER_ERROR = 2
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, as if killed by the signal
EXIT_INTERRUPT = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141, what a shell reports for `cmd | head`


def build_parser() -> argparse.ArgumentParser:
    """The ``corpus-audit`` parser: global flags, then every verb's subcommand(s), in the
    order of :data:`corpus_audit.commands.verbs.VERBS` (the order of ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="corpus-audit",
        description="Audit image-caption corpora for gender-occupation bias and its "
        "amplification.\n`corpus-audit COMMAND --help`: what a command does, with an example.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"corpus_audit {__version__}")
    # -v is named in -q's line: the top-level help keeps to 40 lines (each verb's lists both)
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars (-v: every table and note)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    sub = Subcommands(
        parser.add_subparsers(
            dest="command", required=True, metavar="COMMAND", help="one of the commands below"
        ),
        [_quiet_after_the_verb()],
    )
    for verb in VERBS:
        verb.add_parser(sub)
    parser.epilog = grouped_help(sub.helps)
    return parser


VERBOSE_HELP = "every table and note of a run (per occupation, per prompt)"


def _quiet_after_the_verb() -> argparse.ArgumentParser:
    """``-q`` and ``-v`` after the verb too: SUPPRESS leaves the top-level value alone when
    not given."""
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars"
    )
    quiet.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
    )
    return quiet


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
    set_verbose(getattr(args, "verbose", False))
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
        message = read_error(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
