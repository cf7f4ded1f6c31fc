"""Issue 44, part B (H5, M5, M7, M8, M9 and the Low items on export) and issue 42 point 7:
``corpus-audit export`` is atomic as a whole, streamed, refuses partial stages unless asked,
neutralises spreadsheet formulas in CSV, says a write error in one line, leaves empty tables
out by default, and gives every column a meaning. On a copy of a real study (the LAION sample
through ``select``); the kill test runs the real command in a subprocess and SIGKILLs it at
random moments of a re-export."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from corpus_audit.cli import main
from corpus_audit.commands.export import result_tables, schema_comments

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base_study(tmp_path_factory, laion_path) -> Path:
    """The LAION sample after `select` (5 captions per occupation), built once."""
    from corpus_audit.core.pipeline import init_study, stage_function

    root = tmp_path_factory.mktemp("export_atomic") / "study"
    study = init_study(root, [str(laion_path)], overrides={"select": {"sample_size": 5}})
    stage_function("select")(study, progress=False)
    study.close()
    return root


@pytest.fixture
def study_root(base_study, tmp_path) -> Path:
    """A copy of :func:`base_study` this test may change."""
    root = tmp_path / "study"
    shutil.copytree(base_study, root)
    return root


def _sql(root: Path, query: str, params: list | None = None) -> None:
    con = duckdb.connect(str(root / "study.duckdb"))
    try:
        con.execute(query, params or [])
    finally:
        con.close()


def _rows_of(path: Path) -> int:
    if path.suffix == ".parquet":
        return pq.ParquetFile(path).metadata.num_rows
    return pcsv.read_csv(path).num_rows


def _consistent(out: Path) -> dict:
    """``out`` holds one whole export: a manifest whose row counts equal its files, and no
    file beside them (no ``.part``, nothing of another export)."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    listed = {t["file"]: t["rows"] for t in manifest["tables"]}
    assert {p.name for p in out.iterdir()} == {*listed, "manifest.json"}
    for name, rows in listed.items():
        assert _rows_of(out / name) == rows, name
    return manifest


def _export(root: Path, out: Path, *extra: str) -> int:
    return main(["-q", "export", str(root), "--out", str(out), *extra])


_DRIVER = """
import sys
from corpus_audit.commands import export
export.BATCH_ROWS = 40  # many small batches: the export lasts long enough to be hit
from corpus_audit.cli import main
import time
print("go", flush=True)
start = time.monotonic()
code = main(["-q", "export", sys.argv[1], "--out", sys.argv[2]])
print(f"done {time.monotonic() - start:.3f}", flush=True)
sys.exit(code)
"""


def test_a_killed_re_export_leaves_a_whole_export(study_root, tmp_path, capsys):
    """H5: export, change the study, export again and SIGKILL it at random moments (several
    seeds, from the first table to the swap and the removal of the old folder): the folder
    always holds one complete export whose manifest's row counts equal its files (before:
    the old manifest beside a new captions file). The next export removes what the killed
    ones left beside the folder."""
    out = tmp_path / "out"
    assert _export(study_root, out) == 0
    first = _consistent(out)
    _sql(study_root, "DELETE FROM mentions WHERE caption_id % 3 = 0")
    _sql(study_root, "DELETE FROM captions WHERE caption_id % 3 = 0")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-c", _DRIVER, str(study_root), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lasting = float(proc.stdout.split("done ")[1])  # seconds the export itself lasts
    second = _consistent(out)
    assert {t["table"]: t["rows"] for t in second["tables"]} != {
        t["table"]: t["rows"] for t in first["tables"]
    }
    assert _export(study_root, out) == 0  # back to a known export
    killed = 0
    for seed in range(6):
        _sql(study_root, "DELETE FROM mentions WHERE caption_id % 7 = ?", [seed])
        delay = random.Random(seed).uniform(0.0, lasting)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"go"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        stdout, _ = proc.communicate(timeout=60)
        killed += proc.returncode == -signal.SIGKILL and b"done" not in stdout
        _consistent(out)
    assert killed >= 3  # most kills landed inside the export, not after it
    assert _export(study_root, out) == 0
    _consistent(out)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
    capsys.readouterr()


def test_re_export_into_an_earlier_export_leaves_no_old_file(study_root, tmp_path, capsys):
    """Low: an export into an earlier export's folder replaces it whole: no table of the
    earlier export stays beside the new manifest; a folder holding files no export wrote is
    refused in one line, nothing touched."""
    out = tmp_path / "out"
    assert _export(study_root, out) == 0
    assert len(_consistent(out)["tables"]) > 2
    assert _export(study_root, out, "--tables", "captions", "--format", "csv") == 0
    assert sorted(p.name for p in out.iterdir()) == ["captions.csv", "manifest.json"]
    _consistent(out)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep me")
    capsys.readouterr()
    assert _export(study_root, mine) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'thesis.tex', which no export wrote" in err
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]


def test_a_write_error_is_one_line_and_keeps_the_previous_export(study_root, tmp_path):
    """H5: a write failing mid-export (a real EFBIG: the file size limit of the process set
    low, as a full disk would stop it) is one line, exit 2, no traceback, and the previous
    export is intact, with no ``.part`` file and no temporary folder left."""
    import resource

    out = tmp_path / "out"
    assert _export(study_root, out) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", "-q", "export", str(study_root)]
        + ["--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_files,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("error: export: cannot write ") and "is unchanged" in lines[0]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "study"]


def test_a_partial_stage_is_refused_unless_allowed(study_root, tmp_path, capsys):
    """M9: a stage left partial (its unfinished mark set, as a killed run leaves it): export
    exits 2 in one line naming it (before: exit 0, the manifest saying ``done``);
    ``--allow-partial`` exports and marks it in the manifest."""
    _sql(study_root, "INSERT INTO stage_unfinished VALUES ('select', now())")
    out = tmp_path / "out"
    capsys.readouterr()
    assert _export(study_root, out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stage 'select' is partial" in err and "--allow-partial" in err
    assert not out.exists()
    assert _export(study_root, out, "--allow-partial") == 0
    manifest = _consistent(out)
    assert manifest["partial_stages"] == ["select"]
    assert manifest["stage_runs"]["select"]["status"] == "partial"
    captions = next(t for t in manifest["tables"] if t["table"] == "captions")
    assert captions["partial"] == ["select"]


def test_csv_formula_cells_are_neutralised(study_root, tmp_path):
    """M7: text a spreadsheet would run as a formula gets a leading apostrophe in the CSV
    (as the battles CSV does); the other cells are written as they are."""
    evil = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "@SUM(1)", "-2+3", "\tx"]
    ids = [
        r[0]
        for r in duckdb.connect(str(study_root / "study.duckdb"), read_only=True)
        .execute("SELECT caption_id FROM captions ORDER BY 1 LIMIT 6")
        .fetchall()
    ]
    for cid, text in zip(ids, evil, strict=False):
        _sql(study_root, "UPDATE captions SET text = ? WHERE caption_id = ?", [text, cid])
    out = tmp_path / "csv"
    assert _export(study_root, out, "--format", "csv", "--tables", "captions") == 0
    import csv

    with (out / "captions.csv").open(encoding="utf-8", newline="") as fh:
        rows = {int(r["caption_id"]): r["text"] for r in csv.DictReader(fh)}
    for cid, text in zip(ids, evil, strict=False):
        assert rows[cid] == "'" + text
    assert rows[ids[5]] and not rows[ids[5]].startswith("'")


def test_a_file_or_a_link_where_the_folder_should_be_is_one_line(study_root, tmp_path, capsys):
    """M5 and H4: ``--out`` naming a file, or ``<study>/export`` a link to a folder outside
    the study: one line, exit 2, the file and the linked folder untouched."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    capsys.readouterr()
    assert _export(study_root, a_file) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a folder" in err
    assert a_file.read_text() == "mine"
    assert _export(study_root, a_file / "sub") == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep")
    (study_root / "export").symlink_to(victim, target_is_directory=True)
    assert main(["-q", "export", str(study_root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a symbolic link" in err
    assert [p.name for p in victim.iterdir()] == ["keep.txt"]


def test_empty_tables_are_left_out_unless_asked(study_root, tmp_path, capsys):
    """Issue 42.7: the default export writes only tables with rows; ``--include-empty``
    writes them all; a table named by ``--tables`` is written even when empty."""
    out = tmp_path / "out"
    assert _export(study_root, out) == 0
    written = {t["table"]: t["rows"] for t in _consistent(out)["tables"]}
    assert written and all(n > 0 for n in written.values()) and "labels" not in written
    assert _export(study_root, out, "--include-empty") == 0
    assert [t["table"] for t in _consistent(out)["tables"]] == result_tables()
    assert _export(study_root, out, "--tables", "labels", "--format", "csv") == 0
    (entry,) = _consistent(out)["tables"]
    assert entry["rows"] == 0 and (out / "labels.csv").read_text().startswith('"')
    capsys.readouterr()


def test_tables_are_streamed_in_batches(study_root, tmp_path, monkeypatch):
    """M8: a table is written batch by batch (a Parquet row group per batch), never read
    whole; the file equals the table."""
    from corpus_audit.commands import export

    monkeypatch.setattr(export, "BATCH_ROWS", 100, raising=False)
    out = tmp_path / "out"
    assert _export(study_root, out, "--tables", "captions") == 0
    meta = pq.ParquetFile(out / "captions.parquet").metadata
    assert meta.num_row_groups == -(-meta.num_rows // 100) > 1
    con = duckdb.connect(str(study_root / "study.duckdb"), read_only=True)
    stored = con.sql("SELECT * FROM captions ORDER BY ALL").to_arrow_table()
    con.close()
    assert pq.read_table(out / "captions.parquet").equals(stored)


def test_every_column_has_a_meaning():
    """Issue 42.7: every column of every result table has a meaning in the manifest (its
    schema comment or its entry in core/column_meanings.csv); before, 492 of 848 were empty."""
    from corpus_audit.commands.export import column_meanings

    _, columns = schema_comments()
    fallback = column_meanings()
    empty = [
        f"{table}.{name}"
        for table in result_tables()
        for name, meaning in columns[table].items()
        if not (meaning or fallback.get(f"{table}.{name}") or fallback.get(name))
    ]
    assert not empty, f"{len(empty)} columns without a meaning: {', '.join(empty[:40])}"


def test_an_export_into_a_new_nested_folder(study_root, tmp_path):
    """``--out`` naming folders that do not exist yet: they are made, as before."""
    out = tmp_path / "a" / "b" / "export"
    assert _export(study_root, out, "--tables", "captions") == 0
    assert sorted(p.name for p in out.iterdir()) == ["captions.parquet", "manifest.json"]
