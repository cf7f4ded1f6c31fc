"""The engine protocol: how map-style work runs (in this process, or on a Ray cluster).

A stage hands an engine **work units**, ``(key, payload)`` pairs: ``key`` is the unit's id
(hashable and unique, e.g. ``(file_id, row_group)`` or a batch number) and ``payload`` what a
worker needs (picklable: a path and a row group, an arrow table of captions). The engine
runs them and yields ``(key, result)`` **in the order the units were given**, each key
exactly once, so the driver writes the study database in the same order whatever ran where
(the study stays one DuckDB file, written only by the driver).

Two shapes of work, the two methods of :class:`Engine`:

- :meth:`Engine.map_tasks`: a stateless function per unit (``select``: scan one file or row
  group with the RE2 prefilter). Cheap to start, retried as a whole.
- :meth:`Engine.map_actors`: stateful workers that load a model once and then serve many
  units (``indicators``: spaCy; ``neighbors``: SBERT; ``label``: face detector +
  classifier; ``generate``: the diffusion pipeline). ``factory()`` builds one worker (it
  is called once per worker process); ``worker(payload)`` serves one unit. An optional
  ``prepare`` function runs on CPU before the worker (``label``: decode images) so the
  model never waits for it.

A unit iterator whose next units depend on the results of earlier ones (``llm_texts``: a
round's requests depend on the counts the previous round committed) yields :data:`DRAIN`
between them: the engine submits nothing after it until every unit given before it has
been yielded to the caller (and so written), then asks the iterator again. The workers of
one map stay loaded across drains, so a model is loaded once for all the rounds.

Results are whole units: a unit's result is one value, produced by one successful attempt.
A retried unit (a task that raised a retryable error, a worker process that died) replaces
its failed attempt and never adds to it; the engine also refuses a unit key given twice and
yields each key once. Together that is the driver-side guarantee that a retry never
duplicates rows (``docs/scale.md``, "Faults").

Backends register by name (:mod:`corpus_audit.backends.engines`): ``local`` (threads and, for
actors, processes: what the stages do today) and ``ray``.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")
H = TypeVar("H")  # a backend's handle of a unit in flight (a Future, an ObjectRef)


class _Drain:
    """The type of :data:`DRAIN` (one instance)."""

    def __repr__(self) -> str:
        return "DRAIN"


#: yielded by a unit iterator instead of a unit: submit nothing more until every unit given
#: before it has been yielded (module docstring); never a unit, never yielded back
DRAIN = _Drain()

#: units kept in flight per worker: one running, one queued behind it (so a worker never
#: waits for the driver), without holding the whole work list in memory
IN_FLIGHT_PER_WORKER = 2


@dataclass(frozen=True)
class Resources:
    """What one task or one actor needs; the Ray backend schedules by it.

    ``num_cpus`` (> 0, fractions allowed) and ``num_gpus`` (>= 0) are Ray's logical
    resources; ``memory_mb`` (>= 0, 0 = no reservation) is reserved heap memory in MiB. The
    local backend uses ``num_cpus`` only to size its thread pool.
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory_mb: int = 0

    def __post_init__(self) -> None:
        if not self.num_cpus > 0:
            raise ValueError(f"Resources.num_cpus must be > 0, got {self.num_cpus}")
        if self.num_gpus < 0 or self.memory_mb < 0:
            raise ValueError("Resources.num_gpus and memory_mb must be >= 0")


#: the default: one CPU, no GPU, no memory reservation
ONE_CPU = Resources()


@dataclass(frozen=True)
class Progress:
    """A progress bar for one map: ``desc`` (e.g. ``"select"``), the ``unit`` it counts
    (``"unit"``, ``"batch"``), ``total`` units when the units are not a sized collection.
    The bar advances when a unit *finishes* (in any order), not when it is yielded."""

    desc: str
    unit: str = "unit"
    total: int | None = None
    enabled: bool = True


@dataclass(frozen=True)
class ActorSpec:
    """The workers of one :meth:`Engine.map_actors`, as a backend's ``actor_pool`` gets them:
    ``factory()`` builds one worker (picklable), ``workers`` copies of it (0 = the backend's
    default), ``prepare(payload)`` (optional, picklable) runs per unit before a worker gets it.
    """

    factory: Callable[[], Any]
    workers: int = 0
    prepare: Callable[[Any], Any] | None = None


@runtime_checkable
class Worker(Protocol[T, R]):
    """A stateful worker built once per worker process by an actor factory."""

    def __call__(self, payload: T) -> R:
        """Serve one unit; must not depend on which units the worker served before."""
        ...


class UnitPool(Protocol[H]):
    """The units of one map in flight on a backend (a thread pool, Ray tasks, Ray actors).

    ``window`` units at most are in flight. ``submit(payload)`` starts a unit and returns
    its handle; ``wait(running)`` blocks until at least one of ``running`` finished and
    returns the finished ones; ``fetch(handle)`` is the unit's result (or raises its error);
    ``cancel(handles)`` gives up on units after an error; ``close()`` releases the workers.
    """

    window: int

    def submit(self, payload: Any) -> H: ...

    def wait(self, running: list[H]) -> list[H]: ...

    def fetch(self, handle: H) -> Any: ...

    def cancel(self, handles: list[H]) -> None: ...

    def close(self) -> None: ...


class Engine(abc.ABC):
    """Runs map-style work units; see the module docstring for the guarantees.

    The two maps are the interface the stages use. A backend implements
    :meth:`parallelism`, :meth:`task_pool`, :meth:`actor_pool` (a :class:`UnitPool` each),
    :meth:`describe` and, if it starts something, :meth:`close`.
    """

    name: str = "?"

    # -- the interface -----------------------------------------------------------------------
    def map_tasks(
        self,
        fn: Callable[[T], R],
        units: Iterable[tuple[K, T] | _Drain],
        *,
        resources: Resources = ONE_CPU,
        progress: Progress | None = None,
    ) -> Iterator[tuple[K, R]]:
        """``(key, fn(payload))`` for every unit, in input order.

        ``fn`` must be picklable (a module-level function, or a ``functools.partial`` of
        one) and depend only on its payload. Raises the first unit's error that is not
        retried away; units still in flight are cancelled.
        """
        return run_units(lambda: self.task_pool(fn, resources), units, progress)

    def map_actors(
        self,
        factory: Callable[[], Worker[T, R]],
        units: Iterable[tuple[K, T] | _Drain],
        *,
        resources: Resources = ONE_CPU,
        workers: int = 0,
        prepare: Callable[[T], Any] | None = None,
        progress: Progress | None = None,
    ) -> Iterator[tuple[K, R]]:
        """``(key, worker(prepare(payload)))`` for every unit, in input order.

        ``workers`` copies of the worker (0 = the backend's default: on Ray as many as
        :meth:`parallelism` allows for ``resources``, locally one in this process); each is
        built once by ``factory()`` (picklable) and then serves many units. ``prepare``
        (optional, picklable) runs on CPU per unit before the worker gets it. Workers are
        closed (``close()``, if they have one) when the map ends.
        """
        actors = ActorSpec(factory, workers, prepare)
        return run_units(lambda: self.actor_pool(actors, resources), units, progress)

    @abc.abstractmethod
    def parallelism(self, resources: Resources = ONE_CPU) -> int:
        """How many tasks or actors of this size can run at once (>= 1)."""

    def actor_workers(self, resources: Resources = ONE_CPU, workers: int = 0) -> int:
        """How many workers :meth:`map_actors` starts for ``workers`` (0 = the backend's
        default: here as many as :meth:`parallelism` allows for ``resources``)."""
        return workers or self.parallelism(resources)

    def worker_device(self, device: str = "auto", resources: Resources = ONE_CPU) -> str:
        """The torch device of a model worker with ``resources`` for ``engine.device``:
        a named device as given; ``auto``: ``cuda`` when the worker reserves GPUs
        (``resources.num_gpus`` > 0), else ``cpu``, since a worker elsewhere sees only
        the GPUs it reserved. Engines whose workers run on this machine override it."""
        if device != "auto":
            return device
        return "cuda" if resources.num_gpus > 0 else "cpu"

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """Provenance: the backend's name, version, address and resources."""

    def close(self) -> None:  # noqa: B027 - optional hook: most backends start nothing
        """Release what the engine started (a local Ray cluster); idempotent."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a backend implements -------------------------------------------------------------
    @abc.abstractmethod
    def task_pool(self, fn: Callable[[Any], Any], resources: Resources) -> UnitPool:
        """A pool running ``fn`` per payload as stateless tasks."""

    @abc.abstractmethod
    def actor_pool(self, actors: ActorSpec, resources: Resources) -> UnitPool:
        """A pool of ``actors.workers`` workers built by ``actors.factory()``, each unit
        through ``actors.prepare`` first."""


# -- shared machinery ----------------------------------------------------------------------------
def progress_bar(progress: Progress | None, units: Iterable[Any] = ()) -> Any:
    """The one progress bar of the package (``tqdm.auto``: widgets in Jupyter, a line on
    stderr in a terminal) for ``progress`` (disabled when None or not ``enabled``); its total
    is ``progress.total``, else ``len(units)`` when ``units`` is sized and not empty. Stages
    declare their bars (:class:`Progress`) and never open one themselves."""
    from tqdm.auto import tqdm

    total = progress.total if progress is not None else None
    if total is None and hasattr(units, "__len__") and len(units):  # type: ignore[arg-type]
        total = len(units)  # type: ignore[arg-type]
    return tqdm(
        total=total,
        desc=progress.desc if progress else "",
        unit=progress.unit if progress else "unit",
        disable=progress is None or not progress.enabled,
        dynamic_ncols=True,
    )


def track(
    items: Iterable[T], progress: Progress, label: Callable[[T], str] | None = None
) -> Iterator[T]:
    """``items`` one by one, a :func:`progress_bar` advancing as each is done with;
    ``label(item)``, when given, is shown beside the bar while the item is worked on."""
    with progress_bar(progress, items) as bar:
        for item in items:
            if label is not None:
                bar.set_postfix_str(label(item))
            yield item
            bar.update(1)


def run_units(
    open_pool: Callable[[], UnitPool],
    units: Iterable[tuple[K, T] | _Drain],
    progress: Progress | None,
) -> Iterator[tuple[K, Any]]:
    """Run ``units`` on the pool ``open_pool()`` opens (when iteration starts): ordered
    results, a progress bar, units in flight cancelled and the pool closed however it ends."""
    pool = open_pool()
    try:
        with progress_bar(progress, units) as bar:
            window = UnitWindow(pool)
            try:
                yield from window.run(units, bar)
            finally:
                pool.cancel(window.pending())
    finally:
        pool.close()


class UnitWindow:
    """Keeps at most ``pool.window`` units in flight and yields their results in input order.

    Unit keys must be unique: a key given twice is a ``ValueError`` before anything of that
    unit runs, so one unit can never be written twice by the driver.
    """

    def __init__(self, pool: UnitPool) -> None:
        self.pool = pool
        self.window = max(1, pool.window)
        self.in_flight: deque[tuple[Hashable, Any]] = deque()

    def run(self, units: Iterable[tuple[K, T] | _Drain], bar: Any) -> Iterator[tuple[K, Any]]:
        """The ordered results; the bar advances as units finish."""
        source = iter(units)
        seen: set[Hashable] = set()
        running: list[Any] = []  # submitted and not yet seen finished
        exhausted = draining = False
        while True:
            if draining and not self.in_flight:
                draining = False  # everything before the DRAIN was yielded: ask for more
            while not exhausted and not draining and len(self.in_flight) < self.window:
                try:
                    unit = next(source)
                except StopIteration:
                    exhausted = True
                    break
                if unit is DRAIN:
                    draining = True
                    break
                key, payload = unit
                if key in seen:
                    raise ValueError(f"work unit {key!r} given twice (unit keys must be unique)")
                seen.add(key)
                handle = self.pool.submit(payload)
                self.in_flight.append((key, handle))
                running.append(handle)
            if not self.in_flight:
                if draining:
                    continue  # a DRAIN with nothing in flight: ask the iterator again
                return
            key, head = self.in_flight[0]
            while head in running:  # handles compare by identity (Future) or id (ObjectRef)
                finished = set(self.pool.wait(running))
                running = [h for h in running if h not in finished]
                bar.update(len(finished))
            self.in_flight.popleft()
            yield key, self.pool.fetch(head)  # type: ignore[misc]

    def pending(self) -> list[Any]:
        """Handles submitted and not yet yielded (to cancel after an error)."""
        return [h for _, h in self.in_flight]


def close_worker(worker: Any) -> None:
    """Call ``worker.close()`` when the worker has one."""
    close = getattr(worker, "close", None)
    if callable(close):
        close()


def cancel_worker(worker: Any) -> None:
    """Call ``worker.cancel()`` when the worker has one: end what it is serving now (a
    network client's requests in flight and its backoff waits), because the map gave up on
    its units (an error, Ctrl-C, SIGTERM on the driver)."""
    cancel = getattr(worker, "cancel", None)
    if callable(cancel):
        cancel()
