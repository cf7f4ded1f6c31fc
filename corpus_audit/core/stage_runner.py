"""The runner's part of every stage: the setup each stage body used to repeat, done once.

A stage module writes its body as ``body(study, run, *, progress=True, ...) -> StageRun``
and declares it with :func:`stage_body`, which makes it the stage function the catalogue
names (``fn(study, *, progress=True, ...) -> StageRun``, the shape the CLI, the API and
``corpus-audit run`` call). For every call the runner

0. checks the call's own arguments with the body's ``arguments`` check, when it declares one
   (``battles import --rounds 0``): a bad flag is one error whatever the study holds, before
   the run opens;
1. opens a transaction first when the catalogue declares the stage ``atomic`` (``select``:
   its whole run, record included, commits or rolls back as one);
2. opens the run (:meth:`Study.stage <corpus_audit.core.store.Study.stage>`: the study's run
   lock, the unfinished mark, the hash of the declared config, the fingerprints of the
   declared ``reads``, and on success the ``stage_runs`` record; whatever the run holds, such
   as its engine (``stage_engine(section, run)``), is closed when it ends, however it ends);
3. asks the body's ``off`` guard, when it declares one, whether the study's settings turn the
   stage off (a skipped run saying why, before any input is required);
4. checks the declared inputs (the catalogue's ``needs`` and ``after``:
   :func:`~corpus_audit.core.stage_state.require_inputs`);
5. calls the body with the open run.

No stage body calls :meth:`Study.stage` or ``require_inputs`` itself (a test reads every stage
module for it), so every stage checks its inputs the same way and in the same order.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Concatenate, ParamSpec

from corpus_audit.core.catalogue import STAGES
from corpus_audit.core.stage_state import require_inputs
from corpus_audit.core.store import StageRun, Study

P = ParamSpec("P")
#: a stage body: the study, its open run, then the stage function's own options
Body = Callable[Concatenate[Study, StageRun, P], StageRun]
#: a stage's ``off`` guard: why the study's settings turn the stage off, or None when they don't
OffGuard = Callable[[Study], str | None]
#: a stage's ``arguments`` check: raises on a bad argument of the call (name -> value, the
#: defaults filled in)
ArgumentCheck = Callable[[dict[str, Any]], None]


def stage_body(
    name: str, *, off: OffGuard | None = None, arguments: ArgumentCheck | None = None
) -> Callable[[Body[P]], Callable[Concatenate[Study, P], StageRun]]:
    """Make ``body`` the stage function of catalogue stage ``name`` (see the module
    docstring); ``off`` is the stage's optional guard (``None``: never off), ``arguments``
    its optional check of the call's arguments."""

    def wrap(body: Body[P]) -> Callable[Concatenate[Study, P], StageRun]:
        signature = _without_run(body)

        @functools.wraps(body)
        def stage(study: Study, /, *args: P.args, **kwargs: P.kwargs) -> StageRun:
            if arguments is not None:
                bound = signature.bind(study, *args, **kwargs)
                bound.apply_defaults()
                arguments(dict(bound.arguments))
            atomic = STAGES.get(name).atomic  # an undeclared name fails here, naming it
            with study.transaction() if atomic else nullcontext(), study.stage(name) as run:
                reason = off(study) if off is not None else None
                if reason is not None:
                    return run.skip(reason)
                require_inputs(study, name)
                return body(study, run, *args, **kwargs)

        stage.__signature__ = signature  # type: ignore[attr-defined]
        return stage

    return wrap


def _without_run(body: Callable[..., Any]) -> inspect.Signature:
    """``body``'s signature without its second parameter (the run the runner passes)."""
    signature = inspect.signature(body)
    params = list(signature.parameters.values())
    return signature.replace(parameters=[params[0], *params[2:]])
