"""Stage ``pst_prompts``: the PST prompt sets of ``[pst]`` into ``pst_prompts``.

Expands the roles and templates files (``pst.roles``, ``pst.templates``; ``builtin:`` or paths
relative to the study directory) into the kinds of ``pst.kinds`` with the fair variant
(``pst.fair``) and the power singles (``pst.power_singles``)
(:func:`corpus_audit.methods.lexicon.pst.load_prompts`). ``generate`` reads this table in a PST study.
A rerun with the same prompts is skipped; other prompts replace the table in one transaction
(images of prompts no longer in it stay in ``images`` but no PST stage reads them).
"""

from __future__ import annotations

from typing import Any

from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.lexicon.pst import load_prompts, prompts_frame
from corpus_audit.tables.pst_frames import insert_frame, read_frame

NAME = "pst_prompts"


@stage_body(NAME)
def pst_prompts(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Write ``pst_prompts`` from the ``[pst]`` settings; see the module docstring."""
    cfg = study.config.pst
    prompts = load_prompts(
        cfg.roles,
        cfg.templates,
        base=study.root,
        kinds=tuple(cfg.kinds),
        fair=cfg.fair,
        power_singles=cfg.power_singles,
    )
    frame = prompts_frame(prompts)
    run.rows_in = run.rows_out = len(frame)
    stored = read_frame(study, "pst_prompts")
    if _same(stored, frame):
        run.skip(f"the {len(frame)} prompts are already stored")
    else:
        with study.transaction() as con:
            con.execute("DELETE FROM pst_prompts")
            insert_frame(con, "pst_prompts", frame)
    run.summary = _summary(study)
    run.provenance.update(roles=cfg.roles, templates=cfg.templates, prompts=len(frame))
    return run


def _same(stored: Any, frame: Any) -> bool:
    if len(stored) != len(frame):
        return False
    cols = list(frame.columns)
    a = stored[cols].sort_values("prompt_id").astype(str).reset_index(drop=True)
    b = frame[cols].sort_values("prompt_id").astype(str).reset_index(drop=True)
    return bool(a.equals(b))


def _summary(study: Study) -> list[dict[str, Any]]:
    rows = study.con.execute(
        "SELECT kind, variant, count(*) FROM pst_prompts GROUP BY ALL ORDER BY kind, variant"
    ).fetchall()
    return [{"kind": k, "variant": v, "prompts": n} for k, v, n in rows]
