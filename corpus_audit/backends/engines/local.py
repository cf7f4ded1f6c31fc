"""The ``local`` engine: everything on this machine, as the stages run today.

- **Tasks** run in a pool of ``threads`` threads (``engine.threads``). The map-style steps
  spend their time in code that releases the GIL (pyarrow's RE2 kernels, parquet decoding,
  DuckDB), so threads use the cores without copying batches between processes; this is how
  ``select`` scans today.
- **Actors**: one worker (``workers`` <= 1) lives in this process and serves units in a
  background thread, so the driver writes one unit's rows while the next is computed (torch
  and onnxruntime models use every core from one instance); ``prepare`` runs ahead in the
  task threads. ``workers`` > 1 starts that many worker processes (``spawn``, never
  ``fork``: the driver holds DuckDB and threads), each building its worker once with
  ``factory()`` and running ``prepare`` itself, as the NER pool of ``indicators`` does today
  (spaCy holds the GIL, so a second copy needs a second process).

No retries: a failing unit fails the map at once (the stages' own resumability covers a
rerun), and a worker process that dies is a :class:`WorkerDiedError`.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from collections.abc import Callable
from typing import Any

from corpus_audit.backends.engines.base import (
    IN_FLIGHT_PER_WORKER,
    ONE_CPU,
    ActorSpec,
    Engine,
    Resources,
    cancel_worker,
    close_worker,
)
from corpus_audit.core.devices import resolve_device
from corpus_audit.core.errors import CorpusAuditError, WorkerDiedError


class _FuturePool:
    """A :class:`~corpus_audit.backends.engines.base.UnitPool` over ``concurrent.futures``."""

    def __init__(self, window: int) -> None:
        self.window = window

    def wait(self, running: list[cf.Future]) -> list[cf.Future]:
        done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def fetch(self, future: cf.Future) -> Any:
        return future.result()

    def cancel(self, futures: list[cf.Future]) -> None:
        for future in futures:
            future.cancel()


class _ThreadTasks(_FuturePool):
    def __init__(self, fn: Callable[[Any], Any], threads: int) -> None:
        super().__init__(IN_FLIGHT_PER_WORKER * threads)
        self.fn = fn
        self.pool = cf.ThreadPoolExecutor(threads, thread_name_prefix="engine-task")

    def submit(self, payload: Any) -> cf.Future:
        return self.pool.submit(self.fn, payload)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class _InProcessActor(_FuturePool):
    """One worker in this process, serving units in order in one background thread."""

    def __init__(
        self, factory: Callable[[], Any], prepare: Callable[[Any], Any] | None, threads: int
    ) -> None:
        super().__init__(IN_FLIGHT_PER_WORKER)
        self.worker = factory()
        self.prepare = prepare
        self.serve = cf.ThreadPoolExecutor(1, thread_name_prefix="engine-actor")
        self.prep = cf.ThreadPoolExecutor(threads, thread_name_prefix="engine-prep")

    def submit(self, payload: Any) -> cf.Future:
        if self.prepare is None:
            return self.serve.submit(self.worker, payload)
        ready = self.prep.submit(self.prepare, payload)
        return self.serve.submit(lambda: self.worker(ready.result()))

    def cancel(self, futures: list[cf.Future]) -> None:
        """Give up on ``futures``: those not started never run, and the worker is asked to
        end the one it is serving (:func:`cancel_worker`: a network client's requests in
        flight), so closing does not wait for it."""
        super().cancel(futures)
        if any(f.running() for f in futures):
            cancel_worker(self.worker)

    def close(self) -> None:
        self.prep.shutdown(wait=True, cancel_futures=True)
        self.serve.shutdown(wait=True, cancel_futures=True)
        close_worker(self.worker)


class _ProcessActors(_FuturePool):
    """``workers`` spawned processes, each with one worker built by ``factory()``."""

    def __init__(
        self, factory: Callable[[], Any], prepare: Callable[[Any], Any] | None, workers: int
    ) -> None:
        import multiprocessing

        super().__init__(IN_FLIGHT_PER_WORKER * workers)
        self.pool = cf.ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_process_worker,
            initargs=(factory, prepare),
        )

    def submit(self, payload: Any) -> cf.Future:
        return self.pool.submit(_serve_in_process, payload)

    def fetch(self, future: cf.Future) -> Any:
        from concurrent.futures.process import BrokenProcessPool

        try:
            return future.result()
        except BrokenProcessPool as exc:
            raise WorkerDiedError(
                f"engine local: a worker process died ({exc}); the local engine does not "
                "retry (rerun the stage: it resumes), or use engine.engine = 'ray' for retries"
            ) from None

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class LocalEngine(Engine):
    """Threads for tasks; one in-process worker or ``spawn`` processes for actors."""

    name = "local"

    def __init__(self, threads: int = 2) -> None:
        if threads < 1:
            raise ValueError(f"engine.threads must be >= 1, got {threads}")
        self.threads = int(threads)

    def parallelism(self, resources: Resources = ONE_CPU) -> int:
        return max(1, int(self.threads // resources.num_cpus))

    def task_pool(self, fn: Callable[[Any], Any], resources: Resources) -> _ThreadTasks:
        return _ThreadTasks(fn, self.parallelism(resources))

    def actor_pool(self, actors: ActorSpec, resources: Resources) -> _FuturePool:
        if actors.workers > 1:
            return _ProcessActors(actors.factory, actors.prepare, actors.workers)
        return _InProcessActor(actors.factory, actors.prepare, self.threads)

    def actor_workers(self, resources: Resources = ONE_CPU, workers: int = 0) -> int:
        """One worker in this process unless ``workers`` > 1 (that many processes)."""
        return workers if workers > 1 else 1

    def worker_device(self, device: str = "auto", resources: Resources = ONE_CPU) -> str:
        """The workers run on this machine and see all its devices: ``engine.device``
        resolved here (:func:`~corpus_audit.core.devices.resolve_device`)."""
        return resolve_device(device)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "threads": self.threads, "cpus": os.cpu_count()}


# -- worker processes of the local engine ---------------------------------------------------------
_PROCESS_WORKER: Any = None
_PROCESS_PREPARE: Callable[[Any], Any] | None = None
_PROCESS_ERROR: CorpusAuditError | None = None  # the factory's user error, raised per unit


def _init_process_worker(factory: Callable[[], Any], prepare: Callable[[Any], Any] | None) -> None:
    """Runs once in each spawned process: one thread per process for BLAS, then the worker."""
    import atexit

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    global _PROCESS_WORKER, _PROCESS_PREPARE, _PROCESS_ERROR
    _PROCESS_PREPARE = prepare
    try:
        _PROCESS_WORKER = factory()
    except CorpusAuditError as exc:  # reaches the driver as itself with the first unit
        _PROCESS_ERROR = exc
        return
    atexit.register(close_worker, _PROCESS_WORKER)


def _serve_in_process(payload: Any) -> Any:
    if _PROCESS_ERROR is not None:
        raise _PROCESS_ERROR
    assert _PROCESS_WORKER is not None, "worker process not initialised"
    if _PROCESS_PREPARE is not None:
        payload = _PROCESS_PREPARE(payload)
    return _PROCESS_WORKER(payload)
