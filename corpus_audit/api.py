"""The Python API of corpus_audit: what the ``corpus-audit`` command does, from a notebook.

Everything here is re-exported by the package (``from corpus_audit import Study``) and
documented in ``docs/api.md``. It is built on the functions the CLI's handlers call
(``init_study``, the stage functions, ``run_all``, ``status``, ``set_config``, the export
command), so a study made here is the same study the CLI makes, and either can continue it.

- :class:`Study`: create or open a study (a context manager that closes its database), set
  config values, run one stage, several or all, read its status as a DataFrame, read any result
  table as a pandas DataFrame or an Arrow table, draw the report's figures as matplotlib
  figures, import images made elsewhere, export the tables with a manifest.
- :func:`amplify`: the amplification measure from plain %female tables (no study), e.g. the
  paper's published ones (:func:`published_tables`, :func:`published_table3`).
- :func:`analyze_texts`: who and how of any text corpus (``corpus-audit texts``).
- :func:`arena_leaderboard`: Elo / Bradley-Terry ratings from an arena's published votes
  (by default the BAFIS arena's, bundled).
- :func:`plugins`: the plugins installed distributions add through entry points.

Progress bars are ``tqdm.auto`` where this module draws them (widgets in Jupyter). Messages go
to the ``corpus_audit`` :mod:`logging` logger (:data:`logger`: a stage's counts, drop reasons
and notes at INFO), which has no handler of its own: route it as you like
(``logging.basicConfig(level=logging.INFO)``). Errors a user can fix raise
:class:`CorpusAuditError` (one line naming the file or key and the problem).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import corpus_audit
from corpus_audit.backends.classifiers import ClassifierBackend as ClassifierBackend
from corpus_audit.commands import demo as bundled
from corpus_audit.commands.amplify import AmplifyOptions, amplify_wide, check_options
from corpus_audit.commands.export import ExportResult, export_tables, read_table, result_tables
from corpus_audit.commands.plugins import PluginStatus, plugin_statuses
from corpus_audit.commands.texts import TextColumns, run_texts
from corpus_audit.core.catalogue import STAGE_NAMES
from corpus_audit.core.config import load_config
from corpus_audit.core.config_edit import set_values
from corpus_audit.core.errors import CorpusAuditError as CorpusAuditError
from corpus_audit.core.errors import StudyError, printable
from corpus_audit.core.extras import require_stages
from corpus_audit.core.fileio import entries_now, remove_new
from corpus_audit.core.kinds import LLM_LABOR_STATS
from corpus_audit.core.pipeline import init_study, run_all, stage_function, status, study_kind
from corpus_audit.core.preset import load_preset, resolve
from corpus_audit.core.registry import Plugin as Plugin
from corpus_audit.core.snapshot import close_reader, open_for_reading
from corpus_audit.core.store import StageRun
from corpus_audit.core.store import Study as CoreStudy
from corpus_audit.core.study_lock import run_lock
from corpus_audit.methods.preferences.leaderboard import leaderboard
from corpus_audit.report import context
from corpus_audit.report.figures import scatter_grid
from corpus_audit.report.labour_figure import FIGURE_NAME as LABOUR_FIGURE
from corpus_audit.report.labour_figure import labour_figure, labour_rows
from corpus_audit.report.leaderboard_page import arena_votes
from corpus_audit.report.who_how import decile_figure_name
from corpus_audit.report.who_how_figures import decile_figure
from corpus_audit.stages.import_images import import_images

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from matplotlib.figure import Figure

# the public names are listed once, in the package (which imports this module lazily); a
# name imported here only to be re-exported is written ``X as X``
__all__ = list(corpus_audit.__all__)

#: the package's logger; no handler of its own (module docstring)
logger = logging.getLogger("corpus_audit")

#: every stage, in catalogue order (``corpus-audit --help`` lists them the same way)
STAGES: tuple[str, ...] = tuple(STAGE_NAMES)

StudyKind = Literal["amplification", "pst", "llm", "images"]


F = TypeVar("F", bound=Callable[..., Any])


def _listed(name: str, value: Any, one: tuple[type, ...], refused: tuple[type, ...], what: str):
    """``value``, one item (an instance of ``one``) or an iterable of them, as a list; a
    :class:`StudyError` naming the argument otherwise (a single str is never read character by
    character; ``refused`` types are no list either)."""
    if isinstance(value, one):
        return [value]
    if value is None or isinstance(value, refused):
        raise StudyError(
            f"{name}: expected a {what} or a list of {what}s, not {type(value).__name__}"
        )
    try:
        items = list(value)
    except TypeError:
        raise StudyError(
            f"{name}: expected a {what} or a list of {what}s, not {type(value).__name__}"
        ) from None
    for i, item in enumerate(items):
        if not isinstance(item, one):
            raise StudyError(f"{name}[{i}]: expected a {what}, not {type(item).__name__}")
    return items


def _paths(name: str, value: Any) -> list[str]:
    """``value``, one path or an iterable of paths (str or ``os.PathLike``), as a list of
    str; a :class:`StudyError` naming the argument otherwise."""
    items = _listed(name, value, (str, os.PathLike), (bytes, Mapping), "path")
    return [str(os.fspath(item)) for item in items]


def _names(name: str, value: Any) -> list[str]:
    """``value``, one name or an iterable of names, as a list of str (argument named)."""
    return _listed(name, value, (str,), (bytes, Mapping, os.PathLike), "name")


def _typed(name: str, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """``value`` when it is a ``kind`` (a bool is not an int), else a :class:`StudyError`
    naming the argument."""
    if isinstance(value, kind) and not (isinstance(value, bool) and bool not in _tuple(kind)):
        return value
    raise StudyError(f"{name}: expected {what}, not {type(value).__name__}")


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _one_thread(method: F) -> F:
    """Guard a :class:`Study` method: one thread at a time per handle. A handle holds one
    DuckDB connection, which serves one query at a time; a second thread gets a
    :class:`StudyError` at once instead of DuckDB's "connection is busy" or a run lock
    refusing its own process. The thread inside may call other guarded methods."""

    @functools.wraps(method)
    def guarded(self: Study, *args: Any, **kwargs: Any) -> Any:
        if not self._busy.acquire(blocking=False):
            raise StudyError(
                f"{printable(self.root)}: this Study handle is in use by another thread "
                f"({self._doing}); use a handle from one thread at a time (wait for the "
                "other call, or take turns with a lock)"
            )
        outer, self._doing = self._doing, method.__name__
        try:
            return method(self, *args, **kwargs)
        finally:
            self._doing = outer
            self._busy.release()

    return guarded  # type: ignore[return-value]


def _kind_overrides(
    overrides: dict[str, dict[str, Any]], kind: str, has_corpus: bool, models: list[str]
) -> None:
    """Add what a ``kind`` study sets to ``overrides`` (section -> key -> value); refuse a
    corpus for an ``images`` study, models for another kind than ``llm``, and no corpus for an
    ``amplification`` study."""
    if kind == "pst":
        overrides.setdefault("pst", {})["enabled"] = True
    elif kind == "llm":  # docs/who_vs_how.md: the texts come from llm.models
        overrides.setdefault("llm", {}).update({"enabled": True, "models": list(models)})
        overrides.setdefault("texts", {})["source"] = "llm"
        overrides.setdefault("lexicon", {})["labor_stats"] = LLM_LABOR_STATS
    elif kind == "images" and has_corpus:
        raise StudyError(
            "create: a kind='images' study audits a model without its training data and "
            "reads no corpus: give no corpus (docs/model_only.md)"
        )
    elif kind not in ("amplification", "images"):
        raise StudyError(f"create: kind {kind!r} is not amplification, pst, llm or images")
    if models and kind != "llm":
        raise StudyError("create: models are for a kind='llm' study (llm.models)")
    if not has_corpus and kind == "amplification":
        raise StudyError("create: give a corpus (only a pst or llm study may go without one)")


class Study:
    """One study: a directory with ``study.toml`` and ``study.duckdb``.

    Make one with :meth:`create` or :meth:`open`; use it in a ``with`` block (or call
    :meth:`close`) so the database is released: while a handle is open, the CLI cannot open
    the same study (DuckDB lets one process write a database at a time).
    """

    def __init__(self, core: CoreStudy, *, snapshot: Path | None = None, read_only: bool = False):
        """Wrap an open core study; use :meth:`create` or :meth:`open` instead."""
        self._core: CoreStudy | None = core
        self._root = core.root
        self._snapshot = snapshot  # the temporary copy a read-only handle reads, if any
        self._read_only = read_only or snapshot is not None
        self._busy = threading.RLock()  # _one_thread: one thread at a time
        self._doing = ""  # the guarded call in progress

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        root: str | Path,
        corpus: Iterable[str | Path] = (),
        *,
        kind: StudyKind = "amplification",
        preset: str | None = None,
        settings: Mapping[str, Any] | None = None,
        models: Sequence[str] = (),
        overwrite: bool = False,
    ) -> Study:
        """Create a study directory, as ``corpus-audit init`` does.

        ``corpus``: corpus files, directories or globs (stored absolute; optional for a
        ``pst`` or ``llm`` study, none for ``images``). ``kind``: ``amplification``
        (default), ``pst`` (the Paired Stereotype Test), ``llm`` (who-vs-how on texts
        ``models`` write: ``transformers:<path>`` / ``openai:<model>``) or ``images`` (a model
        audited from its images alone, no corpus: the lexicon's prompts are written at once,
        docs/model_only.md). ``preset``: start from a preset's
        settings (``"paper"``). ``settings``: ``{"section.key": value}``, applied last and
        validated like ``study.toml`` (see :meth:`set`).
        """
        corpus = _paths("create: corpus", corpus)
        models = _names("create: models", models)
        _typed("create: root", root, (str, os.PathLike), "a path")
        if preset is not None:
            _typed("create: preset", preset, str, "a preset name")
        if settings is not None:
            _typed("create: settings", settings, Mapping, 'a mapping ({"section.key": value})')
        overwrite = _typed("create: overwrite", overwrite, bool, "True or False")
        overrides: dict[str, dict[str, Any]] = {}
        if preset:
            overrides, notes = resolve(load_preset(preset))
            for note in notes:
                logger.info("%s", note)
        _kind_overrides(overrides, kind, bool(corpus), models)
        root = Path(root)
        before = entries_now(root)
        core = init_study(root, corpus, overrides=overrides, overwrite=overwrite)
        study = cls(core)
        try:
            if settings:
                study.set(settings)
            if kind == "images":  # its prompts at once (as `init --kind images`)
                study.run("prompts", progress=False)
        except BaseException:  # a bad setting or lexicon: leave no study behind, as a failed init
            study.close()
            remove_new(root, before)
            raise
        return study

    @classmethod
    def open(cls, root: str | Path, *, read_only: bool = False) -> Study:
        """Open an existing study (its directory or its ``study.toml``).

        ``read_only=True``: for reading (:meth:`status`, :meth:`tables`, :meth:`table`,
        :meth:`query`, :meth:`summary`, :meth:`export`) while another process may hold the
        study: opened read-only, or, when another process holds it, a snapshot copy of what it
        had committed (:mod:`corpus_audit.core.snapshot`; docs/api.md). Runs and settings are
        refused on such a handle."""
        _typed("open: root", root, (str, os.PathLike), "a path")
        if not read_only:
            return cls(CoreStudy.open(root))

        core, folder = open_for_reading(root)
        return cls(core, snapshot=folder, read_only=True)

    @_one_thread
    def close(self) -> None:
        """Release the database (the handle is not used afterwards)."""
        if self._core is not None:
            core, self._core = self._core, None
            close_reader(core, self._snapshot)
            self._snapshot = None

    @property
    def read_only(self) -> bool:
        """Whether this handle only reads (``open(read_only=True)``)."""
        return self._read_only

    def _writable(self, what: str) -> CoreStudy:
        core = self.core
        if self._read_only:
            raise StudyError(
                f"{printable(self.root)}: {what} needs a handle that may write; this one was "
                "opened with read_only=True (Study.open(root) to write)"
            )
        return core

    def __enter__(self) -> Study:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._core is None:
            return f"Study({str(self.root)!r}, closed)"
        info = self.summary()
        stages = info["stages"]
        parts = [f"{k} {', '.join(v)}" for k, v in stages.items() if v and k != "not run"]
        rows = ", ".join(f"{t} {n:,}" for t, n in list(info["rows"].items())[:6])
        more = len(info["rows"]) - 6
        return (
            f"Study({str(self.root)!r}, {info['kind']}{', read-only' if self.read_only else ''}; "
            f"stages: {'; '.join(parts) or 'none run'}; models: "
            f"{', '.join(info['models']) or 'none'}; rows: {rows or 'none'}"
            f"{f' (+{more} tables)' if more > 0 else ''})"
        )

    def _repr_html_(self) -> str:
        """The notebook's view: kind, stages by state, models, row counts (escaped)."""
        from html import escape

        if self._core is None:
            return f"<p>Study <code>{escape(str(self.root))}</code> (closed)</p>"
        info = self.summary()
        stage_rows = "".join(
            f"<tr><th>{escape(state)}</th><td>{escape(', '.join(names) or '-')}</td></tr>"
            for state, names in info["stages"].items()
        )
        table_rows = "".join(
            f"<tr><td>{escape(t)}</td><td style='text-align:right'>{n:,}</td></tr>"
            for t, n in info["rows"].items()
        )
        return (
            f"<div><p><b>Study</b> <code>{escape(str(self.root))}</code>: "
            f"{escape(info['kind'])}{' (read-only)' if self.read_only else ''}</p>"
            f"<table>{stage_rows}<tr><th>models</th>"
            f"<td>{escape(', '.join(info['models']) or '-')}</td></tr></table>"
            f"<table><tr><th>table</th><th>rows</th></tr>{table_rows}</table></div>"
        )

    def summary(self) -> dict[str, Any]:
        """What the study holds: ``kind``; ``stages`` (``done``, ``partial``, ``stale``: done
        but its config or inputs changed since, ``not run``: lists of stage names);
        ``models`` (generators and classifiers in its config); ``rows`` (row count per
        non-empty result table, ints)."""
        core = self.core
        stages: dict[str, list[str]] = {"done": [], "partial": [], "stale": [], "not run": []}
        for s in status(core):
            if s.status.startswith("partial"):
                stages["partial"].append(s.stage)
            elif not s.done:
                stages["not run"].append(s.stage)
            elif "changed since" in (s.note or ""):
                stages["stale"].append(s.stage)
            else:
                stages["done"].append(s.stage)
        cfg = core.config
        models = [*cfg.generate.models, *getattr(cfg.llm, "models", [])]
        models.append(f"classifier:{cfg.label.classifier}")
        rows = {t: core.count(t) for t in result_tables()}  # the schema's names
        return {
            "kind": study_kind(cfg),
            "stages": stages,
            "models": [str(m) for m in models],
            "rows": {t: n for t, n in rows.items() if n > 0},
        }

    @property
    def core(self) -> CoreStudy:
        """The underlying :class:`corpus_audit.core.store.Study` (for a stage function or a
        backend that takes one); :class:`StudyError` once the handle is closed."""
        if self._core is None:
            raise StudyError(f"{printable(self.root)}: this Study handle is closed")
        return self._core

    @property
    def root(self) -> Path:
        """The study directory."""
        return self._root

    # -- config --------------------------------------------------------------------------------
    @property
    def config(self) -> dict[str, dict[str, Any]]:
        """The effective config: ``{section: {key: value}}``, defaults filled in (a copy)."""
        return self.core.config.to_dict()

    @_one_thread
    def set(self, settings: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
        """Change settings in ``study.toml``: ``{"label.classifier": "clip", "label.threshold":
        0.8}``. Validated all together like a stage loads them (a bad value is a
        :class:`~corpus_audit.core.errors.ConfigError` naming the key and the file is left as
        it was); returns ``(key, old, new)`` per setting, as ``corpus-audit config set``."""
        core = self._writable("set")
        if not isinstance(settings, Mapping):
            raise StudyError(
                f"set: settings is {type(settings).__name__}, not a mapping "
                '({"section.key": value})'
            )
        changes = set_values(core.root, dict(settings))
        core.config = load_config(core.root)
        for key, old, new in changes:
            logger.info("%s: %r -> %r", key, old, new)
        return changes

    # -- running -------------------------------------------------------------------------------
    @_one_thread
    def run(
        self,
        stage: str | Sequence[str] | None = None,
        *,
        until: str | None = None,
        progress: bool = True,
    ) -> list[StageRun]:
        """Run ``stage`` (a name of :data:`STAGES`, or several in the given order), or every
        stage of the study's kind in order up to ``until`` (as ``corpus-audit run``); each
        skips finished work. Returns the runs (counts, drop reasons, summary, notes), also
        logged at INFO."""
        core = self._writable("run")
        core.config = load_config(core.root)  # another handle or the CLI may have changed it
        progress = _typed("run: progress", progress, bool, "True or False")
        if until is not None:
            _typed("run: until", until, str, "a stage name")
        if stage is None:
            runs = run_all(core, until=until, progress=progress)
        else:
            if until is not None:
                raise StudyError("run: give a stage or until, not both")
            names = _names("run: stage", stage)
            for name in names:
                if name not in STAGE_NAMES:
                    raise StudyError(f"unknown stage {name!r} (stages: {', '.join(STAGES)})")
            require_stages(names)  # a missing library: one line before anything is written
            with run_lock(core.root):  # no `config set` between two of the stages
                runs = [stage_function(name)(core, progress=progress) for name in names]
        for run in runs:
            _log_run(run)
            _summary_frame(run)
        return runs

    def report(self, *, progress: bool = False) -> Path:
        """Render the study's report (``report``; ``pst_report`` in a PST study) and return
        the page's path (``<study>/report/report.html``, ``<study>/report/pst.html``)."""
        name = "pst_report" if study_kind(self.core.config) == "pst" else "report"
        (run,) = self.run(name, progress=progress)
        for path in (run.provenance.get("report_path"), run.outputs.get("report")):
            if path:
                return Path(path)
        page = self.root / "report" / ("pst.html" if name == "pst_report" else "report.html")
        if not page.is_file():
            raise StudyError(f"{printable(page)}: the report was not written ({name})")
        return page

    @_one_thread
    def import_images(
        self, sources: Iterable[str | Path], *, model: str | None = None, strict: bool = False
    ) -> StageRun:
        """Register images made elsewhere as the study's generated images, as ``corpus-audit
        import-images``: a CSV/JSONL manifest, a ``<prompt>/<n>.png`` folder or a BAFIS
        ``metadata.json``; ``model`` names the model (needed by the folder layout)."""
        core = self._writable("import_images")
        core.config = load_config(core.root)
        if model is not None:
            _typed("import_images: model", model, str, "a model name")
        strict = _typed("import_images: strict", strict, bool, "True or False")
        run = import_images(
            core, _paths("import_images: sources", sources), model=model, strict=strict
        )
        _log_run(run)
        return _summary_frame(run)

    # -- reading -------------------------------------------------------------------------------
    @_one_thread
    def status(self) -> pd.DataFrame:
        """Per stage, as ``corpus-audit status``: ``stage, status, done, rows_in, rows_out,
        dropped`` (``{reason: count}``), ``finished_at`` (UTC) and ``note``."""
        import pandas as pd

        columns = ["stage", "status", "done", "rows_in", "rows_out", "dropped", "finished_at"]
        rows = [
            {
                "stage": s.stage,
                "status": s.status,
                "done": s.done,
                "rows_in": s.rows_in,
                "rows_out": s.rows_out,
                "dropped": dict(s.dropped),
                "finished_at": s.finished_at,
                "note": s.note,
            }
            for s in status(self.core)
        ]
        frame = pd.DataFrame(rows, columns=[*columns, "note"])
        for column in ("rows_in", "rows_out"):  # counts: integers, <NA> where not run
            frame[column] = frame[column].astype("Int64")
        return frame

    @_one_thread
    def tables(self, *, non_empty: bool = False) -> list[str]:
        """The study's result tables (every table the schema makes but the bookkeeping ones),
        sorted; ``non_empty``: only those holding rows."""
        names = result_tables()
        if non_empty:
            names = [t for t in names if self.core.count(t) > 0]  # the schema's names
        return names

    @_one_thread
    def table(self, name: str, *, arrow: bool = False) -> pd.DataFrame | pa.Table:
        """Result table ``name`` (one of :meth:`tables`), rows sorted by all columns: a pandas
        DataFrame, or an Arrow table with ``arrow=True`` (types exactly as stored)."""
        _typed("table: name", name, str, "a table name")
        known = self.tables()
        if name not in known:
            import difflib

            near = difflib.get_close_matches(str(name), known, n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise StudyError(
                f"unknown table {printable(str(name))!r}: not a result table{hint}; "
                "study.tables() lists them"
            )
        data = read_table(self.core, name)
        return data if arrow else data.to_pandas()

    @_one_thread
    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None):
        """The rows of one read-only SQL statement (a ``SELECT``, ``WITH ... SELECT``,
        ``SHOW`` ...) over the study's tables, as a pandas DataFrame. Values go in ``params``
        (``?`` or ``$name`` placeholders), never into the SQL text. A statement that would
        write (INSERT, UPDATE, DELETE, CREATE, DROP, COPY, ATTACH, SET ...) or more than one
        statement is refused with :class:`StudyError`; the query runs in a transaction that
        is rolled back. Table names: :meth:`tables`."""
        import duckdb

        core = self.core
        if not isinstance(sql, str) or not sql.strip():
            raise StudyError("query: give one SQL statement as a string")
        try:
            statements = core.con.extract_statements(sql)
        except duckdb.Error as exc:
            raise StudyError(f"query: {printable(str(exc).splitlines()[0])}") from None
        if len(statements) != 1:
            raise StudyError(f"query: one statement at a time ({len(statements)} given)")
        kind = statements[0].type
        if kind.name not in READ_STATEMENTS:
            raise StudyError(
                f"query: {kind.name} statements are refused (read-only: SELECT and the like); "
                "use study.run / study.set to change a study"
            )
        cur = core.con.cursor()
        try:
            cur.execute("BEGIN TRANSACTION")
            try:
                frame = cur.execute(sql, params if params is not None else []).df()
            finally:
                cur.execute("ROLLBACK")
        except duckdb.Error as exc:
            message = printable(str(exc).strip().splitlines()[0])
            hint = "; study.tables() lists the tables" if "does not exist" in message else ""
            raise StudyError(f"query: {message}{hint}") from None
        finally:
            cur.close()
        return frame

    @_one_thread
    def figures(self) -> dict[str, Figure]:
        """The study report's figures its data allows, as matplotlib figures by file name
        (``scatter_<model>``, ``amplification_<model>``, ``indicators``,
        ``indicator_correlation``, ``similarity``, ``who_deciles_<labels>``,
        ``generated_vs_labour``); empty when no stage has produced them."""
        core = self.core
        ctx = {
            "results": context.results_section(core),
            "indicators": context.indicators_section(core),
            "similarity": context.similarity_section(core),
        }
        out = {}
        for kind, args in context.figure_jobs(core, ctx):
            fig, name, _title = context.draw_figure(kind, args, ctx)
            out[name] = fig
        out.update(self._who_how_figures())
        labour = labour_figure(labour_rows(core), confidence=core.config.analysis.confidence)
        if labour is not None:  # generated vs labour %female (a model-only audit and others)
            out[LABOUR_FIGURE] = labour
        return out

    def _who_how_figures(self) -> dict[str, Figure]:
        """The who/how decile figures (``who_deciles_[<model>_]<labels>``), as the report."""
        import pandas as pd

        if "texts_deciles" not in self.tables(non_empty=True):
            return {}
        deciles = self.table("texts_deciles")
        deciles["model"] = deciles["model"].fillna("")
        out = {}
        for (model, labels), frame in deciles.groupby(["model", "labels"], sort=True):
            what = "associated texts" if labels == "association" else "specified texts"
            name = decile_figure_name(model, labels)
            frame = pd.DataFrame(frame).drop(columns="model").sort_values("decile")
            fig = decile_figure(frame, what)
            if fig is not None:  # None: no occupation in any decile, nothing drawn
                out[name] = fig
        return out

    @_one_thread
    def export(
        self,
        out: str | Path | None = None,
        *,
        format: Literal["parquet", "csv"] = "parquet",
        tables: Sequence[str] | None = None,
        allow_partial: bool = False,
        include_empty: bool = False,
    ) -> ExportResult:
        """Write the result tables (or ``tables``) to ``out`` (default ``<study>/export``)
        with ``manifest.json``, as ``corpus-audit export`` (atomic as a whole; tables without
        rows left out unless named or ``include_empty``; a partial stage's tables refused
        unless ``allow_partial``)."""
        if out is not None:
            _typed("export: out", out, (str, os.PathLike), "a path")
        _typed("export: format", format, str, "parquet or csv")
        core = self.core
        core.config = load_config(core.root)
        result = export_tables(
            core,
            Path(out) if out is not None else None,
            fmt=format,
            tables=_names("export: tables", tables) if tables else None,
            allow_partial=allow_partial,
            include_empty=include_empty,
        )
        logger.info("exported %d tables to %s", len(result.rows), result.out_dir)
        return result


# the statement kinds :meth:`Study.query` runs (DuckDB's StatementType names)
READ_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "RELATION"})


def _summary_frame(run: StageRun) -> StageRun:
    """The run with its ``summary`` rows as a pandas DataFrame (the API's form)."""
    import pandas as pd

    if not isinstance(run.summary, pd.DataFrame):
        run.summary = pd.DataFrame(run.summary)  # type: ignore[assignment]
    return run


def _log_run(run: StageRun) -> None:
    state = "skipped (nothing to do)" if run.skipped else "done"
    logger.info("[%s] %s: %s in, %s out", run.name, state, run.rows_in, run.rows_out)
    for reason, count in sorted(run.dropped.items()):
        logger.info("  dropped %d: %s", count, printable(reason))
    for message in run.messages:
        logger.info("  %s", printable(message))


# -- amplification from published tables ----------------------------------------------------------
@dataclass
class Amplification:
    """What :func:`amplify` computed: ``pairs`` (one row per model, occupation and prompt:
    training and generated %female, A in percentage points, excluded and why), ``summary``
    (per model and prompt: included, excluded, mean A with its interval, t and p) and the
    files it wrote (``amplification.csv``, ``summary.csv``, ``excluded.csv``, and the page
    with ``report=True``)."""

    pairs: pd.DataFrame
    summary: pd.DataFrame
    outputs: dict[str, str] = field(default_factory=dict)

    def scatter(self, model: str | None = None) -> Figure:
        """Training vs generated %female, one panel per prompt, for ``model`` (the first when
        None), with the amplification / de-amplification regions and excluded pairs."""
        models = list(dict.fromkeys(self.pairs["model"]))
        chosen = models[0] if model is None else model
        if chosen not in models:
            raise StudyError(f"scatter: no model {chosen!r} (models: {', '.join(models)})")
        part = self.pairs[self.pairs["model"] == chosen]
        prompts = list(dict.fromkeys(part["prompt"]))
        rows = [
            {
                "occupation": r.occupation,
                "training_pf": _number(r.training_pf),
                "generated_pf": _number(r.generated_pf),
                "excluded": str(r.excluded).lower() == "true",
                "template_id": r.prompt,
                "strategy": "",
            }
            for r in part.itertuples()
        ]
        return scatter_grid(chosen, rows, prompts, [""])


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if out != out else out


def amplify(
    tables: Mapping[str, str | Path],
    *,
    training_n: int | None = None,
    out: str | Path | None = None,
    replicates: int = 1000,
    seed: int = 0,
    report: bool = False,
) -> Amplification:
    """Amplification from wide %female tables, one per model (``{model: path}``; columns
    ``occupation, training, <prompt>...[, training_n, <prompt>_n]``), as ``corpus-audit
    amplify --table``. ``training_n``: the labelled images behind every training value of a
    table without counts (the paper's: 500). Results are written to ``out`` (default: a
    temporary folder, removed) and returned as DataFrames."""
    import tempfile

    import pandas as pd

    if not isinstance(tables, Mapping):
        raise StudyError(
            f"amplify: tables must be a mapping {{model: path}}, not {type(tables).__name__}"
        )
    named = []
    for name, path in tables.items():
        _typed("amplify: a model name in tables", name, str, "a str")
        _typed(f"amplify: tables[{name!r}]", path, (str, os.PathLike), "one path")
        named.append((name, Path(path)))
    options = AmplifyOptions(replicates=replicates, seed=seed)
    check_options(options, training_n=training_n)
    report = _typed("amplify: report", report, bool, "True or False")
    if out is not None:
        _typed("amplify: out", out, (str, os.PathLike), "a path")

    def compute(folder: Path) -> Amplification:
        run = amplify_wide(
            named,
            folder,
            training_n=training_n,
            options=options,
            report=report,
        )
        _log_run(run)
        pairs = pd.read_csv(folder / "amplification.csv", keep_default_na=False, na_values=[""])
        summary = pd.read_csv(folder / "summary.csv", keep_default_na=False, na_values=[""])
        outputs = dict(run.outputs) if out is not None else {}
        return Amplification(pairs, summary, outputs)

    if out is not None:
        return compute(Path(out))
    with tempfile.TemporaryDirectory(prefix="corpus_audit_amplify_") as tmp:
        return compute(Path(tmp))


def demo_corpus() -> dict[str, Path]:
    """The real caption corpora bundled with the package (``demo_data``, see its NOTICE.md):
    ``{"laion": LAION-400M 10k-row metadata sample, "coco": MS-COCO val2017 captions,
    "cc3m": Conceptual Captions validation captions}``, each a parquet file."""
    return {Path(p).name.split("_")[0].removesuffix("400m"): Path(p) for p in bundled.demo_corpus()}


def published_tables() -> dict[str, Path]:
    """The paper's published per-occupation %female tables bundled with the package
    (``demo_data/published``): ``{"Stable Diffusion 1.4": path, "Stable Diffusion 1.5":
    path}``; each training value is over 500 labelled images."""
    return dict(bundled.published_tables())


def published_table3() -> pd.DataFrame:
    """The paper's Table 3 (naive keyword sample): ``model, prompt, mean_A`` with the
    published mean amplification per prompt and their ``average``."""
    import pandas as pd

    rows = [
        {"model": model, "prompt": prompt, "mean_A": value}
        for model, prompts in bundled.published_table3().items()
        for prompt, value in prompts.items()
    ]
    return pd.DataFrame(rows, columns=["model", "prompt", "mean_A"])


# -- texts and arenas ------------------------------------------------------------------------------
def analyze_texts(
    files: Iterable[str | Path],
    out: str | Path,
    *,
    text_column: str = "",
    occupation_column: str = "",
    gender_column: str = "",
    format: str | None = None,
    progress: bool = True,
) -> Study:
    """Who and how (association, marked words, SRBS) of any text corpus, as ``corpus-audit
    texts``: creates or updates the study ``out`` and returns it open (its ``texts_*``
    tables hold the results)."""
    _typed("analyze_texts: out", out, (str, os.PathLike), "a path")
    root = Path(out)
    columns = TextColumns(text_column, occupation_column, gender_column, fmt=format)
    run = run_texts(_paths("analyze_texts: files", files), root, columns, progress=progress)
    _log_run(run)
    return Study.open(root)


def arena_votes_file() -> Path:
    """The BAFIS arena's published votes bundled with the package (``demo_data/bafis_arena``,
    licence and attribution in its README)."""
    return bundled.arena_votes_file()


def arena_leaderboard(
    files: Iterable[str | Path] | None = None,
    *,
    rounds: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Ratings per aspect, prompt language and model from arena vote files (BAFIS JSON or
    LMSYS-style; default: the bundled BAFIS votes): Elo in the given order with its interval
    over ``rounds`` shuffled orders, Bradley-Terry with its bootstrap interval, ranks from the
    intervals; sorted by aspect, language (``all`` first) and rank."""
    chosen = (
        [Path(f) for f in _paths("arena_leaderboard: files", files)]
        if files is not None
        else [arena_votes_file()]
    )
    return leaderboard(arena_votes(chosen), rounds=rounds, seed=seed, confidence=confidence)


def plugins() -> list[PluginStatus]:
    """Every plugin installed distributions declare (``corpus-audit plugins``), each imported
    to check it loads (``error`` is '' when it does)."""
    return plugin_statuses()
