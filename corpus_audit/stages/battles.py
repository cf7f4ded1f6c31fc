"""The ``battles_export`` and ``battles_import`` stages (``corpus-audit battles export / import``):
battles between a study's models, and the ratings.

**Export** (:func:`export_battles`): draws ``n`` battles from the study's generated images
(:func:`corpus_audit.methods.preferences.battles.draw_battles`: same prompt, two models, balanced over
model pairs, reproducible from ``--seed``, default ``study.seed``), writes the voting page
``battles.html`` and the pair manifest ``pairs.csv`` into ``<study>/battles`` (or ``--out``),
and adds the pairs to the ``battle_pairs`` table (kept across exports, so the sheets of an
earlier export can still be imported).

**Import** (:func:`import_battles`): reads the annotators' vote CSVs against ``battle_pairs``
(a bad row is an error naming the file and line, and nothing is stored), stores the votes in
``battles`` (a vote on the same pair and aspect by the same annotator replaces the stored one)
and recomputes, from all stored votes, ``preference_ratings`` (Elo in the stored order = by
file and line, median and 95 % interval over ``rounds`` shuffled orders, Bradley-Terry) and
``preference_pairs`` (battles, wins, losses, ties, win rate per ordered model pair). The
report shows both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from corpus_audit.core.config import MAX_RESAMPLES
from corpus_audit.core.errors import CorpusAuditError, StageOrderError
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts, execute_sql, insert_rows
from corpus_audit.methods.preferences.battles import (
    ASPECTS,
    PAIR_COLUMNS,
    draw_battles,
    read_votes,
)
from corpus_audit.methods.preferences.elo import pair_matrix, preference_ratings

BATTLES_DIR = "battles"
ROUNDS = 1000


def _frame(study: Study, sql: str, params: dict[str, Any] | None = None) -> Any:
    import pandas as pd

    cur = study.con.execute(sql, params or {})
    return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])


@stage_body("battles_export")
def export_battles(
    study: Study,
    run: StageRun,
    *,
    n: int = 200,
    aspects: Sequence[str] = ASPECTS,
    seed: int | None = None,
    models: Sequence[str] | None = None,
    out_dir: Path | None = None,
    write_page: Callable[..., Any],
    progress: bool = False,
) -> StageRun:
    """Draw ``n`` >= 1 battles and write the page and manifest (see the module docstring).
    ``write_page(pairs, out, aspects=, root=, title=)`` writes the voting page and returns
    its ``BattlePage`` (the command passes the report's ``export_page``: a stage imports no
    report module); ``progress`` is unused (the stage signature)."""
    images = study.sql("battles/images").df()
    if images.empty:
        raise StageOrderError(
            f"{study.root}: no generated images of the study's prompts to draw battles from "
            "(run `corpus-audit generate` first)"
        )
    seed = study.config.study.seed if seed is None else seed
    pairs = draw_battles(images, n, seed, models=models)
    out = Path(out_dir) if out_dir is not None else study.root / BATTLES_DIR
    title = f"Which image is better? ({study.config.study.name})"
    page = write_page(pairs, out, aspects=tuple(aspects), root=study.root, title=title)
    with study.transaction() as con:
        con.register("_battle_pairs_in", pairs[list(PAIR_COLUMNS)])
        execute_sql(con, "battles/store_pairs")
        con.unregister("_battle_pairs_in")
    run.rows_in, run.rows_out = len(images), len(pairs)
    run.summary = [
        {"models": key, "battles": count} for key, count in pairs.attrs["per_pair"].items()
    ]
    if len(pairs) < n:
        run.messages.append(f"only {len(pairs)} battles possible (asked for {n})")
    if page.unreadable:
        run.drop("image_unreadable", page.unreadable)
    run.messages.append(
        f"send {page.page.name} to each annotator; import their CSVs with "
        "`corpus-audit battles import DIR FILE...`"
    )
    run.outputs = {"page": str(page.page), "pairs": str(page.pairs)}
    run.provenance.update({"n": n, "seed": seed, "aspects": list(aspects)})
    return run


def _check_rounds(arguments: dict[str, Any]) -> None:
    """``--rounds`` in 1..MAX_RESAMPLES (the runner asks before the run opens)."""
    rounds = arguments["rounds"]
    if rounds < 1:
        raise CorpusAuditError(f"battles import: --rounds must be >= 1, got {rounds}")
    if rounds > MAX_RESAMPLES:
        raise CorpusAuditError(
            f"battles import: --rounds {rounds} is above the maximum {MAX_RESAMPLES:,} "
            "(shuffled orders / bootstrap resamples)"
        )


@stage_body("battles_import", arguments=_check_rounds)
def import_battles(
    study: Study,
    run: StageRun,
    files: Sequence[Path],
    *,
    rounds: int = ROUNDS,
    seed: int | None = None,
    progress: bool = False,
) -> StageRun:
    """Store the votes of ``files`` and recompute the ratings (see the module docstring);
    ``progress`` is unused (the stage signature)."""
    pairs = _frame(study, "SELECT * FROM battle_pairs")[list(PAIR_COLUMNS[1:])]
    if pairs.empty:
        raise StageOrderError(
            f"{study.root}: no exported battles (run `corpus-audit battles export` first)"
        )
    votes = read_votes([Path(f) for f in files], pairs)
    seed = study.config.study.seed if seed is None else seed
    with study.transaction() as con:
        con.register("_battle_votes_in", votes)
        execute_sql(con, "battles/store_votes")
        con.unregister("_battle_votes_in")
        stored = _frame(study, "SELECT * FROM battles ORDER BY source_file, line, aspect")
        counts = _store_ratings(study, stored, rounds, seed)
    run.rows_in, run.rows_out = len(votes), len(stored)
    run.summary = _rating_summary(study)
    run.provenance.update(
        {"files": [str(f) for f in files], "rounds": rounds, "seed": seed, **counts}
    )
    if votes.empty:
        run.messages.append("the files hold no answered vote")
    return run


def _store_ratings(study: Study, stored: Any, rounds: int, seed: int) -> dict[str, int]:
    """Rewrite ``preference_ratings`` and ``preference_pairs`` from every stored vote."""
    con = study.con
    clear_tables(con, "preference_ratings", "preference_pairs")
    if stored.empty:
        return {"votes": 0}
    ratings = preference_ratings(stored, rounds=rounds, seed=seed)
    pairs = pair_matrix(stored)
    for table, frame in (("preference_ratings", ratings), ("preference_pairs", pairs)):
        insert_rows(con, table, frame.astype(object).where(frame.notna(), None))
    return {"votes": len(stored), "annotators": int(stored["annotator"].nunique())}


def _rating_summary(study: Study) -> list[dict[str, Any]]:
    return dicts(study.sql("battles/rating_summary"))
