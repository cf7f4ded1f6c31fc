"""Execution engines: how the map-style stages run (``engine.engine``).

One protocol (:class:`~corpus_audit.backends.engines.base.Engine`: ``map_tasks`` for stateless units,
``map_actors`` for workers that load a model once) and a registry by name:

- ``local`` (default): threads, and worker processes for actors, on this machine;
- ``ray``: Ray Core tasks and actors on a local or remote cluster (the optional extra
  ``pip install 'corpus_audit[ray]'``; ``ray`` is imported only when this engine is opened).

``open_engine("ray", ray_address="auto")`` or :func:`engine_from_config` give an engine; use it
as a context manager so a local Ray cluster it started is stopped. See ``docs/scale.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from corpus_audit.backends.engines.base import ActorSpec, Engine, Progress, Resources, Worker
from corpus_audit.core.errors import EngineError
from corpus_audit.core.registry import Registry

if TYPE_CHECKING:  # the store is DuckDB: config validation loads this module's engine names
    from corpus_audit.core.store import StageRun

__all__ = [
    "ActorSpec",
    "Engine",
    "Progress",
    "Resources",
    "Worker",
    "engine_from_config",
    "engine_names",
    "model_actors",
    "model_resources",
    "open_engine",
    "register_engine",
    "stage_engine",
]


EngineFactory = Callable[..., Engine]
# name -> lazy "module:attribute" (imported on first use) or a factory registered at run time
ENGINES: Registry[EngineFactory] = Registry("engine")
ENGINES.register("local", "corpus_audit.backends.engines.local:LocalEngine")  # type: ignore[arg-type]
ENGINES.register("ray", "corpus_audit.backends.engines.ray_backend:RayEngine")  # type: ignore[arg-type]
_EXTRAS = {"ray": "ray"}  # engine -> the pip extra that installs its package


def register_engine(name: str, factory: str | EngineFactory) -> None:
    """Add (or replace) an engine: a factory, or ``"module:attribute"`` imported lazily."""
    if name in ENGINES:
        ENGINES.unregister(name)
    ENGINES.register(name, factory)  # type: ignore[arg-type]


def engine_names() -> list[str]:
    """The registered engine names, sorted."""
    return sorted(ENGINES.names())


def _factory(name: str) -> EngineFactory:
    if name not in ENGINES:
        raise EngineError(
            f"engine.engine: unknown engine {name!r} (known: {', '.join(engine_names())})"
        )
    try:
        return ENGINES.get(name)
    except ModuleNotFoundError as exc:
        extra = _EXTRAS.get(name)
        hint = f"; install it with pip install 'corpus_audit[{extra}]'" if extra else ""
        raise EngineError(
            f"engine.engine = {name!r} needs the package {exc.name!r}, which is not installed{hint}"
        ) from None


def open_engine(name: str = "local", **options: Any) -> Engine:
    """The engine ``name`` built with ``options``.

    ``local`` takes ``threads``; ``ray`` takes ``address`` (``""`` = a local cluster,
    ``"auto"``, ``"ray://host:port"``), ``num_cpus``, ``max_retries``, ``max_restarts``,
    ``retry_exceptions``, ``object_store_memory``, ``runtime_env``. Raises
    :class:`EngineError` for an unknown name or a missing package.
    """
    return _factory(name)(**options)


def engine_from_config(section: Any) -> Engine:
    """The engine of a study's ``[engine]`` section.

    Reads ``engine``, ``threads`` and the keys proposed for issue 15 (``ray_address``,
    ``ray_max_retries``, ``ray_max_restarts``; absent in today's config class, hence their
    defaults here). A local Ray cluster gets ``engine.threads`` CPUs.
    """
    name = getattr(section, "engine", "local")
    if name == "local":
        return open_engine("local", threads=section.threads)
    if name == "ray":
        address = getattr(section, "ray_address", "")
        options: dict[str, Any] = {
            "address": address,
            "max_retries": getattr(section, "ray_max_retries", 3),
            "max_restarts": getattr(section, "ray_max_restarts", 3),
        }
        if not address:
            options["num_cpus"] = section.threads
        return open_engine("ray", **options)
    return open_engine(name)


def model_resources(section: Any) -> Resources:
    """What one model worker of a stage needs: one CPU and the ``[engine]`` section's
    ``gpus_per_worker`` GPUs (a fraction shares a GPU)."""
    return Resources(num_cpus=1, num_gpus=section.gpus_per_worker)


@contextlib.contextmanager
def _described(section: Any, provenance: dict[str, Any]) -> Iterator[Engine]:
    """The engine of ``section``, its description put in ``provenance["engine"]``."""
    with engine_from_config(section) as engine:
        provenance["engine"] = engine.describe()
        yield engine


def stage_engine(section: Any, run: StageRun) -> Engine:
    """The engine of a stage run (``section``: the study's ``[engine]``): opened the first
    time the stage asks for it (a Ray engine connects then), the same one after that, its
    description in the run's provenance, and closed by :meth:`Study.stage
    <corpus_audit.core.store.Study.stage>` when the run ends, however it ends. The one way a
    stage gets the study's engine: no stage opens or closes one itself."""
    return run.hold("engine", lambda: _described(section, run.provenance))


@contextlib.contextmanager
def model_actors(
    section: Any,
    stage: str,
    factory: Callable[[], Worker[Any, Any]],
    units: Iterable[tuple[Any, Any]],
    *,
    run: StageRun,
    progress: Progress | None = None,
    prepare: Callable[[Any], Any] | None = None,
) -> Iterator[Iterator[tuple[Any, Any]]]:
    """``stage``'s model workers on the run's engine (:func:`stage_engine`): yields
    ``map_actors`` of ``factory`` over ``units`` (:func:`model_resources` each, the section's
    ``workers_for(stage)`` of them); the workers are closed on leaving, the engine with the
    run."""
    results = stage_engine(section, run).map_actors(
        factory,
        units,
        resources=model_resources(section),
        workers=section.workers_for(stage),
        prepare=prepare,
        progress=progress,
    )
    with contextlib.closing(results):
        yield results
