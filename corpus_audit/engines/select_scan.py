"""The ``select`` scan as engine work units: one unit per corpus file or parquet row group.

This is the step ``select.scan_corpus`` runs in its thread pool today, cut at the unit
boundary so any engine can run it: :func:`plan_units` inspects every file (errors come before
any row is read, naming the file), :func:`scan_unit` reads one unit with the same reader,
the same RE2 prefilter and the same arrow batches (``select._scan_unit``) and returns its
candidate rows as one table, and :func:`scan_units` runs all units through an engine and
yields them in unit order. :func:`scan_into` is the driver side: it inserts each unit's
candidates into ``_select_candidates`` with the stage's own SQL (``select_10_candidates.sql``),
unit after unit, so the study database is written in the same order by every engine.

Unit keys are ``(file_id, unit_index)``, ``unit_index`` counting the file's non-empty units
(parquet row groups) from 0. A unit's result is whole (not streamed in batches), so a
retried unit cannot add rows twice; its size is the rows that pass the prefilter (about 5 %
of a LAION row group), not the row group.

Issue 11 will fold this into the ``select`` stage's steps; until then it imports the stage's
private ``_scan_unit``/``_Work`` (see docs/scale.md, "Wiring the stages").
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from corpus_audit.corpus import BATCH_SCHEMA, ColumnMap, CorpusFile, get_reader, resolve_columns
from corpus_audit.engines.base import Engine, Progress, Resources
from corpus_audit.select import (
    CandidateBuffer,
    FileCounts,
    Matcher,
    ScanStats,
    _scan_unit,
    _Work,
)

UnitKey = tuple[int, int]  # (file_id, index of the unit within its file)
CANDIDATE_SCHEMA = pa.schema([("file_id", pa.int32()), *BATCH_SCHEMA])


@dataclass
class UnitScan:
    """What one unit gives back: counts over all its rows and its candidate rows.

    ``rows`` counts every row read, ``null_text`` null or empty captions, ``bad_text``
    captions with invalid UTF-8; ``candidates`` (:data:`CANDIDATE_SCHEMA`, row order of the
    file) holds the rows whose caption passed the prefilter (every row without it).
    ``worker`` (``host:pid``) and ``seconds`` (wall time of the unit in its worker) are for
    throughput reports only; they never reach a table.
    """

    file_id: int
    unit: int
    rows: int
    null_text: int
    bad_text: int
    candidates: pa.Table
    worker: str = ""
    seconds: float = 0.0


@dataclass
class UnitPlan:
    """The units of a corpus and what was learnt about its files while planning them."""

    units: list[tuple[UnitKey, _Work]]
    columns: dict[int, ColumnMap | None]  # None: an empty file (0 bytes or no columns)
    known_rows: dict[int, int | None]  # from the file's metadata; None when unknown (CSV...)


def plan_units(
    files: list[CorpusFile], text_column: str = "", url_column: str = "", key_column: str = ""
) -> UnitPlan:
    """Inspect every file (no rows read) and list its units of work, in file order.

    Raises CorpusError naming the file for a missing column or an unreadable file.
    """
    plan = UnitPlan([], {}, {})
    for f in files:
        info = get_reader(f.format).inspect(Path(f.path))
        plan.known_rows[f.file_id] = info.rows
        plan.columns[f.file_id] = None
        if info.empty:
            continue
        columns = resolve_columns(f.path, info.columns, text_column, url_column, key_column)
        plan.columns[f.file_id] = columns
        if info.rows != 0:
            plan.units += [((f.file_id, i), _Work(f, u, columns)) for i, u in enumerate(info.units)]
    return plan


def scan_unit(work: _Work, pattern: str, prefilter: bool, batch_rows: int, index: int) -> UnitScan:
    """Read one unit (``select._scan_unit``: reader, cleaning, RE2 prefilter) into one result."""
    t0 = time.perf_counter()
    counts = FileCounts()
    tables = []
    for piece in _scan_unit(work, pattern, prefilter, batch_rows):
        counts.add(piece)
        if piece.candidates.num_rows:
            tables.append(piece.candidates)
    candidates = (
        pa.concat_tables(tables).cast(CANDIDATE_SCHEMA)
        if tables
        else CANDIDATE_SCHEMA.empty_table()
    )
    return UnitScan(
        work.file.file_id,
        index,
        counts.rows,
        counts.null_text,
        counts.bad_text,
        candidates,
        f"{socket.gethostname()}:{os.getpid()}",
        time.perf_counter() - t0,
    )


def _scan_keyed(
    args: tuple[_Work, int], pattern: str, prefilter: bool, batch_rows: int
) -> UnitScan:
    work, index = args
    return scan_unit(work, pattern, prefilter, batch_rows, index)


def scan_units(
    engine: Engine,
    plan: UnitPlan,
    matcher: Matcher,
    *,
    prefilter: bool = True,
    batch_rows: int = 262_144,
    progress: bool = True,
) -> Iterator[tuple[UnitKey, UnitScan]]:
    """Every unit of ``plan`` scanned by ``engine`` (one CPU task each), in unit order."""
    fn = partial(_scan_keyed, pattern=matcher.pattern, prefilter=prefilter, batch_rows=batch_rows)
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
) -> ScanStats:
    """``select.scan_corpus`` through an engine: fill ``_select_candidates`` (which must
    exist) unit by unit, in unit order, and return the same counts. ``on_unit`` (optional)
    sees every unit's result before it is inserted (throughput reports, provenance)."""
    plan = plan_units(files, text_column, url_column, key_column)
    stats = ScanStats({f.file_id: FileCounts() for f in files}, dict(plan.columns))
    pending = CandidateBuffer(con, prefilter, matcher.pattern)  # select's own batched INSERT
    t0 = time.perf_counter()
    for (file_id, _), scan in scan_units(
        engine, plan, matcher, prefilter=prefilter, batch_rows=batch_rows, progress=progress
    ):
        if on_unit is not None:
            on_unit((file_id, scan.unit), scan)
        stats.files[file_id].add(scan)
        pending.add(scan.candidates)
    pending.flush()
    stats.seconds = time.perf_counter() - t0
    return stats
