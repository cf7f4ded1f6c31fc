"""`corpus-audit run` with ``engine = "ray"``: the whole audit runs, and the tables of the
steps that run on the engine (``select``'s scan, ``indicators``' labelling) are identical,
row for row, to a local run on the same real corpus.

The corpus is the real LAION-400M sample and the COCO captions of ``../shared/data``, written
with several row groups each so the scan has several units per file. The Ray cluster is a
local one with 2 CPUs (the machine's cores); the test is skipped, saying why, when the
``ray`` extra is not installed. Retries of failing tasks and dead actors are tested on the
engine itself (``tests/backends/test_engines.py``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpus_audit.cli import main
from corpus_audit.core.config import ConfigError, load_config
from corpus_audit.core.pipeline import init_study, run_all
from corpus_audit.core.store import Study

# the tables select and indicators write, with the columns that identify a row
TABLES = {
    "corpus_files": "file_id, format, rows_total, rows_null_text, rows_bad_text",
    "captions": "caption_id, text, url, row_in_file",
    "mentions": "caption_id, occupation, matched_form",
    "prompts": "prompt_id, text",
    # the samples of select and indicators (the ray study also ran neighbors: nn samples)
    "samples": "strategy, occupation, prompt_id, caption_id, rank FROM samples "
    "WHERE strategy IN ('keyword', 'no_indicators')",
    "indicators": "caption_id, label, triggers",
    "indicator_triggers": "caption_id, kind, token, gender, guess",
    "indicator_texts": "caption_id, text_md5",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, laion_path: Path, coco_path: Path) -> Path:
    d = tmp_path_factory.mktemp("ray_corpus")
    pq.write_table(pq.read_table(laion_path), d / "a_laion.parquet", row_group_size=2500)
    coco = pq.read_table(coco_path).slice(0, 10_000)
    pq.write_table(coco, d / "b_coco.parquet", row_group_size=2500)
    return d


def _init(root: Path, corpus: Path, engine: str) -> None:
    study = init_study(
        root,
        [str(corpus)],
        overrides={
            "select": {"sample_size": 20},
            "engine": {"engine": engine, "threads": 2},
            "indicators": {"batch_size": 500},
        },
    )
    study.close()


def _rows(root: Path, table: str, cols: str) -> list[tuple]:
    with Study.open(root, read_only=True) as study:
        query = cols if " FROM " in cols else f"{cols} FROM {table}"
        return study.con.execute(f"SELECT {query} ORDER BY ALL").fetchall()


def test_run_on_ray_writes_the_same_tables_as_a_local_run(tmp_path, corpus):
    pytest.importorskip(
        "ray", reason="ray is not installed (pip install 'corpus_audit[ray]'): Ray engine untested"
    )
    _init(tmp_path / "local", corpus, "local")
    with Study.open(tmp_path / "local") as study:
        run_all(study, until="indicators", progress=False)
    _init(tmp_path / "ray", corpus, "ray")
    assert main(["-q", "run", str(tmp_path / "ray")]) == 0  # every stage, as a user runs it

    for table, cols in TABLES.items():
        local, ray = _rows(tmp_path / "local", table, cols), _rows(tmp_path / "ray", table, cols)
        assert local, f"{table} is empty: the comparison would prove nothing"
        assert ray == local, table
    with Study.open(tmp_path / "ray", read_only=True) as study:
        for stage in ("select", "indicators"):
            run = study.last_run(stage)
            assert run is not None and run["status"] == "done"
        for stage in ("select", "indicators"):  # the cluster they ran on
            assert study.last_run(stage)["provenance"]["engine"]["engine"] == "ray"
        assert study.last_run("report")["provenance"]["engine"]["engine"] == "local"
    # labels with names (spaCy on the Ray workers) are part of what was compared
    kinds = {r[0] for r in _rows(tmp_path / "ray", "indicator_triggers", "kind")}
    assert "name" in kinds


def test_engine_settings_are_validated(tmp_path, corpus):
    _init(tmp_path / "s", corpus, "local")
    toml = tmp_path / "s" / "study.toml"
    text = toml.read_text()
    toml.write_text(text.replace('engine = "local"', 'engine = "spark"'))
    with pytest.raises(ConfigError, match=r"engine\.engine: 'spark' is not one of .*'ray'"):
        load_config(toml.parent)
    toml.write_text(text.replace("ray_max_retries = 3", "ray_max_retries = -1"))
    with pytest.raises(ConfigError, match=r"engine\.ray_max_retries: -1 must be >= 0"):
        load_config(toml.parent)
