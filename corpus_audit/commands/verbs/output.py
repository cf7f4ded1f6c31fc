"""How a verb prints a stage run and a table: every cell through :func:`printable` (control
characters from corpus data shown escaped), headers from :mod:`corpus_audit.core.metrics`."""

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


def print_run(run: Any) -> None:
    """A :class:`~corpus_audit.core.store.StageRun`: state, counts, drop reasons, summary
    table, notes and the files it wrote."""
    state = "skipped (nothing to do)" if run.skipped else "done"
    print(f"[{run.name}] {state}: {run.rows_in} in, {run.rows_out} out")
    for reason, count in sorted(run.dropped.items()):
        print(f"  dropped {count}: {printable(reason)}")
    print_table(run.summary)
    for message in run.messages:
        print(f"  {printable(message)}")
    for name, path in run.outputs.items():
        print(f"  {printable(name)}: {printable(path)}")
