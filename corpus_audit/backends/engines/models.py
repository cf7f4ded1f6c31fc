"""One generic model worker for every stage that loads a model once and serves many units.

A stage that runs a model (``label``: face detector + classifier; ``generate``: a diffusion
pipeline; ``neighbors``: an embedder; ``recaption``: a captioner; ``llm_texts``: a local LM;
``indicators``: spaCy NER) describes its worker as a :class:`ModelSpec` and hands it to
:meth:`~corpus_audit.backends.engines.base.Engine.map_actors` like any other factory::

    spec = ModelSpec(Labeller, (label_section, device, seed, cid))
    for key, result in engine.map_actors(spec, units, resources=..., workers=...):
        write(result)

``ModelSpec(load, args, serve, options)()`` calls ``load(*args, **options)`` once per worker (in the driver's process on
the ``local`` engine, in each actor on Ray) and returns a :class:`ModelWorker` whose call
serves one unit with ``serve(model, payload)`` (default: ``model(payload)``) and whose
``close()`` closes the model (when it has a ``close``). ``load``, ``args`` and ``serve`` must
be picklable: module-level callables (classes included) and plain values (dataclasses of
settings, strings, numbers, tuples).

There is one mechanism, not one Spec/Worker class pair per stage: what differs between the
stages is only *what* is loaded (``load``) and how one unit is served (``serve``). An API
client is a model worker like any other: its ``load`` opens the client session (its HTTP
pool, its key) and its ``close()`` closes it.

A driver whose next requests depend on the answers to earlier ones, or that calls a model
from inside a method that takes a model object (an embedder's ``encode``), holds a
:class:`ModelSession`: one ``map_actors`` for the whole stage, fed request by request
(:func:`model_session`), so the model is loaded once, on the engine's workers, and never on
the driver.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from corpus_audit.backends.engines import model_resources, stage_engine
from corpus_audit.backends.engines.base import (
    DRAIN,
    Engine,
    Progress,
    Resources,
    cancel_worker,
    close_worker,
)

if TYPE_CHECKING:  # the store is DuckDB: config validation loads the engines package
    from corpus_audit.core.store import StageRun

M = TypeVar("M")  # the loaded model (any object; closed with its ``close()`` if it has one)


def call_model(model: Any, payload: Any) -> Any:
    """The default ``serve``: ``model(payload)``."""
    return model(payload)


@dataclass(frozen=True)
class ModelSpec(Generic[M]):
    """A model worker's recipe: ``load(*args)`` builds the model once per worker,
    ``serve(model, payload)`` serves one unit (default :func:`call_model`). Picklable when
    ``load``, ``args``, ``serve`` and ``options`` (keyword arguments of ``load``) are.
    ``ModelSpec(...)()`` builds a :class:`ModelWorker` (this is the factory
    :meth:`Engine.map_actors` takes)."""

    load: Callable[..., M]
    args: tuple[Any, ...] = ()
    serve: Callable[[M, Any], Any] = call_model
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the loader keeps the model for reuse in its process (``load_embedder``: one per
    #: process, which later callers there still use): the worker serves it, never closes it
    shared: bool = False

    def __call__(self) -> ModelWorker[M]:
        return ModelWorker(self)


class ModelWorker(Generic[M]):
    """One loaded model serving units: ``worker(payload)`` is ``serve(model, payload)``;
    ``close()`` closes the model unless the spec says it is ``shared`` (idempotent)."""

    def __init__(self, spec: ModelSpec[M]) -> None:
        self.model: M | None = spec.load(*spec.args, **spec.options)
        self.serve = spec.serve
        self.shared = spec.shared

    def __call__(self, payload: Any) -> Any:
        if self.model is None:
            raise RuntimeError("ModelWorker: the model was closed")
        return self.serve(self.model, payload)

    def cancel(self) -> None:
        """End the unit the model is serving now, when the model can (``cancel()``)."""
        if self.model is not None:
            cancel_worker(self.model)

    def close(self) -> None:
        model, self.model = self.model, None
        if model is not None and not self.shared:
            close_worker(model)


class ModelSession:
    """A model on an engine's workers, called by the driver request by request.

    One :meth:`Engine.map_actors` of ``factory`` for the session's life (the model is loaded
    once per worker, when the first request comes), fed by a queue: :meth:`map` queues its
    payloads, then a :data:`~corpus_audit.backends.engines.base.DRAIN`, and yields their
    results in order; :meth:`__call__` is one request. A request is answered before the next
    is queued (the caller consumes :meth:`map` first), so a driver whose next request depends
    on an answer (FairCritic's rounds, an embedder called from inside a method) keeps its
    order, and a session's answers are those of a one-off call of the same worker.
    """

    def __init__(
        self,
        engine: Engine,
        factory: Callable[[], Any],
        *,
        resources: Resources | None = None,
        workers: int = 0,
        progress: Progress | None = None,
    ) -> None:
        self.queue: deque[tuple[int, Any]] = deque()
        self.keys = 0  # unit keys given so far (unique for the session)
        self.results = engine.map_actors(
            factory,
            self._units(),
            resources=resources or Resources(),
            workers=workers,
            progress=progress,
        )

    def _units(self) -> Iterator[Any]:
        """The queued units, a ``DRAIN`` after each request's; ends when one queued none."""
        while self.queue:
            while self.queue:
                yield self.queue.popleft()
            yield DRAIN

    def map(self, payloads: Iterable[Any]) -> Iterator[Any]:
        """The results of ``payloads`` (queued now), in order, each as it arrives; consume
        them all before the next request."""
        queued = list(enumerate(payloads, start=self.keys))
        self.queue.extend(queued)
        self.keys += len(queued)
        return self._take(len(queued))

    def _take(self, n: int) -> Iterator[Any]:
        for _ in range(n):
            _key, result = next(self.results)
            yield result

    def __call__(self, payload: Any) -> Any:
        """One request's result."""
        return next(self.map([payload]))

    def close(self) -> None:
        """End the map: its workers are closed (idempotent)."""
        self.results.close()


@contextlib.contextmanager
def model_session(
    section: Any,
    stage: str,
    factory: Callable[[], Any],
    *,
    run: StageRun,
    progress: Progress | None = None,
) -> Iterator[ModelSession]:
    """A :class:`ModelSession` of ``stage``'s model workers on the run's engine
    (``stage_engine``), sized like :func:`~corpus_audit.backends.engines.model_actors`'s;
    its workers are closed on leaving, the engine with the run."""
    session = ModelSession(
        stage_engine(section, run),
        factory,
        resources=model_resources(section),
        workers=section.workers_for(stage),
        progress=progress,
    )
    with contextlib.closing(session):
        yield session


class SessionEncoder:
    """An embedder (``encode(texts) -> (n, dim) array``) whose calls a :class:`ModelSession`
    serves: what a method that takes an embedder object gets, so the model runs on the
    engine's workers. The session's worker serves a list of texts with :func:`encode_texts`."""

    def __init__(self, session: ModelSession) -> None:
        self.session = session

    def encode(self, texts: Sequence[str]) -> Any:
        return self.session(list(texts))


def encode_texts(model: Any, texts: list[str]) -> Any:
    """A ``serve`` for embedders: ``model.encode(texts)``."""
    return model.encode(texts)
