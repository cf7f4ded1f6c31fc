"""Issue 33, H5: ``config set`` edits ``study.toml`` under an exclusive lock of the study
folder, and refuses at once while a stage of the study runs (which holds the lock shared); a
lock whose holder died (kill -9) does not block. Real processes throughout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from corpus_audit.cli import main
from corpus_audit.core.config_edit import set_config
from corpus_audit.core.errors import StudyError
from corpus_audit.core.pipeline import init_study
from corpus_audit.core.store import Study

ROOT = Path(__file__).parents[2]
# eight settings, each set by its own process; every one must be in the file at the end
SETTINGS = {
    "study.seed": 11,
    "select.sample_size": 123,
    "select.overdraw": 3.5,
    "storage.retries": 2,
    "indicators.batch_size": 777,
    "indicators.ner_batch_size": 64,
    "neighbors.k": 99,
    "engine.ray_max_retries": 1,
}


@pytest.fixture
def study_dir(tmp_path: Path, laion_path: Path) -> Path:
    root = tmp_path / "study"
    init_study(root, [str(laion_path)]).close()
    return root


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# each process imports first, then waits for the start file, so the eight edits overlap
_SETTER = textwrap.dedent(
    """
    import os, sys, time
    from corpus_audit.cli import main
    go = sys.argv[1]
    while not os.path.exists(go):
        time.sleep(0.001)
    sys.exit(main(["-q", "config", "set", sys.argv[2], sys.argv[3]]))
    """
)


def test_eight_concurrent_config_sets_lose_nothing(study_dir: Path, tmp_path: Path) -> None:
    for attempt in range(2):  # the race lost 2-4 of 8 edits a round before the lock
        go = tmp_path / f"go{attempt}"
        values = {
            k: v + attempt if isinstance(v, int) else v + attempt for k, v in SETTINGS.items()
        }
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _SETTER, str(go), str(study_dir), f"{key}={value}"],
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for key, value in values.items()
        ]
        time.sleep(3.0)  # every process has imported corpus_audit and is waiting
        go.touch()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        data = tomllib.loads((study_dir / "study.toml").read_text(encoding="utf-8"))
        got = {key: data[key.split(".")[0]][key.split(".")[1]] for key in values}
        assert got == values, (
            f"round {attempt}: lost {set(values) - {k for k in got if got[k] == values[k]}}"
        )


# a stage of the study that runs until it is killed: Study.stage, as every stage runs
_RUNNER = textwrap.dedent(
    """
    import sys, time
    from corpus_audit.core.store import Study
    study = Study.open(sys.argv[1])
    with study.stage("select"):
        print("running", flush=True)
        time.sleep(600)
    """
)


def _start_runner(root: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, str(root)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the stage body runs
    assert line.strip() == "running", proc.stderr.read() if proc.stderr else ""
    return proc


def test_config_set_is_refused_at_once_while_a_stage_runs_and_allowed_after_kill_9(
    study_dir: Path, capsys
) -> None:
    runner = _start_runner(study_dir)
    try:
        before = (study_dir / "study.toml").read_bytes()
        capsys.readouterr()
        started = time.monotonic()
        assert main(["config", "set", str(study_dir), "study.seed=42"]) == 2
        assert time.monotonic() - started < 5.0  # at once, not after waiting for the run
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"a run of this study is in progress (pid {runner.pid})" in err, err
        assert "try again when it ends" in err and str(study_dir) in err
        assert (study_dir / "study.toml").read_bytes() == before
        names = {p.name for p in study_dir.iterdir()} - {"study.duckdb.wal"}  # the runner's
        assert names == {"study.duckdb", "study.toml"}  # no lock file
    finally:
        os.kill(runner.pid, signal.SIGKILL)  # the lock dies with its holder
        runner.communicate(timeout=60)
    assert runner.returncode == -signal.SIGKILL
    assert main(["config", "set", str(study_dir), "study.seed=42"]) == 0
    assert "seed = 42" in (study_dir / "study.toml").read_text(encoding="utf-8")


def test_set_config_inside_a_stage_of_the_same_process_is_refused(study_dir: Path) -> None:
    """In one process too: set_config inside a running stage is refused, after it not."""
    busy = rf"in progress \(pid {os.getpid()}\)"
    with Study.open(study_dir) as study:
        with study.stage("select"), pytest.raises(StudyError, match=busy):
            set_config(study_dir, ["study.seed=5"])
        assert set_config(study_dir, ["study.seed=5"]) == [("study.seed", 0, 5)]
