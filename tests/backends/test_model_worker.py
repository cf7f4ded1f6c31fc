"""The one generic model worker (``backends/engines/models.py``) on both kinds of local
actors: in this process and in ``spawn``ed worker processes (where the spec is pickled)."""

from __future__ import annotations

import os

import pytest

from corpus_audit.backends.engines.local import LocalEngine
from corpus_audit.backends.engines.models import ModelSpec, ModelWorker


class Scaler:
    """A stand-in 'model': loaded once per worker (records its pid), closed at the end."""

    closed: list[int] = []

    def __init__(self, factor: int) -> None:
        self.factor = factor
        self.pid = os.getpid()

    def __call__(self, x: int) -> tuple[int, int]:
        return x * self.factor, self.pid

    def close(self) -> None:
        Scaler.closed.append(self.factor)


def offset_serve(model: Scaler, x: int) -> int:
    return model.factor + x


def test_model_worker_loads_once_serves_and_closes_once():
    worker = ModelSpec(Scaler, (3,))()
    assert isinstance(worker, ModelWorker)
    assert worker(2)[0] == 6 and worker(5)[0] == 15
    Scaler.closed.clear()
    worker.close()
    worker.close()
    assert Scaler.closed == [3]
    with pytest.raises(RuntimeError, match="closed"):
        worker(1)
    assert ModelSpec(Scaler, (10,), offset_serve)()(4) == 14


@pytest.mark.parametrize("workers", [1, 2])
def test_model_spec_runs_on_the_local_engine_in_process_and_in_worker_processes(workers):
    units = [(i, i) for i in range(8)]
    got = list(LocalEngine(threads=2).map_actors(ModelSpec(Scaler, (7,)), units, workers=workers))
    assert [k for k, _ in got] == list(range(8))
    assert [r[0] for _, r in got] == [7 * i for i in range(8)]
    pids = {r[1] for _, r in got}
    if workers == 1:
        assert pids == {os.getpid()}
    else:
        assert os.getpid() not in pids and 1 <= len(pids) <= 2
