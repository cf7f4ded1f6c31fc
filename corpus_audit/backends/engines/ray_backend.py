"""The ``ray`` engine: the same work units as Ray Core tasks and actors, on a local or remote
cluster. Imported only when ``engine.engine = "ray"`` (``pip install 'corpus_audit[ray]'``).

Why Ray Core and not Ray Data (``docs/scale.md`` has the measurements):

- ``select`` must give every caption the id ``(file_id << 40) | row_in_file`` and count null
  and invalid-UTF-8 captions per file, for parquet, CSV, JSONL and saved datasets alike; the
  project's readers do that per file or row group. One Ray *task* per such unit runs that
  same code; Ray Data's ``read_parquet`` would re-split files into its own blocks and lose
  the row numbers (and reads parquet only).
- The sink is the driver: the study is one DuckDB file with a single writer. Ray Data's
  strength, streaming between operators into a distributed sink, has no sink to stream to;
  what the driver needs is the units' results in a fixed order with bounded memory, which a
  window of in-flight Core tasks gives directly.
- Models load once per *actor* (spaCy, SBERT, face detector + classifier, a diffusion
  pipeline); each actor serves many units. Ray Data's ``map_batches`` with an actor pool
  does the same, but decides the batch boundaries and the order itself; here the unit is the
  stage's own (a to-do batch committed in one transaction), keyed and ordered by the driver.

Faults (Ray's mechanisms, options below):

- a task that raises one of ``retry_exceptions`` (default :class:`OSError`: a flaky network
  file system, an injected fault) or whose worker process dies is retried up to
  ``max_retries`` times; errors a user must fix (:class:`CorpusAuditError`: a missing
  column, a corrupt file) are not retried and reach the driver as themselves, one line
  naming the file;
- a dead actor is restarted up to ``max_restarts`` times (its constructor runs again: the
  model is loaded again) and the unit it was serving is resubmitted (``max_task_retries``);
- a unit's result is one return value: whatever attempt succeeds replaces the failed ones,
  and :class:`~corpus_audit.backends.engines.base.UnitWindow` yields each unit key once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

import corpus_audit
from corpus_audit.backends.engines import ray_reaper
from corpus_audit.backends.engines.base import (
    IN_FLIGHT_PER_WORKER,
    ONE_CPU,
    Engine,
    Resources,
    close_worker,
)
from corpus_audit.core.errors import CorpusAuditError, RayEngineError

if TYPE_CHECKING:  # annotations only
    from corpus_audit.backends.engines.base import ActorSpec

DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_RESTARTS = 3
DEFAULT_RETRY_EXCEPTIONS: tuple[type[BaseException], ...] = (OSError,)
# Ray reads these when it starts; set before ray.init unless the user set them.
_QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage report over the network (no hidden network)
    "RAY_DEDUP_LOGS": "1",
}


def _call(fn: Callable[[Any], Any], payload: Any) -> Any:
    """The body of every task: ``fn`` and ``payload`` arrive resolved from the object store."""
    return fn(payload)


class _ActorHost:
    """One worker per actor process: built once by ``factory()``, then serves units (each
    through ``prepare`` first when the cluster has no CPU left for ``prepare`` tasks).

    A factory that fails with an error a user must fix (:class:`CorpusAuditError`: a model
    that cannot load, a bad lexicon file) leaves the actor alive and raises that error for
    every unit, so it reaches the driver as itself, at once; restarting the actor would load
    the same thing and fail again (other errors in the factory do kill the actor, which Ray
    restarts)."""

    def __init__(
        self, factory: Callable[[], Any], prepare: Callable[[Any], Any] | None = None
    ) -> None:
        self.error: CorpusAuditError | None = None
        self.worker: Any = None
        try:
            self.worker = factory()
        except CorpusAuditError as exc:
            self.error = exc
        self.prepare = prepare

    def serve(self, payload: Any) -> Any:
        if self.error is not None:
            raise self.error
        if self.prepare is not None:
            payload = self.prepare(payload)
        return self.worker(payload)

    def close(self) -> None:
        if self.worker is not None:
            close_worker(self.worker)


class RayEngine(Engine):
    """Ray Core tasks for :meth:`map_tasks`, a pool of actors for :meth:`map_actors`.

    ``address``: ``""`` starts a local cluster on this machine (``num_cpus`` CPUs, default
    all; stopped by :meth:`close`), ``"auto"`` joins the cluster this machine belongs to,
    ``"ray://host:10001"`` connects through Ray Client. When Ray is already initialised in
    this process (e.g. by the user's own code) that connection is used and left open.
    Every worker must be able to import ``corpus_audit`` (install it on the nodes, or pass
    ``runtime_env``) and read the corpus paths (a shared file system).
    """

    name = "ray"

    def __init__(
        self,
        address: str = "",
        *,
        num_cpus: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        retry_exceptions: tuple[type[BaseException], ...] = DEFAULT_RETRY_EXCEPTIONS,
        object_store_memory: int | None = None,
        runtime_env: dict[str, Any] | None = None,
        in_flight_per_worker: int = IN_FLIGHT_PER_WORKER,
    ) -> None:
        if max_retries < 0 or max_restarts < 0:
            raise ValueError("max_retries and max_restarts must be >= 0")
        if in_flight_per_worker < 1:
            raise ValueError("in_flight_per_worker must be >= 1")
        self.in_flight = int(in_flight_per_worker)
        self.address = address
        self.num_cpus = num_cpus
        self.max_retries = int(max_retries)
        self.max_restarts = int(max_restarts)
        self.retry_exceptions = tuple(retry_exceptions)
        self.object_store_memory = object_store_memory
        self.runtime_env = runtime_env
        self._started = False  # True when this engine started (and so stops) the cluster
        self._watcher: subprocess.Popen | None = None  # ray_reaper's, for a local cluster

    # -- cluster ---------------------------------------------------------------------------------
    def _connect(self) -> None:
        if ray.is_initialized():
            return
        for key, value in _QUIET_ENV.items():
            os.environ.setdefault(key, value)
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "logging_level": logging.WARNING,
            "configure_logging": False,
        }
        if self.runtime_env:
            kwargs["runtime_env"] = self.runtime_env
        if self.address:
            kwargs["address"] = self.address
        else:
            kwargs["num_cpus"] = self.num_cpus
            kwargs["object_store_memory"] = self.object_store_memory
            kwargs.setdefault("runtime_env", _same_code_env())
        try:
            ray.init(**kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = self.address or "a local cluster"
            raise RayEngineError(
                f"engine.ray_address: cannot start or reach Ray at {where} ({exc})"
            ) from None
        self._started = not self.address
        if self._started:
            self._after_local_start()

    def _after_local_start(self) -> None:
        """A local cluster this engine started: a watcher kills what Ray would leave running
        if this process is killed, and the session folders of earlier drivers that are gone
        are removed (:mod:`corpus_audit.backends.engines.ray_reaper`)."""
        self._watcher = ray_reaper.start_watcher()
        try:
            node = ray._private.worker.global_worker.node  # private: Ray has no public getter
            session = Path(node.get_session_dir_path())
        except (AttributeError, TypeError):
            return
        ray_reaper.mark_session(session)
        ray_reaper.remove_stale_sessions(session.parent, keep=session)

    def parallelism(self, resources: Resources = ONE_CPU) -> int:
        self._connect()
        total = ray.cluster_resources()
        fits = int(total.get("CPU", 0) // resources.num_cpus)
        if resources.num_gpus:
            fits = min(fits, int(total.get("GPU", 0) // resources.num_gpus))
        return max(1, fits)

    def _remote(self, target: Any, resources: Resources, **options: Any) -> Any:
        opts: dict[str, Any] = {"num_cpus": resources.num_cpus, "num_gpus": resources.num_gpus}
        if resources.memory_mb:
            opts["memory"] = resources.memory_mb * 2**20
        return ray.remote(target).options(**opts, **options)

    def _task(self, resources: Resources) -> Any:
        """The remote ``_call`` with this engine's retry policy."""
        return self._remote(
            _call,
            resources,
            max_retries=self.max_retries,
            retry_exceptions=list(self.retry_exceptions),
        )

    def task_pool(self, fn: Callable[[Any], Any], resources: Resources) -> _RayTasks:
        self._connect()
        return _RayTasks(self._task(resources), fn, self.in_flight * self.parallelism(resources))

    def actor_pool(self, actors: ActorSpec, resources: Resources) -> _RayActors:
        self._connect()
        host = self._remote(
            _ActorHost,
            resources,
            max_restarts=self.max_restarts,
            max_task_retries=self.max_retries,
        )
        prepare = actors.prepare
        cpus = ray.cluster_resources().get("CPU", 0)
        n = actors.workers or self.parallelism(resources)
        if prepare is not None and not actors.workers:
            # leave one CPU for the prepare tasks: actors holding every CPU would wait
            # forever for prepare tasks that can never be scheduled
            n = max(1, min(n, int((cpus - ONE_CPU.num_cpus) // resources.num_cpus)))
        # no CPU left for a prepare task (a 1-CPU cluster, or workers given): prepare
        # runs in the actor, before its worker
        in_actor = prepare is not None and cpus - n * resources.num_cpus < ONE_CPU.num_cpus
        # the factory travels by value with each actor, so a restart never depends on an
        # object the driver might have released
        hosts = [host.remote(actors.factory, prepare if in_actor else None) for _ in range(n)]
        prep = None
        if prepare is not None and not in_actor:
            prep = (self._task(ONE_CPU), ray.put(prepare))
        return _RayActors(hosts, prep, list(self.retry_exceptions), self.in_flight)

    # -- provenance and cleanup ------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        self._connect()
        total = ray.cluster_resources()
        return {
            "engine": self.name,
            "ray_version": ray.__version__,
            "address": self.address or "local",
            "nodes": sum(1 for node in ray.nodes() if node.get("Alive")),
            "cpus": total.get("CPU", 0),
            "gpus": total.get("GPU", 0),
            "max_retries": self.max_retries,
            "max_restarts": self.max_restarts,
            "retry_exceptions": [e.__name__ for e in self.retry_exceptions],
        }

    def close(self) -> None:
        if self._started and ray.is_initialized():
            ray.shutdown()
        self._started = False
        ray_reaper.stop_watcher(self._watcher)
        self._watcher = None


def _same_code_env() -> dict[str, Any]:
    """For a local cluster: workers import the very ``corpus_audit`` the driver runs (a
    checkout first on PYTHONPATH), whatever else is installed."""
    here = str(Path(corpus_audit.__file__).resolve().parents[1])
    paths = [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}


class _RayPool:
    """A :class:`~corpus_audit.backends.engines.base.UnitPool` over object refs."""

    window = 1

    def wait(self, running: list[Any]) -> list[Any]:
        ready, _ = ray.wait(running, num_returns=1)
        return ready

    def fetch(self, ref: Any) -> Any:
        return _get(ref)

    def cancel(self, refs: list[Any]) -> None:
        for ref in refs:
            ray.cancel(ref, force=False)

    def close(self) -> None:
        """Tasks hold nothing once their refs are released."""


class _RayTasks(_RayPool):
    def __init__(self, task: Any, fn: Callable[[Any], Any], window: int) -> None:
        self.task, self.window = task, window
        self.fn_ref = ray.put(fn)  # shipped once, not once per unit

    def submit(self, payload: Any) -> Any:
        return self.task.remote(self.fn_ref, payload)


class _RayActors(_RayPool):
    """Units go to the actor with the fewest units in flight; ``prep`` (a task and the
    ref of ``prepare``) runs before, its result passed by reference to the actor."""

    def __init__(
        self, actors: list[Any], prep: tuple[Any, Any] | None, retry: list, in_flight: int
    ) -> None:
        self.actors, self.prep, self.retry = actors, prep, retry
        self.window = in_flight * len(actors)
        self.load = dict.fromkeys(range(len(actors)), 0)  # units in flight per actor
        self.owner: dict[Any, int] = {}

    def submit(self, payload: Any) -> Any:
        i = min(self.load, key=lambda a: (self.load[a], a))
        arg = payload if self.prep is None else self.prep[0].remote(self.prep[1], payload)
        ref = self.actors[i].serve.options(retry_exceptions=self.retry).remote(arg)
        self.load[i] += 1
        self.owner[ref] = i
        return ref

    def fetch(self, ref: Any) -> Any:
        self.load[self.owner.pop(ref)] -= 1
        return _get(ref)

    def close(self) -> None:
        closing = [actor.close.remote() for actor in self.actors]
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            ray.get(closing, timeout=60)  # a dead actor has nothing left to close
        for actor in self.actors:
            ray.kill(actor)


def _get(ref: Any) -> Any:
    """The unit's result; its own error when it is one a user must fix."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause
        if isinstance(cause, CorpusAuditError):
            raise cause from None
        raise RayEngineError(
            f"engine ray: a work unit failed after every retry: {cause!r}"
        ) from exc
    except ray.exceptions.RayError as exc:  # worker or actor died more often than allowed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RayEngineError(
            f"engine ray: a work unit was lost after every retry ({type(exc).__name__}: {first})"
        ) from exc
