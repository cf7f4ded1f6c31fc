"""The ``select`` scan: one pass over the corpus as engine work units, written in unit order.

The shape of every heavy stage: plan the units, run them on the engine, write each result in
order. :func:`plan_units` inspects every file (columns checked, nothing read: errors come
before any row is read, naming the file) and lists its units, one per file or parquet row
group; :func:`scan_unit` reads one unit with the file's reader and arrow batches, matched
by the ``select.matcher`` that runs (:func:`scan_pieces`: the RE2 prefilter for ``duckdb``;
for ``hyperscan`` the multi-pattern database compiled once in the worker process, which also
returns the unit's mentions) and returns its candidate rows as one table; :func:`scan_units`
runs every unit on an engine (:meth:`~corpus_audit.backends.engines.base.Engine.map_tasks`,
one CPU task each: threads of this process on the ``local`` engine, Ray tasks on ``ray``)
and yields the results in unit order; :func:`scan_into` is the driver side: it inserts each
unit's candidates into ``_select_candidates`` with the stage's own SQL
(``sql/select/10_candidates.sql``; the mentions a ``hyperscan`` unit found with
``sql/select/15_matched.sql``), unit after unit, so the study database is written in
the same order by every engine. :func:`scan_on_engine` runs it on the study's configured
engine (``[engine]``).

Unit keys are ``(file_id, unit_index)``, ``unit_index`` counting the file's non-empty units
(parquet row groups) from 0. A unit's result is whole (not streamed in batches), so a
retried unit cannot add rows twice; its size is the rows that pass the prefilter (about 5 %
of a LAION row group), not the row group. See docs/scale.md.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.backends.corpus import (
    BATCH_SCHEMA,
    ColumnMap,
    CorpusFile,
    check_text_column,
    inspect_files,
    iter_clean_batches,
    resolve_columns,
)
from corpus_audit.backends.engines import stage_engine
from corpus_audit.backends.engines.base import Engine, Progress, Resources
from corpus_audit.core.errors import CorpusError
from corpus_audit.core.store import StageRun, Study, execute_sql
from corpus_audit.methods.matching import Matcher
from corpus_audit.methods.multimatch import ArrowMatcher, Found, arrow_matcher


# -- scanning --------------------------------------------------------------------------------
@dataclass
class Work:
    """One unit of work: a unit of ``file`` as its reader lists it (a parquet row group, a
    whole CSV or JSONL file) and the columns it is read with."""

    file: CorpusFile
    unit: Any
    columns: ColumnMap


@dataclass
class Piece:
    """One arrow batch of a unit: its counts, its candidate rows and, when the matcher found
    them in the batch (``hyperscan``), its mentions (:data:`MENTION_SCHEMA`) and unmapped
    matches."""

    file_id: int
    rows: int
    null_text: int
    bad_text: int
    candidates: pa.Table
    mentions: pa.Table | None = None
    unmapped: int = 0


@dataclass
class FileCounts:
    """Counts over the rows read from one file: every row, null or empty captions, captions
    with invalid UTF-8, and candidate rows (those that passed the prefilter)."""

    rows: int = 0
    null_text: int = 0
    bad_text: int = 0
    candidates: int = 0

    def add(self, piece: Piece | UnitScan) -> None:
        """Count one scanned batch (:class:`Piece`) or unit (:class:`UnitScan`)."""
        self.rows += piece.rows
        self.null_text += piece.null_text
        self.bad_text += piece.bad_text
        self.candidates += piece.candidates.num_rows


@dataclass
class ScanStats:
    """Counts of one pass over the corpus."""

    files: dict[int, FileCounts] = field(default_factory=dict)
    columns: dict[int, ColumnMap | None] = field(default_factory=dict)  # None: empty file
    seconds: float = 0.0
    unmapped: int = 0  # matches mapped to no form by the workers' matcher (hyperscan)

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.files.values())


MENTION_SCHEMA = pa.schema(
    [
        ("file_id", pa.int32()),
        ("row_in_file", pa.int64()),
        ("pos", pa.int64()),
        ("form", pa.string()),
        ("occupation", pa.string()),
    ]
)


class _Keeper:
    """The ``keep`` hook of :func:`iter_clean_batches` for a matcher that finds mentions:
    the mask of the rows it matched, its :class:`Found` kept for the batch just cleaned."""

    def __init__(self, finder: ArrowMatcher) -> None:
        self.finder = finder
        self.found: Found | None = None

    def __call__(self, text: pa.Array) -> pa.Array:
        self.found = self.finder.find(text)
        mask = np.zeros(len(text), dtype=bool)
        mask[self.found.keep] = True
        return pa.array(mask)


def _mentions(fid: int, table: pa.Table, found: Found, forms: tuple) -> pa.Table:
    """The mentions of one batch (:data:`MENTION_SCHEMA`), ``table`` holding its kept rows."""
    at = np.searchsorted(found.keep, found.mention_rows)  # index among the kept rows
    rows = table.column("row_in_file").take(pa.array(at, pa.int64()))
    idx = found.mention_forms.tolist()
    return pa.Table.from_arrays(
        [
            pa.array(np.full(len(at), fid, np.int32)),
            rows,
            pa.array(found.positions, pa.int64()),
            pa.array([forms[i][0] for i in idx], pa.string()),
            pa.array([forms[i][1] for i in idx], pa.string()),
        ],
        schema=MENTION_SCHEMA,
    )


@dataclass(frozen=True)
class ScanOptions:
    """How every unit is read and matched: ``batch_rows`` rows read at a time (>= 1), kept
    by the RE2 ``pattern`` (case-insensitive) when ``prefilter``, or by the lexicon's
    ``matcher`` of ``kind`` (``duckdb`` | ``hyperscan``; None: the pattern alone, duckdb)."""

    pattern: str
    prefilter: bool
    batch_rows: int
    matcher: Matcher | None = None
    kind: str = "duckdb"


def scan_pieces(work: Work, options: ScanOptions) -> Iterator[Piece]:
    """The batches of one unit (``options.batch_rows`` rows read at a time), with the file's
    id as first column: each filtered by the RE2 ``pattern`` (case-insensitive) when
    ``prefilter`` (``kind = "duckdb"``), or to the rows ``matcher``'s forms match, with their
    mentions, when ``kind = "hyperscan"`` (compiled once per process)."""
    matcher, kind, prefilter = options.matcher, options.kind, options.prefilter

    def keep(text: pa.Array) -> pa.Array:
        return pc.match_substring_regex(text, options.pattern, ignore_case=True)

    keeper = None
    if matcher is not None:  # the stage's path: the matcher interface, either kind
        keeper = _Keeper(arrow_matcher(matcher, kind, prefilter))
    elif kind != "duckdb":
        raise ValueError(f"matcher {kind!r} needs the lexicon's Matcher")
    fid = work.file.file_id
    hook = keeper if keeper is not None else keep if prefilter else None
    batches = iter_clean_batches(work.file, work.unit, work.columns, options.batch_rows, hook)
    for cb in batches:
        table = cb.table
        mentions, unmapped = None, 0
        found = keeper.found if keeper is not None else None
        if found is not None and found.mention_rows is not None:  # hyperscan: found here
            mentions = _mentions(fid, table, found, matcher.forms)
            unmapped = found.unmapped
        if keeper is not None:
            keeper.found = None  # this batch's, never the next one's
        table = table.add_column(0, "file_id", pa.array(np.full(table.num_rows, fid, np.int32)))
        yield Piece(fid, cb.rows, cb.null_text, cb.bad_text, table, mentions, unmapped)


_FLUSH_ROWS = 65_536  # candidate rows gathered before one INSERT (each query has a fixed cost)


def scan_on_engine(
    study: Study,
    files: list[CorpusFile],
    matcher: Matcher,
    run: StageRun,
    *,
    progress: bool,
    kind: str = "duckdb",
) -> ScanStats:
    """Fill the work tables: ``_select_forms`` with the lexicon forms, then
    ``_select_candidates`` on the study's engine (``[engine]``) with :func:`scan_into`: the
    same rows in the same order on every engine. The engine's description goes in the run's
    provenance. Raises CorpusError when every file is empty."""
    cfg = study.config
    con = study.con
    forms = pa.table(
        {"form": [f for f, _ in matcher.forms], "occupation": [o for _, o in matcher.forms]}
    )
    con.register("_select_forms_in", forms)
    con.execute("INSERT INTO _select_forms SELECT * FROM _select_forms_in")
    con.unregister("_select_forms_in")
    stats = scan_into(
        study.con,
        stage_engine(cfg.engine, run),
        files,
        matcher,
        text_column=cfg.corpus.text_column,
        url_column=cfg.corpus.url_column,
        key_column=cfg.corpus.key_column,
        prefilter=cfg.select.prefilter,
        batch_rows=cfg.select.batch_rows,
        progress=progress,
        kind=kind,
    )
    if stats.rows == 0:
        raise CorpusError(
            f"corpus: all {len(files)} corpus files are empty (0 rows), e.g. {files[0].path}"
        )
    return stats


class CandidateBuffer:
    """Candidate rows on their way into ``_select_candidates``: inserted (checked again by
    ``sql/select/10_candidates.sql``) once ``_FLUSH_ROWS`` have gathered, and at the end,
    in the order they were added (:func:`scan_into`)."""

    def __init__(self, con: Any, prefilter: bool, pattern: str) -> None:
        self.con, self.prefilter, self.pattern = con, prefilter, pattern
        self.tables: list[pa.Table] = []
        self.mentions: list[pa.Table] = []
        self.rows = 0

    def add(self, table: pa.Table, mentions: pa.Table | None = None) -> None:
        """Candidate rows (and, from a matcher that found them, their mentions)."""
        if mentions is not None and mentions.num_rows:
            self.mentions.append(mentions)
        if table.num_rows:
            self.tables.append(table)
            self.rows += table.num_rows
            if self.rows >= _FLUSH_ROWS:
                self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        self.con.register("_select_batch", pa.concat_tables(self.tables))
        try:
            execute_sql(
                self.con, "select/10_candidates", prefiltered=self.prefilter, pattern=self.pattern
            )
        finally:
            self.con.unregister("_select_batch")
        if self.mentions:
            self.con.register("_select_batch_mentions", pa.concat_tables(self.mentions))
            try:
                execute_sql(self.con, "select/15_matched")
            finally:
                self.con.unregister("_select_batch_mentions")
        self.tables, self.mentions, self.rows = [], [], 0


UnitKey = tuple[int, int]  # (file_id, index of the unit within its file)
CANDIDATE_SCHEMA = pa.schema([("file_id", pa.int32()), *BATCH_SCHEMA])


@dataclass
class UnitScan:
    """What one unit gives back: counts over all its rows and its candidate rows.

    ``rows`` counts every row read, ``null_text`` null or empty captions, ``bad_text``
    captions with invalid UTF-8; ``candidates`` (:data:`CANDIDATE_SCHEMA`, row order of the
    file) holds the rows whose caption passed the prefilter (every row without it).
    ``worker`` (``host:pid``) and ``seconds`` (wall time of the unit in its worker) are for
    throughput reports only; they never reach a table. ``mentions``
    (:data:`MENTION_SCHEMA`) and ``unmapped``: what the ``hyperscan`` matcher found in the
    unit (None with ``duckdb``: the SQL extracts them on the driver).
    """

    file_id: int
    unit: int
    rows: int
    null_text: int
    bad_text: int
    candidates: pa.Table
    worker: str = ""
    seconds: float = 0.0
    mentions: pa.Table | None = None
    unmapped: int = 0


@dataclass
class UnitPlan:
    """The units of a corpus and what was learnt about its files while planning them."""

    units: list[tuple[UnitKey, Work]]
    columns: dict[int, ColumnMap | None]  # None: an empty file (0 bytes or no columns)
    known_rows: dict[int, int | None]  # from the file's metadata; None when unknown (CSV...)


def plan_units(
    files: list[CorpusFile], text_column: str = "", url_column: str = "", key_column: str = ""
) -> UnitPlan:
    """Inspect every file (no rows read) and list its units of work, in file order.

    Raises CorpusError naming the file for a missing column, a caption column that is not
    text (parquet, saved datasets: known from the schema) or an unreadable file.
    """
    plan = UnitPlan([], {}, {})
    for f, info in zip(files, inspect_files(files), strict=True):
        plan.known_rows[f.file_id] = info.rows
        plan.columns[f.file_id] = None
        if info.empty:
            continue
        columns = resolve_columns(f.path, info.columns, text_column, url_column, key_column)
        if columns.text in info.types:  # parquet, HF: refused before any row is read
            check_text_column(f.path, columns.text, info.types[columns.text])
        plan.columns[f.file_id] = columns
        if info.rows != 0:
            plan.units += [((f.file_id, i), Work(f, u, columns)) for i, u in enumerate(info.units)]
    return plan


def scan_unit(work: Work, index: int, options: ScanOptions) -> UnitScan:
    """Read unit ``index`` of its file (:func:`scan_pieces`: reader, cleaning, matcher) into
    one result."""
    t0 = time.perf_counter()
    counts = FileCounts()
    tables, mentions, unmapped = [], [], 0
    for piece in scan_pieces(work, options):
        counts.add(piece)
        if piece.candidates.num_rows:
            tables.append(piece.candidates)
        if piece.mentions is not None:
            mentions.append(piece.mentions)
            unmapped += piece.unmapped
    candidates = (
        pa.concat_tables(tables).cast(CANDIDATE_SCHEMA)
        if tables
        else CANDIDATE_SCHEMA.empty_table()
    )
    found = None
    if options.kind != "duckdb":
        found = pa.concat_tables(mentions) if mentions else MENTION_SCHEMA.empty_table()
    return UnitScan(
        work.file.file_id,
        index,
        counts.rows,
        counts.null_text,
        counts.bad_text,
        candidates,
        f"{socket.gethostname()}:{os.getpid()}",
        time.perf_counter() - t0,
        found,
        unmapped,
    )


def _scan_keyed(args: tuple[Work, int], options: ScanOptions) -> UnitScan:
    """The engine's task for one ``(work, index)`` (``options`` ride with it, in a
    ``partial``, to the workers)."""
    work, index = args
    return scan_unit(work, index, options)


def scan_units(
    engine: Engine,
    plan: UnitPlan,
    matcher: Matcher,
    *,
    prefilter: bool = True,
    batch_rows: int = 262_144,
    progress: bool = True,
    kind: str = "duckdb",
) -> Iterator[tuple[UnitKey, UnitScan]]:
    """Every unit of ``plan`` scanned by ``engine`` (one CPU task each), in unit order, with
    the matcher ``kind`` (``duckdb`` | ``hyperscan``: then compiled in each worker)."""
    options = ScanOptions(matcher.pattern, prefilter, batch_rows, matcher, kind)
    fn = partial(_scan_keyed, options=options)
    units = [(key, (work, key[1])) for key, work in plan.units]
    yield from engine.map_tasks(
        fn,
        units,
        resources=Resources(num_cpus=1),
        progress=Progress("select", unit="unit", enabled=progress),
    )


def scan_into(
    con: Any,
    engine: Engine,
    files: list[CorpusFile],
    matcher: Matcher,
    *,
    text_column: str = "",
    url_column: str = "",
    key_column: str = "",
    prefilter: bool = True,
    batch_rows: int = 262_144,
    progress: bool = True,
    on_unit: Callable[[UnitKey, UnitScan], None] | None = None,
    kind: str = "duckdb",
) -> ScanStats:
    """Read every file once on ``engine`` and fill ``_select_candidates`` (which must exist)
    unit by unit, in unit order; return the counts per file.

    Raises CorpusError (naming the file) for unreadable files or missing columns; all files
    are inspected (:func:`plan_units`) before any row is read, so such errors come fast.
    ``on_unit`` (optional) sees every unit's result before it is inserted (throughput
    reports). ``kind`` ``hyperscan`` also fills ``_select_found`` with the mentions the
    workers found (``sql/select/15_matched.sql``); ``stats.unmapped`` counts what mapped to
    no form.
    """
    plan = plan_units(files, text_column, url_column, key_column)
    stats = ScanStats({f.file_id: FileCounts() for f in files}, dict(plan.columns))
    # select's own batched INSERT (rows a matcher kept are not matched again in SQL)
    pending = CandidateBuffer(con, prefilter or kind != "duckdb", matcher.pattern)
    t0 = time.perf_counter()
    for (file_id, _), scan in scan_units(
        engine,
        plan,
        matcher,
        prefilter=prefilter,
        batch_rows=batch_rows,
        progress=progress,
        kind=kind,
    ):
        if on_unit is not None:
            on_unit((file_id, scan.unit), scan)
        stats.files[file_id].add(scan)
        stats.unmapped += scan.unmapped
        pending.add(scan.candidates, scan.mentions)
    pending.flush()
    # Arrow's pool (mimalloc) keeps what the scan's batches freed, for reuse; given back to
    # the OS here (~3 ms), before the stage's DuckDB steps allocate theirs: at 10 M rows the
    # stage's peak RSS drops from 800-860 MB to 640-670 MB (bench_select.py). After every
    # unit instead it costs ~10 % of the scan in page faults.
    pa.default_memory_pool().release_unused()
    stats.seconds = time.perf_counter() - t0
    return stats
