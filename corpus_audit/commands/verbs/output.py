"""How a verb prints a stage run and a table: every cell through :func:`printable` (control
characters from corpus data shown escaped), headers from :mod:`corpus_audit.core.metrics`.

The console is quiet by default: a run prints its counts, drop reasons, notes and a short
summary (at most :data:`QUIET_TABLE_ROWS` rows; a longer one, such as a table per occupation,
is one line saying how to see it) and its ``headline`` rows; ``-v`` (:func:`set_verbose`, the
global flag) prints every summary table and every note.
"""

from __future__ import annotations

from typing import Any

from corpus_audit.core.errors import printable
from corpus_audit.core.metrics import format_value, header


def print_table(rows: list[dict[str, Any]], *, max_rows: int = 80) -> None:
    """``rows`` as aligned columns under a header line; at most ``max_rows`` rows."""
    if not rows:
        return
    keys = list(rows[0])
    cols = [printable(header(c)) for c in keys]  # labels and direction arrows: metrics.py
    cells = [[fmt(r.get(c)) for c in keys] for r in rows[:max_rows]]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
    if len(rows) > max_rows:
        print(f"... {len(rows) - max_rows} more rows")


def fmt(value: Any) -> str:
    """One table cell: 3 significant decimals, ``-`` for a missing value."""
    return printable(format_value(value, 3, "-"))


# Without -v: a summary table of more rows than this is one line; at most this many notes.
QUIET_TABLE_ROWS = 5
QUIET_NOTES = 4
_verbose = False


def set_verbose(verbose: bool) -> None:
    """``-v``: print every summary table and every note (the CLI sets it once per command)."""
    global _verbose
    _verbose = bool(verbose)


def is_verbose() -> bool:
    """Whether ``-v`` was given (:func:`set_verbose`)."""
    return _verbose


def print_run(run: Any, *, verbose: bool | None = None) -> None:
    """A :class:`~corpus_audit.core.store.StageRun`: state, counts, drop reasons, its
    ``headline`` rows, the summary table (quiet: only a short one), notes and the files it
    wrote that no note names. ``verbose`` None: the ``-v`` flag (:func:`set_verbose`)."""
    loud = _verbose if verbose is None else verbose
    state = "skipped (nothing to do)" if run.skipped else "done"
    bare = not (run.rows_in or run.rows_out or run.dropped or run.summary or run.outputs)
    if run.skipped and bare and len(run.messages) == 1 and not loud:  # one line says why
        print(f"[{run.name}] {state}: {printable(run.messages[0])}")
        return
    print(f"[{run.name}] {state}: {run.rows_in} in, {run.rows_out} out")
    for reason, count in sorted(run.dropped.items()):
        print(f"  dropped {count}: {printable(reason)}")
    headline = getattr(run, "headline", None) or []
    print_table(headline)
    if run.summary == headline:  # the headline is the summary: printed once
        pass
    elif loud or len(run.summary) <= QUIET_TABLE_ROWS:
        print_table(run.summary)
    else:
        print(f"  (a table of {len(run.summary)} rows: -v prints it)")
    messages = list(run.messages)
    shown = messages if loud else messages[:QUIET_NOTES]
    for message in shown:
        print(f"  {printable(message)}")
    if len(shown) < len(messages):
        print(f"  ... {len(messages) - len(shown)} more notes (-v prints them)")
    named = {str(m).rsplit(": ", 1)[-1] for m in shown}  # what each note ends with
    for name, path in run.outputs.items():
        # a file a note already names at its end ("page 1, the report: /path") is not repeated
        if loud or str(path) not in named or "/" not in str(path):
            print(f"  {printable(name)}: {printable(path)}")
