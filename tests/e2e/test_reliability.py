"""Issue 18: what an attack on the CLI found, each item with the test that pins its fix.

1. a re-select that renumbers caption ids redraws every nn sample; analyze refuses samples
   that name missing captions;
2. SIGTERM and SIGKILL of `indicators` (a real subprocess, real signals) leave no NER worker;
3. `engine.memory_limit` (and every other config value and path) never becomes SQL text;
4. a study path with quotes works, and a failed `init` leaves nothing behind;
5. a killed `neighbors` is shown as partial and its tables are refused downstream;
6. control characters from corpus bytes never reach the terminal;
7. closed stdout pipe, integer caption column, truncated database, images.max_pixels change;
8. decoding a large image stays within a bounded peak (measured in a subprocess).

The kill tests start the CLI as a subprocess through a small driver (written below) that only
lowers the sizes that decide how long a run takes, so a signal lands in the middle of the work.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from image_fixtures import encode, photo, seed_captions

from corpus_audit.cli import main
from corpus_audit.core.config import ConfigError, load_config, write_config
from corpus_audit.core.errors import CorpusError, StageOrderError
from corpus_audit.core.pipeline import init_study, run_all, status
from corpus_audit.core.store import Study

REPO = Path(__file__).resolve().parents[2]
ESC = "\x1b"

DRIVER = """
import os
import sys
import time

if __name__ == "__main__":
    import corpus_audit.methods.gender_text as gender_text
    import corpus_audit.stages.neighbors as neighbors
    from corpus_audit.cli import main

    gender_text.NER_PROCESS_MIN_TEXTS = 1  # NER in worker processes even for small batches
    pause = float(os.environ.get("SLOW_OCCUPATION_S", "0"))
    if pause:  # widen the window in which a kill lands between two occupations
        one = neighbors._one_occupation

        def slow(*args, **kwargs):
            time.sleep(pause)
            return one(*args, **kwargs)

        neighbors._one_occupation = slow
    sys.exit(main(sys.argv[1:]))
"""


# -- helpers ---------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(*args: str, stdout=subprocess.PIPE, timeout: float = 300) -> subprocess.CompletedProcess:
    """The real command line in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        timeout=timeout,
    )


class Killable:
    """A stage run as a subprocess (its own session, so leftovers can be cleaned up), with its
    stderr (progress bars) in a file."""

    def __init__(self, tmp: Path, *args: str, env: dict[str, str] | None = None) -> None:
        driver = tmp / "drive.py"
        driver.write_text(DRIVER)
        self.err_path = tmp / f"stderr_{time.monotonic_ns()}.txt"
        self._err = self.err_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(driver), *args],
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            env={**_env(), **(env or {})},
            start_new_session=True,
        )
        self.pgid = self.proc.pid
        self.ps = psutil.Process(self.proc.pid)

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def descendants(self) -> list[psutil.Process]:
        try:
            return self.ps.children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def wait_for(self, pattern: str, at_least: int, timeout: float = 120) -> int:
        """Wait until the progress bar matching ``pattern`` (one group: the count done)
        reaches ``at_least``; returns the count seen. Fails when the run ended first."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            done = [int(m.group(1)) for m in regex.finditer(self.stderr())]
            if done and max(done) >= at_least:
                return max(done)
            if self.proc.poll() is not None:
                pytest.fail(f"the run ended before the kill: {self.stderr()[-2000:]}")
            time.sleep(0.1)
        pytest.fail(f"no progress to {at_least} in {timeout} s: {self.stderr()[-2000:]}")

    def cleanup(self) -> None:
        """Kill whatever is left of the run's session (workers of a run that leaked them)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        self._err.close()


def _alive(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of ``procs`` still running (not zombies) after up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _states(root: Path) -> dict[str, tuple[str, str]]:
    with Study.open(root) as study:
        return {s.stage: (s.status, s.note) for s in status(study)}


def _rows(root: Path, sql: str) -> list[tuple]:
    with Study.open(root, read_only=True) as study:
        return study.con.execute(sql).fetchall()


def _copy_study(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest)
    return dest


STALE_SAMPLES = (
    "SELECT count(*) FROM samples WHERE caption_id NOT IN (SELECT caption_id FROM captions)"
)
NN_BY_TEXT = (
    "SELECT s.strategy, s.occupation, s.prompt_id, s.rank, c.text FROM samples s "
    "JOIN captions c USING (caption_id) WHERE s.strategy IN ('nn', 'nn_no_indicators') "
    "ORDER BY ALL"
)


# -- studies shared by the tests ----------------------------------------------------------------
@pytest.fixture(scope="module")
def laion_templates(tmp_path_factory, laion_path):
    """LAION sample (sample size 10) as `b_laion.parquet`: a study after select + indicators
    ("pre") and the same after neighbors ("full")."""
    base = tmp_path_factory.mktemp("reliability")
    corpus = base / "corpus"
    corpus.mkdir()
    shutil.copy(laion_path, corpus / "b_laion.parquet")
    study = init_study(
        base / "pre", [str(corpus / "b_laion.parquet")], overrides={"select": {"sample_size": 10}}
    )
    with study:
        run_all(study, until="indicators", progress=False)
    full = _copy_study(base / "pre", base / "full")
    with Study.open(full) as study:
        run_all(study, until="neighbors", progress=False)
    return {"pre": base / "pre", "full": full, "corpus": corpus}


@pytest.fixture(scope="module")
def ner_template(tmp_path_factory, laion_path, coco_path):
    """LAION + COCO after select (278 occupation captions), labelled 2 per batch so an
    `indicators` run commits 139 batches: a signal lands in the middle of them."""
    root = tmp_path_factory.mktemp("ner") / "study"
    study = init_study(
        root,
        [str(laion_path), str(coco_path)],
        overrides={
            "select": {"sample_size": 20},
            "indicators": {"batch_size": 2, "ner_processes": 2},
        },
    )
    with study:
        run_all(study, until="select", progress=False)
        total = study.con.execute("SELECT count(DISTINCT caption_id) FROM mentions").fetchone()
    return root, int(total[0])


# -- 1. stale nearest-neighbour samples after a re-select ----------------------------------------
def _add_empty_file_that_sorts_first(root: Path, corpus: Path) -> None:
    """What the issue did: a corpus file named before the others, so every caption id moves
    by the same bit (file_id 0 -> 1)."""
    empty = corpus / "a_empty.parquet"
    if not empty.exists():
        pq.write_table(
            pa.table({"URL": pa.array([], pa.string()), "TEXT": pa.array([], pa.string())}), empty
        )
    config = load_config(root)
    config.corpus.paths = [str(empty), *config.corpus.paths]
    write_config(config)


def test_reselect_that_renumbers_captions_redraws_every_nn_sample(laion_templates, tmp_path):
    root = _copy_study(laion_templates["full"], tmp_path / "study")
    before = _rows(root, NN_BY_TEXT)
    assert len(before) > 1000
    _add_empty_file_that_sorts_first(root, laion_templates["corpus"])
    with Study.open(root) as study:
        run_all(study, until="neighbors", progress=False)
        ids = study.con.execute("SELECT DISTINCT caption_id >> 40 FROM captions").fetchall()
        assert ids == [(1,)]  # every caption was renumbered
        assert study.con.execute(STALE_SAMPLES).fetchone()[0] == 0  # was 336 nn + 192 nn_no_ind.
        from corpus_audit.stages.neighbors import progress

        done = progress(study)
        assert done.done == done.total == 62  # every occupation matches its new inputs
    assert _rows(root, NN_BY_TEXT) == before  # the same captions, under their new ids


def test_analyze_refuses_samples_that_name_missing_captions(laion_templates, tmp_path, capsys):
    root = _copy_study(laion_templates["full"], tmp_path / "study")
    _add_empty_file_that_sorts_first(root, laion_templates["corpus"])
    assert main(["-q", "select", str(root)]) == 0  # renumbers; nn / no_indicators samples stale
    capsys.readouterr()
    assert main(["-q", "analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no longer in `captions`" in err
    assert "`indicators`, `neighbors`" in err and "`nn`" in err  # the stages to rerun, in order
    with Study.open(root) as study:
        assert study.last_run("analyze") is None
        run_all(study, until="analyze", progress=False)  # rerunning them makes it consistent
        assert study.last_run("analyze")["status"] == "done"


# -- 2. NER workers outlive a killed `indicators` -------------------------------------------------
def _kill_indicators(tmp_path: Path, ner_template, sig: int):
    template, total = ner_template
    root = _copy_study(template, tmp_path / "study")
    run = Killable(tmp_path, "indicators", str(root))
    try:
        seen = run.wait_for(r"indicators:.*?(\d+)/\d+ \[", at_least=6)
        workers = run.descendants()
        assert any("spawn_main" in " ".join(p.cmdline()) for p in workers), workers
        os.kill(run.proc.pid, sig)
        code = run.proc.wait(timeout=60)
        left = _alive(workers, timeout=15)
        assert not left, f"still running after {sig!r}: {[p.cmdline() for p in left]}"
        return root, total, seen, code, run.stderr()
    finally:
        run.cleanup()


def test_sigterm_stops_indicators_like_ctrl_c_and_leaves_no_worker(tmp_path, ner_template):
    root, total, seen, code, err = _kill_indicators(tmp_path, ner_template, signal.SIGTERM)
    assert code == 143  # 128 + SIGTERM, after a clean unwind
    assert "interrupted; finished batches are kept" in err and "Traceback" not in err
    state, note = _states(root)["indicators"]
    done = int(re.fullmatch(r"partial: (\d+)/(\d+) captions", state).group(1))
    assert seen <= done < total and "did not finish" in note
    labelled = _rows(root, "SELECT count(*), count(DISTINCT caption_id) FROM indicators")[0]
    assert labelled == (done, done)  # whole batches, nothing twice


def test_sigkill_of_indicators_leaves_no_worker_and_resumes(tmp_path, ner_template):
    root, total, seen, code, _ = _kill_indicators(tmp_path, ner_template, signal.SIGKILL)
    assert code == -signal.SIGKILL
    state, _ = _states(root)["indicators"]
    assert state.startswith("partial: ") and state.endswith(f"/{total} captions")
    with Study.open(root) as study:
        study.config.indicators.ner_processes = 1  # same labels (tested elsewhere), faster here
        run_all(study, until="indicators", progress=False)
        assert study.con.execute(
            "SELECT count(*), count(DISTINCT caption_id) FROM indicators"
        ).fetchone() == (total, total)
        assert study.unfinished("indicators") is None
    assert _states(root)["indicators"][0] == "done"


# -- 3 and 4. no config value or path becomes SQL text; paths with quotes --------------------------
def test_memory_limit_with_sql_in_it_is_refused_when_the_config_loads(tmp_path, laion_path):
    root = tmp_path / "s"
    init_study(root, [str(laion_path)]).close()
    written = tmp_path / "f"
    payload = (
        f"1GB'; CREATE TABLE pwned AS SELECT 42; COPY (SELECT 'x') TO '{written}'; "
        "SET memory_limit='2GB"
    )
    text = (
        (root / "study.toml")
        .read_text()
        .replace('memory_limit = "2GB"', f"memory_limit = {json.dumps(payload)}")
    )
    (root / "study.toml").write_text(text)
    with pytest.raises(
        ConfigError, match=r"study\.toml: engine\.memory_limit: .* is not a memory size"
    ):
        load_config(root)
    for command in ("status", "select", "report"):
        proc = _cli(command, str(root))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1
        assert "engine.memory_limit" in proc.stderr
    assert not written.exists()  # nothing ran
    import duckdb

    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        tables = {
            r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
    finally:
        con.close()
    assert "pwned" not in tables


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("2GB", True),
        ("1.5GiB", True),
        ("512MB", True),
        ("80%", True),
        (" 4 gb ", True),
        ("lots", False),
        ("2GB; SELECT 1", False),
        ("1KB", False),  # below what DuckDB needs
        ("150%", False),
        ("", False),
    ],
)
def test_memory_limit_values(tmp_path, value, ok):
    from corpus_audit.core.config import config_from_dict

    data = {"engine": {"memory_limit": value}}
    if ok:
        assert config_from_dict(data, tmp_path).engine.memory_limit == value
    else:
        with pytest.raises(ConfigError, match="engine.memory_limit"):
            config_from_dict(data, tmp_path)


def test_study_and_corpus_paths_with_quotes_work_end_to_end(tmp_path, laion_path, capsys):
    """Issue item 4 (a study named "bob's study") and the audit of item 3: every path that
    reaches DuckDB (the study, its spill directory, corpus files, the embedding cache and the
    index directory, read back with read_parquet) carries quotes."""
    odd = tmp_path / """bob's "quoted" dir"""
    odd.mkdir()
    corpus = odd / "it's a corpus.parquet"
    pq.write_table(pq.read_table(laion_path).slice(0, 3000), corpus)
    root = odd / "bob's study"
    assert main(["init", str(root), "--corpus", str(corpus), "--sample-size", "5"]) == 0
    config = load_config(root)
    config.neighbors.cache_dir = str(odd / "cache'd")
    config.neighbors.index_dir = str(odd / 'index"es')
    write_config(config)
    assert main(["-q", "run", str(root), "--until", "analyze"]) == 0
    assert main(["status", str(root)]) == 0
    with Study.open(root) as study:
        states = {s.stage: s.status for s in status(study)}
        assert all(states[s] == "done" for s in ("select", "indicators", "neighbors", "analyze"))
        assert study.count("samples", "strategy = 'nn'") > 0
        assert study.con.execute("SELECT current_setting('temp_directory')").fetchone()[0] == str(
            root / ".duckdb_tmp"
        )
        assert study.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert (odd / "cache'd").is_dir() and any((odd / 'index"es').iterdir())


def test_failed_init_leaves_nothing_behind(tmp_path, laion_path, capsys):
    target = tmp_path / "s"
    target.mkdir()
    (target / "study.duckdb").write_bytes(b"this is not a DuckDB file" * 100)  # not ours
    before = sorted(p.name for p in target.iterdir())
    assert main(["init", str(target), "--corpus", str(laion_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "study.duckdb" in err and "not a valid DuckDB" in err
    assert sorted(p.name for p in target.iterdir()) == before  # no study.toml, no spill dir
    (target / "study.duckdb").unlink()
    assert main(["init", str(target), "--corpus", str(laion_path)]) == 0  # not "already a study"


# -- 5. a partly finished stage -------------------------------------------------------------------
def test_killed_neighbors_is_partial_and_refused_downstream(laion_templates, tmp_path, capsys):
    root = _copy_study(laion_templates["pre"], tmp_path / "study")
    run = Killable(tmp_path, "neighbors", str(root), env={"SLOW_OCCUPATION_S": "0.15"})
    try:
        run.wait_for(r"neighbors: occupations:.*?(\d+)/62 \[", at_least=5)
        os.kill(run.proc.pid, signal.SIGKILL)
        run.proc.wait(timeout=30)
    finally:
        run.cleanup()
    committed = _rows(root, "SELECT count(*) FROM neighbors_progress")[0][0]
    assert 5 <= committed < 62
    state, note = _states(root)["neighbors"]
    assert state == f"partial: {committed}/62 occupations" and "did not finish" in note
    for stage in ("analyze", "report"):
        capsys.readouterr()
        assert main(["-q", stage, str(root)]) == 2, stage
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"`{stage}` reads the tables of `neighbors`, whose last run did not finish" in err
        assert f"partial: {committed}/62 occupations" in err
    with Study.open(root) as study:
        assert study.last_run("analyze") is None and study.last_run("report") is None
        run_all(study, until="report", progress=False)  # the rerun completes it
    states = _states(root)
    assert states["neighbors"][0] == "done" and states["report"][0] == "done"
    assert _rows(root, "SELECT count(*) FROM neighbors_progress")[0][0] == 62


def test_a_run_that_fails_before_committing_leaves_no_partial_mark(make_study, laion_path):
    study = make_study([laion_path])
    with pytest.raises(StageOrderError):
        from corpus_audit.stages.neighbors import neighbors

        neighbors(study, progress=False)  # select has not run
    assert study.unfinished("neighbors") is None
    assert {s.stage: s.status for s in status(study)}["neighbors"] == "not run"


# -- 6. raw corpus bytes never reach the terminal ---------------------------------------------------
HOSTILE = f"{ESC}]0;pwned{chr(7)}{ESC}[2J{ESC}[31mred\u202egnp.exe\r"


def test_printable_escapes_control_characters():
    from corpus_audit.core.errors import printable

    assert printable(HOSTILE) == "\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\u202egnp.exe\\r"
    assert printable("un café, 😀, ünïcode") == "un café, 😀, ünïcode"  # text stays text
    assert printable("a\nb") == "a\\nb" and printable("a\nb", keep_newlines=True) == "a\nb"
    assert printable("\x9b31m") == "\\x9b31m"  # the one-byte CSI of C1


def test_control_characters_in_a_corpus_header_are_escaped(tmp_path):
    corpus = tmp_path / "hostile.csv"
    header = HOSTILE.rstrip("\r")
    corpus.write_text(f"{header},url\na teacher,http://x\n", encoding="utf-8")
    root = tmp_path / "s"
    assert _cli("init", str(root), "--corpus", str(corpus)).returncode == 0
    proc = _cli("-q", "select", str(root))
    assert proc.returncode == 2
    assert ESC not in proc.stderr and "\x07" not in proc.stderr and "\u202e" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "\\x1b]0;pwned\\x07" in proc.stderr
    assert "no caption column" in proc.stderr
    # a bare carriage return inside the header is a malformed CSV: one line too
    corpus.write_text(f"{HOSTILE}x,url\na teacher,http://x\n", encoding="utf-8")
    proc = _cli("-q", "select", str(root))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "malformed CSV header" in proc.stderr and ESC not in proc.stderr


def test_control_characters_in_stage_output_are_escaped(capsys):
    from corpus_audit.commands.verbs.output import print_run as _print_run
    from corpus_audit.core.store import StageRun

    run = StageRun("select", rows_in=1, rows_out=1)
    run.summary = [{"occupation": HOSTILE, HOSTILE: 1}]
    run.messages.append(f"caption {HOSTILE}")
    run.dropped[HOSTILE] = 1
    run.outputs[HOSTILE] = HOSTILE
    _print_run(run)
    out = capsys.readouterr().out
    assert ESC not in out and "\x07" not in out and "\u202e" not in out and "\r" not in out
    assert out.count("\\x1b]0;pwned") == 6


# -- 7. smaller items -------------------------------------------------------------------------------
def test_status_into_a_closed_pipe_exits_quietly(laion_templates):
    read_end, write_end = os.pipe()
    os.close(read_end)  # like `| head -1` once head has exited
    try:
        proc = _cli("status", str(laion_templates["full"]), stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.returncode == 141 and proc.stderr == ""  # 128 + SIGPIPE, as a shell reports it


def test_integer_caption_column_is_an_error_naming_it(tmp_path, capsys):
    corpus = tmp_path / "ids.parquet"
    pq.write_table(
        pa.table({"TEXT": pa.array([1, 2, 3], pa.int64()), "URL": ["a", "b", "c"]}), corpus
    )
    root = tmp_path / "s"
    init_study(root, [str(corpus)]).close()
    with Study.open(root) as study:
        from corpus_audit.stages.select import select

        with pytest.raises(
            CorpusError, match=r"ids\.parquet: the caption column 'TEXT' holds int64"
        ):
            select(study, progress=False)
        assert study.count("captions") == 0 and study.last_run("select") is None
    assert main(["-q", "select", str(root)]) == 2
    assert "set corpus.text_column" in capsys.readouterr().err


def test_truncated_database_is_one_line_saying_how_to_recover(laion_templates, tmp_path):
    root = _copy_study(laion_templates["full"], tmp_path / "study")
    db = root / "study.duckdb"
    os.truncate(db, db.stat().st_size // 2)
    for command in ("status", "analyze"):
        proc = _cli(command, str(root))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "damaged" in proc.stderr and "corpus-audit run" in proc.stderr


def _image_study(make_study, laion_path, tmp_path, photos: dict[str, bytes], **overrides):
    """A study whose first captions have ``photos`` as training images (dir source)."""
    from corpus_audit.stages.images import images

    study = make_study([laion_path], **overrides)
    seeded = seed_captions(study, laion_path, n=len(photos))
    folder = tmp_path / "photos"
    folder.mkdir()
    names = {}
    for (cid, _, _), (name, data) in zip(seeded, photos.items(), strict=True):
        suffix = ".jpg" if data[:2] == b"\xff\xd8" else ".png"
        (folder / f"{cid}{suffix}").write_bytes(data)
        names[f"train:{cid}"] = name
    study.config.images.sources = [{"kind": "dir", "path": str(folder)}]
    images(study, progress=False)
    return study, names


def test_changing_max_pixels_is_noticed_by_label_and_status(make_study, laion_path, tmp_path):
    from corpus_audit.stages.label import label

    photos = {n: encode(photo(n), "PNG") for n in ("astronaut", "camera", "grace")}
    study, names = _image_study(
        make_study, laion_path, tmp_path, photos, images={"max_pixels": 512 * 512}
    )

    def outcome() -> dict[str, tuple]:
        rows = study.con.execute(
            "SELECT f.image_id, f.reason, l.label IS NOT NULL FROM face_filter f "
            "LEFT JOIN labels l USING (image_id)"
        ).fetchall()
        return {names[i]: (reason, labelled) for i, reason, labelled in rows}

    label(study, progress=False)  # grace is 512 x 600 = 307,200 pixels: refused
    assert outcome() == {
        "astronaut": (None, True),
        "camera": (None, True),
        "grace": ("unreadable", False),
    }

    study.config.images.max_pixels = 400_000
    write_config(study.config)
    note = {s.stage: s.note for s in status(study)}["label"]
    assert "config changed since this run" in note
    run = label(study, progress=False)
    assert not run.skipped and "filtered again" in " ".join(run.messages)
    assert outcome()["grace"] == (None, True)

    study.config.images.max_pixels = 512 * 512 - 1  # now astronaut and camera are too large
    run = label(study, progress=False)
    assert outcome() == {n: ("unreadable", False) for n in ("astronaut", "camera", "grace")}
    assert study.count("faces") == 0 and study.count("labels") == 0
    assert label(study, progress=False).skipped  # and it settles


# -- 8. decode memory --------------------------------------------------------------------------------
PEAK_DRIVER = """
import re, sys
from corpus_audit.cli import main
code = main(["-q", "label", sys.argv[1]])
# VmHWM: this process's own peak RSS (ru_maxrss would start from the forking parent's peak)
with open("/proc/self/status") as status:
    print("PEAK_KB", re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1), file=sys.stderr)
sys.exit(code)
"""


def _label_peak_mb(root: Path, tmp_path: Path) -> float:
    """Peak RSS of `corpus-audit label` on ``root`` in a fresh process, in MB."""
    driver = tmp_path / "peak.py"
    driver.write_text(PEAK_DRIVER)
    proc = subprocess.run(
        [sys.executable, str(driver), str(root)],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(re.search(r"PEAK_KB (\d+)", proc.stderr).group(1)) / 1024


BIG_SIDE = 9400  # 9400 x 9400 = 88.4 megapixels, just under the default images.max_pixels


@pytest.fixture(scope="module")
def big_jpeg() -> bytes:
    """An 88-megapixel photo-like JPEG: the astronaut photo scaled up."""
    from PIL import Image

    big = Image.fromarray(photo("astronaut")).resize((BIG_SIDE, BIG_SIDE), Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    big.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_label_decodes_a_large_jpeg_within_a_bounded_peak(
    make_study, laion_path, tmp_path, big_jpeg
):
    """The label stage (a subprocess, real models) on a study with the 88-megapixel JPEG
    peaks no more than 150 MB above the same study with the 512 px original (measured +37 MB;
    +1,142 MB before, when the image was decoded at full size and copied twice)."""
    small = encode(photo("astronaut"), "JPEG", quality=90)
    roots = {}
    for name, data in (("small", small), ("big", big_jpeg)):
        study, _ = _image_study(
            make_study, laion_path, tmp_path / name, {"astronaut": data}, name=name
        )
        roots[name] = study.root
        study.close()
    peaks = {name: _label_peak_mb(root, tmp_path) for name, root in roots.items()}
    assert peaks["big"] - peaks["small"] < 150, peaks
    boxes = {}
    for name, root in roots.items():
        ((width, height, x, y, w, h, kept),) = _rows(
            root,
            "SELECT f.image_width, f.image_height, x, y, w, h, f.kept "
            "FROM face_filter f JOIN faces USING (image_id)",
        )
        assert kept
        boxes[name] = (width, height, np.array([x / width, y / height, w / width, h / height]))
    assert boxes["big"][:2] == (BIG_SIDE, BIG_SIDE) and boxes["small"][:2] == (512, 512)
    # boxes are stored in the pixels of the whole image, whatever size it was decoded at
    assert np.allclose(boxes["big"][2], boxes["small"][2], atol=0.02)


def test_decode_budget_bounds_the_full_size_pixels_decoded_at_once(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from corpus_audit.core.imagefile import DecodeBudget, decode

    paths = []
    for i in range(6):
        path = tmp_path / f"{i}.png"
        path.write_bytes(encode(photo("camera"), "PNG"))  # PNG: decoded at full size
        paths.append(path)

    class Watched(DecodeBudget):
        held = 0
        most = 0

        @contextlib.contextmanager
        def hold(self, pixels):
            with super().hold(pixels):
                Watched.held += pixels
                Watched.most = max(Watched.most, Watched.held)
                time.sleep(0.05)
                try:
                    yield
                finally:
                    Watched.held -= pixels

    budget = Watched(512 * 512 * 2)  # room for two of them at once
    with ThreadPoolExecutor(4) as pool:
        out = list(pool.map(lambda p: decode(p, max_side=256, budget=budget), paths))
    assert 512 * 512 <= Watched.most <= 2 * 512 * 512
    for d in out:
        assert d.array.shape == (256, 256, 3) and (d.width, d.height) == (512, 512)
        assert d.scale == 0.5
