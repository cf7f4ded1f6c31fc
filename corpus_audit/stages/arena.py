"""The ``battles_arena_import`` stage (``corpus-audit battles import DIR FILE.json``): votes
collected by another arena, in a study.

Reads every file first (:func:`corpus_audit.methods.preferences.arena_import.read_arena_file`; a bad
record is one line naming the file and record, and nothing is stored), then in one transaction
adds the votes not stored yet to ``arena_votes`` (a vote is its record's hash, occurrence and
aspect: re-importing a file adds nothing) and rewrites ``arena_ratings`` and ``arena_pairs``
from every stored arena vote in the given order (``created_at``, then file and record):
:func:`corpus_audit.methods.preferences.leaderboard.leaderboard` and
:func:`~corpus_audit.methods.preferences.leaderboard.pairs`, per aspect and per aspect x language.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts, execute_sql, insert_rows
from corpus_audit.methods.preferences.arena_import import OVERALL, read_arena_file
from corpus_audit.methods.preferences.leaderboard import check_rounds, leaderboard, pairs

STAGE = "battles_arena_import"
ARENA_SUFFIXES = (".json", ".jsonl")


def is_arena_file(path: Path | str) -> bool:
    """An arena vote file by its name (``.json`` / ``.jsonl``); annotator sheets are ``.csv``."""
    return Path(path).suffix.lower() in ARENA_SUFFIXES


@stage_body(STAGE, arguments=lambda a: check_rounds(a["rounds"]))
def import_arena(
    study: Study,
    run: StageRun,
    files: Sequence[Path],
    *,
    rounds: int = 1000,
    seed: int | None = None,
    aspect: str = OVERALL,
    fmt: str | None = None,
    progress: bool = False,
) -> StageRun:
    """Store the votes of ``files`` and recompute the arena leaderboard (module docstring);
    ``progress`` is unused (the stage signature: the votes are read at once)."""
    import pandas as pd

    read = [read_arena_file(Path(f), fmt=fmt, aspect=aspect) for f in files]
    votes = pd.concat(read, ignore_index=True) if read else pd.DataFrame()
    if not votes.empty:  # the same records twice in one call count once
        votes = votes.drop_duplicates(["record_sha256", "occurrence", "aspect"])
    seed = study.config.study.seed if seed is None else seed
    before = _count(study)
    with study.transaction() as con:
        if not votes.empty:
            con.register("_arena_votes_in", votes.astype(object).where(votes.notna(), None))
            execute_sql(con, "battles/arena_store_votes")
            con.unregister("_arena_votes_in")
        stored = study.sql("battles/arena_given_order").df()
        clear_tables(con, "arena_ratings", "arena_pairs")
        if not stored.empty:
            for table, frame in (
                ("arena_ratings", leaderboard(stored, rounds=rounds, seed=seed)),
                ("arena_pairs", pairs(stored)),
            ):
                insert_rows(con, table, frame.astype(object).where(frame.notna(), None))
    added = _count(study) - before
    run.rows_in, run.rows_out = len(votes), len(stored)
    run.summary = dicts(study.sql("battles/arena_rating_summary"))
    per_aspect = stored.groupby("aspect").size().to_dict() if not stored.empty else {}
    run.provenance.update(
        {
            "files": [str(f) for f in files],
            "rounds": rounds,
            "seed": seed,
            "added": added,
            "stored_per_aspect": {str(k): int(v) for k, v in per_aspect.items()},
        }
    )
    run.messages.append(
        f"{added} new vote(s) stored, {len(votes) - added} already there; "
        f"{len(stored)} arena votes in all"
    )
    return run


def _count(study: Study) -> int:
    row = study.con.execute("SELECT count(*) FROM arena_votes").fetchone()
    return int(row[0]) if row else 0
