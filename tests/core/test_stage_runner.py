"""The runner's part of a stage (corpus_audit/core/stage_runner.py): what each stage body used to
repeat (open the run, check the declared inputs, a transaction for an atomic stage, an ``off``
guard) is done once, in one order. Real studies on real LAION captions; the test stages are
declared in the real catalogue for the test's length."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import replace

import pytest

from corpus_audit.core.catalogue import STAGES, Stage
from corpus_audit.core.errors import ConfigError, StageOrderError
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.stages.select import select

PROBE = Stage(
    "runner_probe",
    "tests:none",
    "a stage for the runner's tests",
    config=("study",),
    needs=("select",),
)


@pytest.fixture
def declared() -> Iterator[None]:
    """``runner_probe`` (needs select) and ``runner_atomic`` in the catalogue while a test runs."""
    STAGES.register(PROBE.name, PROBE)
    STAGES.register("runner_atomic", replace(PROBE, name="runner_atomic", needs=(), atomic=True))
    try:
        yield
    finally:
        STAGES.unregister(PROBE.name)
        STAGES.unregister("runner_atomic")


@pytest.fixture
def study(make_study, laion_path) -> Study:
    return make_study([laion_path])


def test_the_stage_function_keeps_the_callers_signature() -> None:
    """The CLI, the API and ``run`` call ``fn(study, *, progress=True)``: the run is the runner's."""
    params = inspect.signature(select).parameters
    assert list(params) == ["study", "progress"]
    assert params["progress"].kind is inspect.Parameter.KEYWORD_ONLY


def test_an_undeclared_stage_is_refused_before_anything_runs(study: Study) -> None:
    @stage_body("nowhere")
    def nowhere(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
        raise AssertionError("the body of an undeclared stage ran")

    with pytest.raises(ConfigError, match="unknown stage 'nowhere'"):
        nowhere(study)
    assert study.unfinished("nowhere") is None


def test_missing_inputs_are_refused_before_the_body_runs(declared, study: Study) -> None:
    called = []

    @stage_body(PROBE.name)
    def probe(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
        called.append(run)
        return run

    with pytest.raises(StageOrderError, match="`runner_probe` reads the tables of `select`"):
        probe(study)
    assert called == []
    assert study.last_run(PROBE.name) is None
    assert study.unfinished(PROBE.name) is None  # a refused run leaves no partial mark


def test_the_body_gets_the_open_run_once_inputs_are_there(declared, study: Study) -> None:
    select(study, progress=False)
    seen = []

    @stage_body(PROBE.name)
    def probe(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
        seen.append((study.unfinished(PROBE.name) is not None, progress))
        run.rows_out = 7
        return run

    returned = probe(study, progress=False)
    assert seen == [(True, False)]  # the run is open (marked unfinished) while the body runs
    assert returned.rows_out == 7
    assert study.last_run(PROBE.name)["rows_out"] == 7
    assert study.unfinished(PROBE.name) is None


def test_an_off_guard_skips_before_any_input_is_required(declared, study: Study) -> None:
    """Settings that turn a stage off give a skipped run even where its inputs are missing."""

    @stage_body(PROBE.name, off=lambda study: "probe is off (study.name)")
    def probe(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
        raise AssertionError("the body of a stage that is off ran")

    run = probe(study)
    assert run.skipped and run.messages == ["probe is off (study.name)"]
    assert study.last_run(PROBE.name)["status"] == "skipped"


@pytest.mark.parametrize("atomic", [True, False])
def test_an_atomic_stage_rolls_back_with_its_record(declared, study: Study, atomic: bool) -> None:
    """An atomic stage's failed run leaves the study as it was; another keeps what it
    committed and shows as partial."""
    name = "runner_atomic" if atomic else PROBE.name
    if not atomic:
        select(study, progress=False)
    study.con.execute("CREATE TABLE runner_rows (x INTEGER)")

    @stage_body(name)
    def probe(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
        with study.transaction() as con:
            con.execute("INSERT INTO runner_rows VALUES (1)")
        raise RuntimeError("killed half way")

    with pytest.raises(RuntimeError, match="killed half way"):
        probe(study)
    rows = study.con.execute("SELECT count(*) FROM runner_rows").fetchone()[0]
    assert rows == (0 if atomic else 1)
    assert (study.unfinished(name) is None) is atomic
    assert study.last_run(name) is None


def test_a_bad_argument_is_refused_before_the_inputs(declared, study: Study) -> None:
    """The call's own arguments are checked first: a bad flag is one error whatever the study
    holds (here select, the needed input, has not run)."""

    def positive(arguments: dict) -> None:
        if arguments["n"] < 1:
            raise ValueError(f"--n must be >= 1, got {arguments['n']}")

    @stage_body(PROBE.name, arguments=positive)
    def probe(study: Study, run: StageRun, n: int = 5, *, progress: bool = True) -> StageRun:
        return run

    with pytest.raises(ValueError, match="--n must be >= 1, got 0"):
        probe(study, 0)
    with pytest.raises(StageOrderError):  # a good argument: then the inputs are checked
        probe(study)
    assert study.unfinished(PROBE.name) is None
