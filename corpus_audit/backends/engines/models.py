"""One generic model worker for every stage that loads a model once and serves many units.

A stage that runs a model (``label``: face detector + classifier; ``generate``: a diffusion
pipeline; ``neighbors``: an embedder; ``recaption``: a captioner; ``llm_texts``: a local LM;
``indicators``: spaCy NER) describes its worker as a :class:`ModelSpec` and hands it to
:meth:`~corpus_audit.backends.engines.base.Engine.map_actors` like any other factory::

    spec = ModelSpec(Labeller, (label_section, device, seed, cid))
    for key, result in engine.map_actors(spec, units, resources=..., workers=...):
        write(result)

``ModelSpec(load, args)()`` calls ``load(*args)`` once per worker (in the driver's process on
the ``local`` engine, in each actor on Ray) and returns a :class:`ModelWorker` whose call
serves one unit with ``serve(model, payload)`` (default: ``model(payload)``) and whose
``close()`` closes the model (when it has a ``close``). ``load``, ``args`` and ``serve`` must
be picklable: module-level callables (classes included) and plain values (dataclasses of
settings, strings, numbers, tuples).

There is one mechanism, not one Spec/Worker class pair per stage: what differs between the
stages is only *what* is loaded (``load``) and how one unit is served (``serve``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from corpus_audit.backends.engines.base import close_worker

M = TypeVar("M")  # the loaded model (any object; closed with its ``close()`` if it has one)


def call_model(model: Any, payload: Any) -> Any:
    """The default ``serve``: ``model(payload)``."""
    return model(payload)


@dataclass(frozen=True)
class ModelSpec(Generic[M]):
    """A model worker's recipe: ``load(*args)`` builds the model once per worker,
    ``serve(model, payload)`` serves one unit (default :func:`call_model`). Picklable when
    ``load``, ``args`` and ``serve`` are. ``ModelSpec(...)()`` builds a :class:`ModelWorker`
    (this is the factory :meth:`Engine.map_actors` takes)."""

    load: Callable[..., M]
    args: tuple[Any, ...] = ()
    serve: Callable[[M, Any], Any] = call_model

    def __call__(self) -> ModelWorker[M]:
        return ModelWorker(self)


class ModelWorker(Generic[M]):
    """One loaded model serving units: ``worker(payload)`` is ``serve(model, payload)``;
    ``close()`` closes the model (idempotent)."""

    def __init__(self, spec: ModelSpec[M]) -> None:
        self.model: M | None = spec.load(*spec.args)
        self.serve = spec.serve

    def __call__(self, payload: Any) -> Any:
        if self.model is None:
            raise RuntimeError("ModelWorker: the model was closed")
        return self.serve(self.model, payload)

    def close(self) -> None:
        model, self.model = self.model, None
        if model is not None:
            close_worker(model)
