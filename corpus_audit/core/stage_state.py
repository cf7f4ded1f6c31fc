"""Where each stage stands, and the one check a stage makes before it reads another's tables.

A stage is in one of four states (``corpus-audit status`` shows them):

- ``not run``: no run has finished and none was left unfinished;
- ``done`` / ``skipped``: its latest run finished (``skipped``: it found nothing to do);
- ``partial``: a run began, committed part of its work and did not finish (killed, or failed
  half way); ``study.stage_unfinished`` holds its mark (:meth:`Study.stage`). Its committed
  batches are kept and a rerun continues from them, but its tables are incomplete.

:func:`require` is how every stage that reads earlier output checks it: the stages it needs
must have finished, and no stage it reads may be partial (a partly written ``nn`` sample would
otherwise flow into the analysis and the report without a word). The error names the stage to
run. How far a partial stage got comes from the optional ``progress(study)`` function of the
stage's module (:class:`StageProgress`: ``24/62 occupations``); stages without one say only
"partial".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, NamedTuple

from corpus_audit.core.catalogue import STAGE_NAMES, STAGES, command
from corpus_audit.core.errors import StageOrderError, printable
from corpus_audit.core.store import Study


class StageProgress(NamedTuple):
    """How much of a stage's work is committed: ``done`` of ``total`` ``unit``."""

    done: int
    total: int
    unit: str  # plural noun: "occupations", "captions", "images"

    def __str__(self) -> str:
        return f"{self.done}/{self.total} {self.unit}"


@dataclass
class StageState:
    """One stage's state; ``last`` is its latest finished run (a ``stage_runs`` row as a dict)."""

    stage: str
    state: str  # "not run" | "done" | "skipped" | "partial"
    last: dict[str, Any] | None
    progress: StageProgress | None = None  # how far a partial stage got, when the stage can tell

    @property
    def label(self) -> str:
        """``partial: 24/62 occupations``, or the bare state."""
        if self.state == "partial" and self.progress is not None:
            return f"partial: {self.progress}"
        return self.state


def stage_state(study: Study, name: str) -> StageState:
    """The state of stage ``name`` (see the module docstring)."""
    last = study.last_run(name)
    if study.unfinished(name) is not None:
        return StageState(name, "partial", last, _progress(study, name))
    if last is None:
        return StageState(name, "not run", None)
    return StageState(name, str(last["status"]), last)


def _progress(study: Study, name: str) -> StageProgress | None:
    module_name = STAGES.get(name).target.split(":")[0]
    probe = getattr(importlib.import_module(module_name), "progress", None)
    return probe(study) if probe is not None else None


def require(
    study: Study, *stages: str, by: str, optional: tuple[str, ...] | list[str] = ()
) -> None:
    """Refuse to run stage ``by`` on missing or partial inputs.

    Every stage in ``stages`` must have finished and must not be partial; a stage in
    ``optional`` may never have run (its tables are then empty) but must not be partial.
    Raises :class:`StageOrderError` naming the stage to run and the command.
    """
    root = printable(study.root)
    for name in [*stages, *optional]:
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}")
        state = stage_state(study, name)
        if state.state == "partial":
            how_far = f": {state.progress}" if state.progress is not None else ""
            raise StageOrderError(
                f"{root}: `{by}` reads the tables of `{name}`, whose last run did not finish "
                f"(partial{how_far}); run `corpus-audit {command(name)} {root}` to complete it "
                "(finished work is kept)"
            )
        if state.state == "not run" and name in stages:
            raise StageOrderError(
                f"{root}: `{by}` reads the tables of `{name}`, which has not run; run "
                f"`corpus-audit {command(name)} {root}` first"
            )


def require_inputs(study: Study, name: str) -> None:
    """:func:`require` with what stage ``name`` declares in the catalogue (``core/catalogue.py``): its ``needs`` must
    have finished, and neither they nor its ``after`` stages may be partial."""
    spec = STAGES.get(name)
    require(study, *spec.needs, by=name, optional=spec.after)


# Which stage draws the samples of each strategy (the stage to rerun when they are stale).
SAMPLE_OWNERS = {
    "keyword": "select",
    "no_indicators": "indicators",
    "nn": "neighbors",
    "nn_no_indicators": "neighbors",
}


def require_sample_captions(study: Study, *, by: str) -> None:
    """Every caption a training sample names must be in ``captions`` (a foreign-key check).

    A sample drawn before ``select`` renumbered the captions (a corpus file added or removed)
    points at captions that no longer exist until its stage runs again. Raises
    :class:`StageOrderError` naming the stage that redraws it.
    """
    rows = study.con.execute(
        "SELECT s.strategy, count(*) FROM samples s "
        "WHERE NOT EXISTS (SELECT 1 FROM captions c WHERE c.caption_id = s.caption_id) "
        "GROUP BY s.strategy ORDER BY s.strategy"
    ).fetchall()
    if not rows:
        return
    root = printable(study.root)
    counts = ", ".join(f"{n} `{printable(strategy)}`" for strategy, n in rows)
    owners = {SAMPLE_OWNERS.get(strategy, "") for strategy, _ in rows}
    stages = [name for name in STAGE_NAMES if name in owners]
    rerun = ", ".join(f"`{name}`" for name in stages) or "the stages that drew them"
    raise StageOrderError(
        f"{root}: `{by}` found samples that name captions no longer in `captions` ({counts}; "
        f"select ran again since they were drawn); rerun {rerun} to redraw them "
        f"(`corpus-audit run {root}` runs every stage in order)"
    )
