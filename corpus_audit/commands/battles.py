"""``corpus-audit battles export / import``: the command side of the battles stages.

The work is the ``battles_export``, ``battles_import`` and ``battles_arena_import`` stages
(:mod:`corpus_audit.stages.battles`, :mod:`corpus_audit.stages.arena`); this module gives the
export its voting page (:func:`corpus_audit.report.battles_page.export_page`) and sends the
files of ``battles import`` to the stage that reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.preferences.arena_import import OVERALL
from corpus_audit.report.battles_page import export_page
from corpus_audit.stages import arena
from corpus_audit.stages import battles as battle_stages
from corpus_audit.stages.battles import BATTLES_DIR, ROUNDS, import_battles

__all__ = ["BATTLES_DIR", "ROUNDS", "export_battles", "import_battles", "import_votes"]


#: ``battles export``: the ``battles_export`` stage with the report's voting page (a stage
#: imports no report module, so the command passes ``write_page`` in)
export_battles = partial(battle_stages.export_battles, write_page=export_page)


def import_votes(
    study: Study,
    files: Sequence[Path],
    *,
    rounds: int = ROUNDS,
    seed: int | None = None,
    aspect: str | None = None,
    fmt: str | None = None,
) -> StageRun:
    """``battles import``: annotator sheets (``.csv``, :func:`import_battles`) against the
    exported pairs, or vote files of another arena (``.json`` / ``.jsonl``,
    :func:`corpus_audit.stages.arena.import_arena`, with ``aspect`` and ``fmt``); not both."""
    files = [Path(f) for f in files]
    is_arena = [arena.is_arena_file(f) for f in files]
    if any(is_arena) and not all(is_arena):
        raise CorpusAuditError(
            "battles import: give either annotator sheets (.csv) or arena vote files "
            "(.json, .jsonl), not both in one call"
        )
    if all(is_arena):
        return arena.import_arena(
            study, files, rounds=rounds, seed=seed, aspect=aspect or OVERALL, fmt=fmt
        )
    return import_battles(study, files, rounds=rounds, seed=seed)
