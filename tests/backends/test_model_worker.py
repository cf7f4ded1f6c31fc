"""The one generic model worker (``backends/engines/models.py``) on both kinds of local
actors: in this process and in ``spawn``ed worker processes (where the spec is pickled)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from corpus_audit.backends.engines.local import LocalEngine
from corpus_audit.backends.engines.models import ModelSession, ModelSpec, ModelWorker


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


class Counted(Scaler):
    """A Scaler that counts its loads (in this process)."""

    loads = 0

    def __init__(self, factor: int, *, offset: int = 0) -> None:
        super().__init__(factor + offset)
        Counted.loads += 1


def test_model_spec_options_and_a_shared_model_is_not_closed():
    Scaler.closed.clear()
    worker = ModelSpec(Counted, (3,), options={"offset": 1}, shared=True)()
    assert worker(2)[0] == 8
    worker.close()
    assert Scaler.closed == []  # the loader keeps it for reuse: the worker never closes it


def test_model_session_answers_request_by_request_with_one_load():
    """A session's requests depend on earlier answers; the model is loaded once, lazily,
    and closed with the session; answers equal a one-off worker's."""
    Counted.loads = 0
    Scaler.closed.clear()
    session = ModelSession(LocalEngine(threads=2), ModelSpec(Counted, (2,)))
    assert Counted.loads == 0  # nothing loaded before the first request
    x = 1
    for _ in range(4):  # each request is made from the answer before
        x = session(x)[0]
    assert x == 16
    assert [r[0] for r in session.map([1, 2, 3])] == [2, 4, 6]
    assert list(session.map([])) == []
    assert Counted.loads == 1
    session.close()
    session.close()
    assert Scaler.closed == [2]


def test_model_session_in_worker_processes():
    with_processes = ModelSession(LocalEngine(threads=2), ModelSpec(Scaler, (5,)), workers=2)
    try:
        got = list(with_processes.map(range(6)))
        assert [r[0] for r in got] == [5 * i for i in range(6)]
        assert os.getpid() not in {r[1] for r in got}
        assert with_processes(7)[0] == 35
    finally:
        with_processes.close()


class Blocking:
    """A 'client' whose unit 1 waits until it is cancelled (a request stuck on Retry-After)."""

    started = threading.Event()

    def __init__(self) -> None:
        self.stop = threading.Event()

    def __call__(self, x: int) -> int:
        if x == 1:
            Blocking.started.set()
            self.stop.wait(60)
        return x

    def cancel(self) -> None:
        self.stop.set()


def test_giving_up_on_a_map_cancels_the_unit_its_worker_serves():
    """Closing the map (an error, Ctrl-C on the driver) asks the in-process worker to end
    the unit it serves (``cancel()``), so closing does not wait for it."""
    Blocking.started.clear()
    results = LocalEngine(threads=2).map_actors(ModelSpec(Blocking), [(i, i) for i in range(3)])
    assert next(results) == (0, 0)
    assert Blocking.started.wait(10)
    start = time.monotonic()
    results.close()
    assert time.monotonic() - start < 10
