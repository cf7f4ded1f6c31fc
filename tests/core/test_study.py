"""Study config (study.toml), the study database, stage bookkeeping and the CLI shell."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from corpus_audit.cli import main
from corpus_audit.core.catalogue import RUN_ORDER
from corpus_audit.core.config import ConfigError, StudyConfig, load_config, write_config
from corpus_audit.core.pipeline import STAGE_NAMES, init_study, status
from corpus_audit.core.store import Study, StudyError


def test_init_writes_config_and_database(make_study, laion_path: Path):
    study = make_study([laion_path], select={"sample_size": 7}, study={"seed": 3})
    assert (study.root / "study.toml").is_file()
    assert (study.root / "study.duckdb").is_file()
    cfg = load_config(study.root)
    assert cfg.corpus.paths == [str(laion_path.resolve())]
    assert cfg.select.sample_size == 7 and cfg.study.seed == 3
    for table in (
        "stage_runs",
        "captions",
        "mentions",
        "samples",
        "indicators",
        "prompts",
        "images",
        "labels",
        "face_filter",
    ):
        assert study.table_exists(table), table


def test_config_roundtrip_keeps_every_value(tmp_path: Path):
    cfg = StudyConfig(root=tmp_path)
    cfg.corpus.paths = ["a b.parquet", 'c"d.parquet']
    cfg.label.texts = ["A photo of a man", "A photo of a woman"]
    cfg.images.sources = [{"kind": "dir", "path": "imgs"}]
    write_config(cfg)
    again = load_config(tmp_path)
    assert again.to_dict() == cfg.to_dict()
    assert again.section_hash("select") == cfg.section_hash("select")


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[select]\nsampel_size = 3\n", "unknown key 'select.sampel_size'"),
        ("[selcet]\n", r"unknown section \[selcet\]"),
        ("[select]\nsample_size = 'many'\n", "select.sample_size: expected int, got str"),
        ("[select]\nsample_size = 0\n", "select.sample_size: 0 must be >= 1"),
        ("[label]\nthreshold = 0.3\n", r"label.threshold: 0.3 is not in \[0.5, 1\]"),
        ("[neighbors]\nindex = 'annoy'\n", "neighbors.index: 'annoy' is not one of"),
        ("[engine]\ndevice = 'tpu'\n", "engine.device"),
        ("[select\n", "not valid TOML"),
        ("[corpus]\npaths = 'x.parquet'\n", "corpus.paths: expected a list"),
        # 0 and 1 used to pass validation and then crash `analyze` (z of 0 or 1 is undefined)
        ("[analysis]\nconfidence = 0\n", r"analysis.confidence: 0.0 is not in \(0, 1\)"),
        ("[analysis]\nconfidence = 1\n", r"analysis.confidence: 1.0 is not in \(0, 1\)"),
        ("[analysis]\nparity_side = 'lower'\n", "analysis.parity_side: 'lower' is not one of"),
        ("[analysis]\nimage_similarity = 'yes'\n", "analysis.image_similarity: 'yes'"),
        ("[select]\nsample_unit = 'images'\n", "select.sample_unit: 'images' is not one of"),
        ("[select]\noverdraw = 0.5\n", r"select.overdraw: 0.5 is not in \[1, 1000\]"),
        ("[indicators]\nno_indicator_sample = 'both'\n", "indicators.no_indicator_sample"),
        ("[generate]\ncaption_prompts = 'some'\n", "generate.caption_prompts: 'some'"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path: Path, toml: str, message: str):
    (tmp_path / "study.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message) as err:
        load_config(tmp_path)
    assert "study.toml" in str(err.value)


def test_init_refuses_to_overwrite_and_unknown_corpus(tmp_path: Path, laion_path: Path):
    init_study(tmp_path / "s", [str(laion_path)]).close()
    with pytest.raises(StudyError, match="already holds a study"):
        init_study(tmp_path / "s", [str(laion_path)])
    with pytest.raises(StudyError, match="no such corpus file"):
        init_study(tmp_path / "t", [str(tmp_path / "missing.parquet")])


def test_stage_bookkeeping_records_only_finished_runs(make_study, laion_path: Path):
    study = make_study([laion_path])
    with pytest.raises(RuntimeError), study.stage("select", "corpus") as run:
        run.rows_in = 5
        raise RuntimeError("boom")
    assert study.last_run("select") is None
    with study.stage("select", "corpus") as run:
        run.rows_in, run.rows_out = 10, 4
        run.drop("null_text", 2)
        run.provenance["note"] = "x"
    last = study.last_run("select")
    assert (last["rows_in"], last["rows_out"], last["dropped"]) == (10, 4, {"null_text": 2})
    assert last["provenance"]["note"] == "x" and "duckdb" in last["provenance"]["versions"]
    rows = {s.stage: s for s in status(study)}
    assert rows["select"].done and not rows["indicators"].done
    assert list(rows) == [n for n in STAGE_NAMES if n in RUN_ORDER]  # an amplification study


def test_transaction_rolls_back_on_error(make_study, laion_path: Path):
    study = make_study([laion_path])
    study.con.execute("INSERT INTO prompts VALUES ('p:1:nurse', 'p', 1, 'nurse', 'A nurse')")
    with pytest.raises(ValueError), study.transaction() as con:
        con.execute("DELETE FROM prompts")
        raise ValueError("bad input half way")
    assert study.count("prompts") == 1


def test_open_missing_study_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ConfigError, match="no study config here"):
        Study.open(tmp_path)


def test_cli_user_errors_exit_2_with_one_line(tmp_path: Path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "study.toml" in err and "Traceback" not in err


def test_cli_init_and_status(tmp_path: Path, laion_path: Path, capsys):
    assert (
        main(["init", str(tmp_path / "s"), "--corpus", str(laion_path), "--sample-size", "9"]) == 0
    )
    assert load_config(tmp_path / "s").select.sample_size == 9
    capsys.readouterr()
    assert main(["status", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    for name in RUN_ORDER:
        assert name in out
    assert "not run" in out and "pst_label" not in out  # the PST stages: in PST studies


def test_help_is_fast_and_imports_no_heavy_library():
    code = (
        "import sys; from corpus_audit.cli import build_parser; build_parser(); "
        "heavy = [m for m in ('torch', 'spacy', 'diffusers', 'mediapipe', 'open_clip', "
        "'sentence_transformers', 'faiss', 'duckdb') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_open_accepts_the_study_toml_path(make_study, laion_path: Path):
    from corpus_audit.core.store import Study

    study = make_study([laion_path])
    root = study.root
    study.close()
    with Study.open(root / "study.toml") as again:
        assert again.root == root and again.table_exists("captions")


def test_status_flags_a_stage_whose_config_changed(make_study, laion_path: Path):
    from corpus_audit.core.config import write_config
    from corpus_audit.core.pipeline import stage_function, status
    from corpus_audit.core.store import Study

    study = make_study([laion_path], select={"sample_size": 5})
    stage_function("select")(study, progress=False)
    assert {s.stage: s.note for s in status(study)}["select"] == ""
    study.config.select.sample_size = 6
    write_config(study.config)
    root = study.root
    study.close()
    with Study.open(root) as again:
        notes = {s.stage: s.note for s in status(again)}
        assert "config changed since this run" in notes["select"]
        assert notes["indicators"] == ""  # not run: nothing to flag
        stage_function("select")(again, progress=False)
        assert {s.stage: s.note for s in status(again)}["select"] == ""


def test_confidence_at_the_edge_is_refused_by_the_cli(tmp_path: Path, laion_path: Path, capsys):
    from corpus_audit.cli import main

    init_study(tmp_path / "s", [str(laion_path)]).close()
    toml = (tmp_path / "s" / "study.toml").read_text()
    (tmp_path / "s" / "study.toml").write_text(
        toml.replace("confidence = 0.95", "confidence = 1.0")
    )
    assert main(["analyze", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("analysis.confidence: 1.0 is not in (0, 1)") and "\n" not in err


def test_candidates_per_subset():
    from corpus_audit.core.config import SelectSection

    assert SelectSection(sample_size=500).candidates(500) == 4000  # overdraw 8
    assert SelectSection(sample_size=4, overdraw=2.5).candidates(4) == 10
    assert SelectSection(overdraw=1.3).candidates(10) == 13  # not 14: 10 x 1.3 in floats
    assert SelectSection(sample_unit="captions").candidates(500) == 500
