"""Issue 23, item 1: a study received from someone else is safe to open.

SQL stored in ``study.duckdb`` (a view, a macro, any object the schema migrations did not
create) must never run: every command refuses such a database when it opens it, with one
line naming what it found, exit status 2, and nothing written. The connection itself is
locked down (no file or network access, no extension autoload, configuration locked), and a
table of the schema that is missing is one line, not a DuckDB catalog error.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from corpus_audit.cli import main
from corpus_audit.core.errors import StudyError
from corpus_audit.core.store import DB_NAME, Study

SECRET = "the contents of a private local file 8c1f"

# name -> (statements run on the study's database, what the error must name)
CRAFTS: dict[str, tuple[list[str], str]] = {
    "view": (
        [
            "CREATE TABLE p0 AS SELECT * FROM prompts",
            "DROP TABLE prompts",
            "CREATE VIEW prompts AS SELECT * REPLACE (text || ' ' || "
            "(SELECT content FROM read_text('{secret}')) AS text) FROM p0",
        ],
        "a view `prompts` in place of the schema's table",
    ),
    "macro": (["CREATE MACRO lower(x) AS 'pwned'"], "a macro `lower`"),
    "table_macro": (
        ["CREATE MACRO duckdb_tables() AS TABLE SELECT 'prompts' AS table_name"],
        "a macro `duckdb_tables`",
    ),
    "sequence": (["CREATE SEQUENCE s0"], "a sequence `s0`"),
    "index": (["CREATE INDEX i0 ON prompts (text)"], "an index `i0`"),
    "default": (
        ["ALTER TABLE stage_runs ALTER COLUMN provenance SET DEFAULT 'pwned'"],
        "column `stage_runs.provenance` has a default",
    ),
    "unknown_table": (["CREATE TABLE p1 (x INTEGER)"], "a table `p1`"),
    "missing_table": (["DROP TABLE prompts"], "table `prompts` is missing"),
}

COMMANDS = {
    "status": ["status"],
    "report": ["report"],
    "select": ["select"],
    "battles_export": ["battles", "export"],
    "run": ["run"],
}


def _digest(root: Path) -> dict[str, str]:
    """Every file under the study folder -> md5 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def made_study(tmp_path_factory, laion_path) -> Path:
    """A fresh study (init only: every table of the schema, empty), copied by each test."""
    root = tmp_path_factory.mktemp("untrusted") / "s"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--sample-size", "5"]) == 0
    return root


def _crafted(made_study: Path, tmp_path: Path, craft: str) -> tuple[Path, Path]:
    import shutil

    root = tmp_path / "s"
    shutil.copytree(made_study, root)
    # the study.toml names the corpus by absolute path; the copy reads the same corpus
    secret = tmp_path / "private.txt"
    secret.write_text(SECRET, encoding="utf-8")
    con = duckdb.connect(str(root / DB_NAME))
    try:
        for statement in CRAFTS[craft][0]:
            con.execute(statement.format(secret=secret))
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return root, secret


@pytest.mark.parametrize("craft", sorted(CRAFTS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_crafted_database_is_refused_with_one_line_and_nothing_written(
    made_study, tmp_path, capsys, craft, command
):
    root, _ = _crafted(made_study, tmp_path, craft)
    before = _digest(root)
    code = main([*COMMANDS[command], str(root)])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: ") and "\n" not in err
    assert str(root / DB_NAME) in err
    assert CRAFTS[craft][1] in err
    assert "Traceback" not in err
    assert _digest(root) == before  # nothing written: no page, no table, no checkpoint
    assert not (root / "battles").exists() and not (root / "report").exists()


def test_view_reading_a_local_file_never_reaches_the_battles_page(made_study, tmp_path, capsys):
    root, _ = _crafted(made_study, tmp_path, "view")
    assert main(["battles", "export", str(root), "--out", str(tmp_path / "out")]) == 2
    capsys.readouterr()
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "private.txt"]
    assert not any(SECRET.encode() in p.read_bytes() for p in written)


@pytest.mark.parametrize("read_only", [False, True])
def test_study_open_refuses_a_macro_before_any_query_uses_it(made_study, tmp_path, read_only):
    root, _ = _crafted(made_study, tmp_path, "macro")
    with pytest.raises(StudyError, match=r"a macro `lower`"):
        Study.open(root, read_only=read_only)


def test_connection_is_locked_down(made_study, tmp_path):
    import shutil

    root = tmp_path / "s"
    shutil.copytree(made_study, root)
    secret = tmp_path / "private.txt"
    secret.write_text(SECRET, encoding="utf-8")
    with Study.open(root) as study:
        con = study.con
        with pytest.raises(duckdb.Error, match="disabled by configuration"):
            con.execute("SELECT content FROM read_text(?)", [str(secret)]).fetchall()
        with pytest.raises(duckdb.Error, match="disabled by configuration"):
            con.execute("COPY (SELECT 1) TO '" + str(tmp_path / "out.csv") + "'")
        settings = dict(
            con.execute(
                "SELECT name, value FROM duckdb_settings() WHERE name IN "
                "('enable_external_access', 'autoinstall_known_extensions', "
                "'autoload_known_extensions', 'lock_configuration')"
            ).fetchall()
        )
        assert settings == {
            "enable_external_access": "false",
            "autoinstall_known_extensions": "false",
            "autoload_known_extensions": "false",
            "lock_configuration": "true",
        }
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET autoload_known_extensions = true")
        # the study's own work still runs: its tables, and spilling to its temp folder
        assert con.execute("SELECT current_setting('temp_directory')").fetchone()[0] == str(
            root / ".duckdb_tmp"
        )
        assert study.count("prompts") == 0
    assert not (tmp_path / "out.csv").exists()


def test_a_locked_study_still_runs_through_neighbors(tmp_path, laion_path, capsys):
    """The embedding cache's key files are read outside DuckDB (the study connection has no
    file access); a second run finds every text in the cache."""
    root = tmp_path / "s"
    assert main(["-q", "init", str(root), "--corpus", str(laion_path), "--sample-size", "5"]) == 0
    assert main(["-q", "run", str(root), "--until", "neighbors"]) == 0
    with Study.open(root) as study:
        assert study.count("samples", "strategy = 'nn'") > 0
        study.con.execute("DELETE FROM stage_runs WHERE stage = 'neighbors'")
    assert main(["-q", "neighbors", str(root)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM read_csv('https://example.invalid/x.csv')",
        "SELECT * FROM read_parquet('s3://bucket/x.parquet')",
        "INSTALL httpfs",
        "LOAD httpfs",
        "ATTACH '{tmp}/other.duckdb' AS other",
    ],
)
def test_no_url_extension_or_other_database_is_reached(made_study, tmp_path, statement):
    """What a view could name (a URL would make DuckDB download the httpfs extension) is
    refused by the connection itself, before any network or file access."""
    import shutil

    root = tmp_path / "s"
    shutil.copytree(made_study, root)
    with Study.open(root) as study, pytest.raises(duckdb.Error, match="disabled"):
        study.con.execute(statement.format(tmp=tmp_path)).fetchall()
    assert not (tmp_path / "other.duckdb").exists()
