"""The public Python API (corpus_audit/api.py, re-exported by the package): a study made, set,
run, read and exported from Python on the real LAION sample; the paper's published tables and
the BAFIS arena's votes through the API. This file imports only public names of the package
(checked below by reading its own imports)."""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import corpus_audit
from corpus_audit import (
    STAGES,
    CorpusAuditError,
    Study,
    amplify,
    arena_leaderboard,
    plugins,
    published_table3,
    published_tables,
)


def test_this_file_imports_no_private_name():
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert not alias.name.startswith("corpus_audit.") or alias.name == "corpus_audit"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corpus_audit"):
            assert node.module == "corpus_audit", node.module
            assert all(not a.name.startswith("_") for a in node.names)


def test_the_surface_is_public_and_typed():
    names = corpus_audit.__all__
    assert names and all(not n.startswith("_") for n in names)
    assert all(getattr(corpus_audit, n) is not None for n in names)
    package = Path(corpus_audit.__file__).parent
    assert (package / "py.typed").is_file()
    stub = ast.parse((package / "__init__.pyi").read_text(encoding="utf-8"))
    typed = {a.asname for node in stub.body if isinstance(node, ast.ImportFrom) for a in node.names}
    assert typed == set(names)  # type checkers see the same names


def test_importing_the_package_stays_light():
    code = (
        "import sys, corpus_audit; print(corpus_audit.__version__,"
        " sorted(m for m in ('duckdb', 'pandas', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(" ", 1)[1].strip() == "[]"


@pytest.fixture
def study(tmp_path, laion_path):
    with Study.create(
        tmp_path / "study", [laion_path], settings={"select.sample_size": 5, "study.seed": 3}
    ) as opened:
        yield opened


def test_create_set_run_status_and_read(study, caplog):
    assert study.config["select"]["sample_size"] == 5
    changes = study.set({"label.threshold": 0.8, "label.classifier": "clip"})
    assert changes == [("label.threshold", 0.9, 0.8), ("label.classifier", "agegender", "clip")]
    assert study.config["label"]["threshold"] == 0.8
    before = (study.root / "study.toml").read_text(encoding="utf-8")
    with pytest.raises(CorpusAuditError, match=r"label\.threshold"):
        study.set({"label.classifier": "agegender", "label.threshold": 7})
    assert (study.root / "study.toml").read_text(encoding="utf-8") == before  # all or nothing

    with caplog.at_level(logging.INFO, logger="corpus_audit"):
        (run,) = study.run("select", progress=False)
    assert run.name == "select" and run.rows_out > 0
    assert any(r.getMessage().startswith("[select] done") for r in caplog.records)

    status = study.status()
    assert isinstance(status, pd.DataFrame)
    row = status.set_index("stage").loc["select"]
    assert row["status"] == "done" and row["done"] and row["rows_out"] == run.rows_out
    assert set(status["stage"]) <= set(STAGES)

    assert {"captions", "mentions", "samples"} <= set(study.tables(non_empty=True))
    assert "labels" in study.tables() and "labels" not in study.tables(non_empty=True)
    frame = study.table("samples")
    arrow = study.table("samples", arrow=True)
    assert isinstance(frame, pd.DataFrame) and isinstance(arrow, pa.Table)
    assert len(frame) == arrow.num_rows > 0
    assert set(frame["strategy"]) == {"keyword"}
    assert frame.equals(arrow.to_pandas())
    with pytest.raises(CorpusAuditError, match="unknown table 'stage_runs'"):
        study.table("stage_runs")  # bookkeeping, not a result table
    with pytest.raises(CorpusAuditError, match="unknown stage 'nope'"):
        study.run("nope")
    assert study.figures() == {}  # no stage that draws one has run


def test_a_bad_setting_at_create_leaves_no_study(tmp_path, laion_path):
    for root in (tmp_path / "new", tmp_path / "empty"):
        if root.name == "empty":
            root.mkdir()
        with pytest.raises(CorpusAuditError, match=r"label\.threshold"):
            Study.create(root, [laion_path], settings={"label.threshold": 7})
        assert not root.exists() if root.name == "new" else list(root.iterdir()) == []
        Study.create(root, [laion_path]).close()  # the same create works now


def test_the_handle_releases_the_study_for_the_cli(study):
    root = study.root
    study.close()
    with pytest.raises(CorpusAuditError, match="closed"):
        study.status()
    with Study.open(root) as again:  # reopened: the database was released
        assert list(again.status()["status"].unique()) == ["not run"]


def test_published_tables_reproduce_table_3():
    result = amplify(published_tables(), training_n=500, replicates=200)
    published = published_table3()
    got = result.summary[result.summary["prompt"].str.startswith("prompt")]
    merged = got.merge(published, on=["model", "prompt"], suffixes=("", "_paper"))
    assert len(merged) == 8  # two models x four prompts
    # the tables are rounded to 0.1: means agree with the paper's to about 0.1 point
    assert (merged["mean_A"] - merged["mean_A_paper"]).abs().max() < 0.15
    fig = result.scatter("Stable Diffusion 1.4")
    assert len(fig.axes) == 4
    with pytest.raises(CorpusAuditError, match="no model 'sd3'"):
        result.scatter("sd3")


def test_arena_leaderboard_of_the_bundled_votes():
    board = arena_leaderboard(rounds=50)
    overall = board[(board["aspect"] == "image_quality") & (board["language"] == "all")]
    assert len(overall) == 5
    assert overall.sort_values("rank").iloc[0]["model_id"] == "flux-1-dev"


def test_plugins_lists_installed_ones():
    assert isinstance(plugins(), list)  # none installed in this environment: empty


def test_the_example_in_docs_api_md_runs(capsys):
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## A study from Python", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(example, "docs/api.md", "exec"), namespace)
    result = namespace["result"]
    assert result.rows["captions"] > 0 and result.manifest.is_file()
    assert namespace["samples"].shape[0] > 0
    assert "select" in capsys.readouterr().out
