"""Issue 33: what a local Ray cluster started by corpus_audit leaves when the driver is
killed with kill -9 (``corpus_audit.backends.engines.ray_reaper``): the processes that
outlive it are killed by the watcher, and its session folder goes when the next local
cluster starts. Real processes, a real local Ray (one CPU); Linux (``/proc``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from corpus_audit.backends.engines import ray_reaper

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
ROOT = Path(__file__).parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _children(root: int) -> set[int]:
    """Every process under ``root``, read from /proc here (not with ray_reaper's code)."""
    parent = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        kids = {p for p, pp in parent.items() if pp == pid} - found
        found |= kids
        todo += kids
    return found


def _alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":  # a zombie is dead, waiting for its parent to read its status
            out.add(pid)
    return out


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(pids)


def _start(code: str, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.kill()
        pytest.fail(proc.communicate(timeout=60)[1][-3000:])
    return proc, line


def _kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


def test_the_watcher_kills_an_orphan_of_a_killed_driver() -> None:
    """Without Ray: a grandchild named like Ray's agents that would outlive its parent's
    kill -9 (as they do) is killed by the watcher; the driver's other children (a user's
    own process) and a process outside the driver's tree are not."""
    bystander = subprocess.Popen(["sleep", "120"])
    driver, line = _start(
        """
        import subprocess, sys, time
        from corpus_audit.backends.engines import ray_reaper
        sleep, quiet = "import time; time.sleep(120)", subprocess.DEVNULL  # not the pipes
        orphan = subprocess.Popen([sys.executable, "-c", sleep, "ray::DashboardAgent"],
                                  stdout=quiet, stderr=quiet)
        mine = subprocess.Popen([sys.executable, "-c", sleep, "the user's own"],
                                stdout=quiet, stderr=quiet)
        watcher = ray_reaper.start_watcher()
        time.sleep(2 * ray_reaper.POLL_S + 1.0)  # the watcher has seen the orphan
        print(orphan.pid, mine.pid, watcher.pid, flush=True)
        time.sleep(120)
        """
    )
    orphan, mine, watcher = map(int, line.split())
    try:
        _kill9(driver)
        assert _wait_gone({orphan, watcher}, 15.0) == set()
        assert _alive({bystander.pid, mine}) == {bystander.pid, mine}
    finally:
        bystander.kill()
        bystander.wait()
        for pid in _alive({orphan, mine}):
            os.kill(pid, signal.SIGKILL)


def test_stale_session_folders_only_of_dead_corpus_audit_drivers_are_removed(tmp_path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    folders = {name: tmp_path / f"session_{name}" for name in ("dead", "alive", "other", "bad")}
    for folder in folders.values():
        (folder / "logs").mkdir(parents=True)
    owner = {"pid": int(dead.stdout), "start_time": 1}
    (folders["dead"] / ray_reaper.OWNER_FILE).write_text(json.dumps(owner))
    me = {"pid": os.getpid(), "start_time": ray_reaper.start_time(os.getpid())}
    (folders["alive"] / ray_reaper.OWNER_FILE).write_text(json.dumps(me))
    (folders["bad"] / ray_reaper.OWNER_FILE).write_text("{not json")
    (tmp_path / "session_latest").symlink_to(folders["dead"])
    assert ray_reaper.remove_stale_sessions(tmp_path) == [folders["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "session_alive", "session_bad", "session_latest", "session_other"
    ]  # fmt: skip


_RAY_DRIVER = """
    import time
    import ray
    from corpus_audit.backends.engines.ray_backend import RayEngine
    engine = RayEngine(num_cpus=1)
    assert engine.parallelism() == 1
    @ray.remote
    def nap(x):
        time.sleep(600)
    ref = nap.remote(1)  # a worker process busy with a task
    time.sleep(4.0)
    print(ray._private.worker.global_worker.node.get_session_dir_path(), flush=True)
    time.sleep(600)
"""


def test_kill_9_of_a_ray_driver_leaves_no_process_and_the_next_start_removes_its_folder():
    pytest.importorskip("ray", reason="the ray engine is optional (corpus_audit[ray])")
    driver, session = _start(_RAY_DRIVER)
    before = _children(driver.pid)
    assert before, "the local cluster started no process"
    _kill9(driver)
    # Ray's own fate sharing ends the GCS server and the raylet; its agents hung (issue 33)
    assert _wait_gone(before, 30.0) == set()
    assert Path(session).is_dir()  # kept for its logs until the next start
    second, session2 = _start(_RAY_DRIVER)  # the next start
    after = _children(second.pid)
    try:
        assert not Path(session).exists()
        assert Path(session2).is_dir()
    finally:
        _kill9(second)
    assert _wait_gone(after, 30.0) == set()
