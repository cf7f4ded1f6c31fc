"""Study.sql (queries kept in corpus_audit/sql/, named parameters) and the schema migrations."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from corpus_audit.core.config import StudyConfig, write_config
from corpus_audit.core.store import DB_NAME, Study, StudyError, migrations, schema_version

V0_SCHEMA = Path(__file__).parents[1] / "data" / "schema_v0.sql"


@pytest.fixture
def study(tmp_path: Path):
    """A fresh, empty study (made by the current code)."""
    made = Study.create(StudyConfig(root=tmp_path / "s"))
    yield made
    made.close()


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """table -> [(column, type)] in column order, for every base table."""
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall():
        out.setdefault(table, []).append((column, dtype))
    return out


# -- Study.sql -------------------------------------------------------------------------------
def test_sql_binds_named_parameters_without_formatting_them(study: Study):
    tricky = "it's'); DROP TABLE mentions; --"
    study.con.execute(
        "INSERT INTO mentions VALUES (1, 'nurse', 'nurse'), (2, 'nurse', 'nurses'), (3, ?, 'x')",
        [tricky],
    )
    study.con.execute(
        "INSERT INTO samples VALUES ('keyword', 'nurse', NULL, 1, 1, NULL), "
        "('no_indicators', 'nurse', NULL, 2, 1, NULL)"
    )
    rows = study.sql("select/50_summary", occupations=[tricky, "nurse", "pilot"]).fetchall()
    # in the order given; mentions counted per occupation, the keyword sample only
    assert rows == [(tricky, 1, 0), ("nurse", 2, 1), ("pilot", 0, 0)]
    assert study.table_exists("mentions")
    # ".sql" may be given too; the same file runs
    again = study.sql("select/50_summary.sql", occupations=["nurse"]).fetchall()
    assert again == [("nurse", 2, 1)]


def test_sql_binds_each_statement_of_a_multi_statement_file(study: Study):
    """subsets/cut.sql: two statements, each naming its own parameters (no splitter)."""
    study.con.execute(
        "INSERT INTO samples SELECT 'keyword', 'nurse', NULL, r, r::INTEGER, NULL "
        "FROM range(1, 6) t(r)"
    )
    study.con.execute(
        "INSERT INTO images (image_id, source, caption_id, path) "
        "SELECT 'train:' || r, 'training', r, 'x.png' FROM range(1, 6) t(r)"
    )
    study.con.execute(  # captions 1, 3, 4 labelled; 2 and 5 not
        "INSERT INTO labels VALUES ('train:1', 'agegender', 0.9, 'female', 0.5), "
        "('train:3', 'agegender', 0.1, 'male', 0.5), ('train:4', 'agegender', 0.8, 'female', 0.5)"
    )
    study.sql("analyze/labelled", classifier="agegender", threshold=0.5)
    study.sql("subsets/cut", n_occupation=2, n_prompt=9, unit="labelled_images", split=False)
    members = study.con.execute(
        "SELECT caption_id FROM subset_members WHERE member ORDER BY caption_id"
    ).fetchall()
    # the first two labelled candidates in rank order: 1 and 3
    assert members == [(1,), (3,)]
    targets = study.con.execute("SELECT DISTINCT target FROM subset_members").fetchall()
    assert targets == [(2,)]  # $n_occupation reached the first statement
    study.sql("subsets/cut", n_occupation=2, n_prompt=9, unit="captions", split=False)
    members = study.con.execute(
        "SELECT caption_id FROM subset_members WHERE member ORDER BY caption_id"
    ).fetchall()
    assert members == [(1,), (2,)]  # $unit reached the second: rank <= 2


def test_sql_unknown_file_names_it(study: Study):
    with pytest.raises(ValueError, match=r"corpus_audit/sql/no_such_query\.sql: no such SQL file"):
        study.sql("no_such_query")


def test_sql_wrong_parameters_name_the_file(study: Study):
    with pytest.raises(ValueError, match=r"corpus_audit/sql/select/50_summary\.sql.*missing.*occ"):
        study.sql("select/50_summary")
    with pytest.raises(
        ValueError, match=r"select/50_summary\.sql: parameters not in the file.*'n'"
    ):
        study.sql("select/50_summary", occupations=["nurse"], n=3)


# -- migrations ------------------------------------------------------------------------------
def test_migrations_are_numbered_and_cover_every_declared_table():
    from corpus_audit.core.catalogue import STAGES

    steps = migrations()
    assert [v for v, _ in steps] == list(range(1, len(steps) + 1))
    assert schema_version() == len(steps)
    con = duckdb.connect()
    from corpus_audit.core.store import sql_text

    for _, files in steps:
        for name in files:
            con.execute(sql_text(name))
    tables = set(_tables(con))
    for _, spec in STAGES.items():
        # analysis temp tables are not stored; every other declared table is in the schema
        assert set(spec.writes) <= tables, spec.name


def test_new_study_is_at_the_current_version(study: Study):
    rows = study.con.execute("SELECT version, files FROM schema_version").fetchall()
    assert [r[0] for r in rows] == list(range(1, schema_version() + 1))
    assert "schema/001_select.sql" in rows[0][1]
    assert study.migrate() == []  # nothing left to do on reopening
    study.close()
    again = Study.open(study.root)
    assert again.stored_version() == schema_version()
    again.close()


def _version0_study(root: Path) -> Path:
    """A study as the code before schema_version made it: the old schema text, executed."""
    root.mkdir(parents=True)
    write_config(StudyConfig(root=root))
    con = duckdb.connect(str(root / DB_NAME))
    con.execute(V0_SCHEMA.read_text(encoding="utf-8"))
    con.execute("INSERT INTO captions VALUES (7, 'a nurse at work', NULL, 'f.parquet', 3)")
    con.execute("INSERT INTO stage_runs (stage, status) VALUES ('select', 'done')")
    con.close()
    return root


def test_version0_study_opens_and_is_migrated_keeping_its_rows(tmp_path: Path):
    root = _version0_study(tmp_path / "old")
    con = duckdb.connect(str(root / DB_NAME))
    old_tables = _tables(con)
    con.close()
    assert "schema_version" not in old_tables
    study = Study.open(root)
    try:
        assert study.stored_version() == schema_version()
        new_tables = _tables(study.con)
        # the old tables keep their columns in their order; later migrations add tables, or
        # columns after the old ones (migration 9: human_labels' further answers)
        assert {t: new_tables[t][: len(cols)] for t, cols in old_tables.items()} == old_tables
        assert "schema_version" in new_tables
        assert study.con.execute("SELECT caption_id, text FROM captions").fetchall() == [
            (7, "a nurse at work")
        ]
        assert study.last_run("select")["status"] == "done"
    finally:
        study.close()


def test_version0_study_opens_read_only_without_changes(tmp_path: Path):
    root = _version0_study(tmp_path / "old")
    study = Study.open(root, read_only=True)
    try:
        assert study.stored_version() == 0
        assert not study.table_exists("schema_version")
    finally:
        study.close()


def test_current_and_version0_studies_have_the_same_schema(tmp_path: Path, study: Study):
    root = _version0_study(tmp_path / "old")
    old = Study.open(root)
    try:
        assert _tables(old.con) == _tables(study.con)
    finally:
        old.close()


def test_migrating_twice_changes_nothing(tmp_path: Path):
    """Idempotent migration files: a half-migrated study (the version row lost) migrates again."""
    root = _version0_study(tmp_path / "old")
    Study.open(root).close()
    con = duckdb.connect(str(root / DB_NAME))
    before = _tables(con)
    con.execute("DELETE FROM schema_version")
    con.close()
    study = Study.open(root)
    try:
        assert _tables(study.con) == before
        assert study.con.execute("SELECT count(*) FROM captions").fetchone() == (1,)
    finally:
        study.close()


def test_failed_migration_leaves_the_study_as_it_was(tmp_path: Path):
    """One transaction: when a migration fails, nothing of it stays."""
    root = _version0_study(tmp_path / "old")
    con = duckdb.connect(str(root / DB_NAME))
    con.execute("DROP TABLE corpus_files")  # the ALTER of migration 1 needs nothing; make
    con.execute("CREATE VIEW corpus_files AS SELECT 1 AS file_id")  # CREATE TABLE ... fail
    before = _tables(con)
    con.close()
    with pytest.raises(StudyError, match="study.duckdb"):
        Study.open(root)
    con = duckdb.connect(str(root / DB_NAME))
    try:
        assert _tables(con) == before
        assert "schema_version" not in before
    finally:
        con.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_study_from_a_newer_version_is_refused(tmp_path: Path, read_only: bool):
    made = Study.create(StudyConfig(root=tmp_path / "new"))
    future = schema_version() + 1
    made.con.execute("INSERT INTO schema_version VALUES (?, 'schema_999_x.sql', now())", [future])
    made.close()
    with pytest.raises(StudyError) as err:
        Study.open(tmp_path / "new", read_only=read_only)
    message = str(err.value)
    assert "\n" not in message
    assert f"schema version {future}" in message and "newer corpus_audit" in message
    assert DB_NAME in message
    # refused, not changed: the future row is still there
    con = duckdb.connect(str(tmp_path / "new" / DB_NAME), read_only=True)
    try:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (future,)
    finally:
        con.close()
