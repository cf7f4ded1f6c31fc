"""`corpus-audit export`: every result table of a real study (the LAION sample through `select`)
as Parquet or CSV, with manifest.json (rows, columns and their meaning, config hash,
provenance). The exported files are compared with the tables read back from study.duckdb."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest

from corpus_audit.cli import main
from corpus_audit.commands.export import BOOKKEEPING, result_tables, schema_comments
from corpus_audit.core.config import load_config
from corpus_audit.core.pipeline import init_study, stage_function


@pytest.fixture(scope="module")
def study_root(tmp_path_factory, laion_path) -> Path:
    """The LAION sample after `select` (5 captions per occupation)."""
    root = tmp_path_factory.mktemp("export") / "study"
    study = init_study(root, [str(laion_path)], overrides={"select": {"sample_size": 5}})
    stage_function("select")(study, progress=False)
    study.close()
    return root


def _stored(root: Path, table: str):
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        return con.sql(f'SELECT * FROM "{table}" ORDER BY ALL').to_arrow_table()
    finally:
        con.close()


def test_every_table_as_parquet_equals_the_table(study_root, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["-q", "export", str(study_root), "--out", str(out), "--include-empty"]) == 0
    printed = capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    names = [t["table"] for t in manifest["tables"]]
    assert names == result_tables() and not set(names) & BOOKKEEPING
    assert f"exported {len(names)} tables" in printed
    for entry in manifest["tables"]:
        exported = pq.read_table(out / entry["file"])
        stored = _stored(study_root, entry["table"])
        assert exported.equals(stored), entry["table"]
        assert entry["rows"] == stored.num_rows
        assert [c["name"] for c in entry["columns"]] == stored.schema.names
    by_name = {t["table"]: t for t in manifest["tables"]}
    assert by_name["captions"]["rows"] > 0 and by_name["mentions"]["rows"] > 0
    assert by_name["labels"]["rows"] == 0  # no image stage ran: empty, still exported
    # column meanings come from the schema's comments, labels from core/columns.csv
    p_female = next(c for c in by_name["labels"]["columns"] if c["name"] == "p_female")
    assert p_female["meaning"] == "in [0, 1]; p_male = 1 - p_female"
    assert "Perceived-gender classification" in by_name["labels"]["description"]
    occupation = next(c for c in by_name["mentions"]["columns"] if c["name"] == "occupation")
    assert occupation["label"] == "occupation"
    # the study's config hash and the provenance of the stage that ran
    assert manifest["config_hash"] == load_config(study_root).section_hash()
    select = manifest["stage_runs"]["select"]
    assert select["status"] == "done" and select["provenance"]["config_hash"]
    assert "versions" in select["provenance"]


def test_named_tables_as_csv(study_root, tmp_path, capsys):
    out = tmp_path / "csv"
    code = main(
        ["-q", "export", str(study_root), "--format", "csv", "--tables", "mentions", "captions"]
        + ["--out", str(out)]
    )
    assert code == 0
    capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == [
        "captions.csv",
        "manifest.json",
        "mentions.csv",
    ]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert [t["table"] for t in manifest["tables"]] == ["captions", "mentions"]
    assert manifest["format"] == "csv"
    got = pd.read_csv(out / "captions.csv", keep_default_na=False, na_values=[""])
    want = _stored(study_root, "captions").to_pandas()
    assert len(got) == len(want) == manifest["tables"][0]["rows"]
    assert got["caption_id"].tolist() == want["caption_id"].tolist()
    assert got["text"].tolist() == want["text"].tolist()  # quoting, commas, newlines survive


def test_bad_table_name_is_one_line_and_exit_2(study_root, tmp_path, capsys):
    out = tmp_path / "bad"
    assert (
        main(["-q", "export", str(study_root), "--tables", "captions", "nope", "--out", str(out)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: export: unknown table 'nope' (tables: ")
    assert not (out / "manifest.json").exists()


def test_the_api_exports_the_same_files(study_root, tmp_path, capsys):
    from corpus_audit import Study

    with Study.open(study_root) as study:
        result = study.export(tmp_path / "api", tables=["samples", "prompts"])
        frame = study.table("samples")
    assert result.rows == {"prompts": len(_stored(study_root, "prompts")), "samples": len(frame)}
    assert pq.read_table(result.out_dir / "samples.parquet").equals(_stored(study_root, "samples"))
    assert result.manifest == result.out_dir / "manifest.json"


def test_every_schema_column_is_parsed():
    """The comment parser sees every column of every result table (a new table whose
    columns it misread would export without meanings)."""
    con = duckdb.connect()
    from corpus_audit.core.store import execute_sql, migrations

    execute_sql(con, "schema/version")
    for _, files in migrations():
        for name in files:
            execute_sql(con, name)
    _, columns = schema_comments()
    for table in result_tables():
        real = [r[0] for r in con.execute("DESCRIBE " + f'"{table}"').fetchall()]
        assert set(real) == set(columns[table]), table
