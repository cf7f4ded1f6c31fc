"""Stage ``images``: register the training images of the selected captions.

Each entry of ``images.sources`` (study.toml) is a table with a ``kind`` and its options:

===============  ==========================================================================
kind             what ``path`` is
===============  ==========================================================================
``dir``          a folder of image files named by key (``<key>.jpg``), searched recursively;
                 an img2dataset-style ``<key>.json`` beside a file is read for url/caption_id
``webdataset``   a ``.tar`` shard, a folder of shards or a glob (members ``<key>.jpg``,
                 ``<key>.txt``, ``<key>.json``)
``img2dataset``  an img2dataset output folder in any of its formats (webdataset ``.tar``,
                 ``parquet`` with image bytes, or ``files``); its ``*_stats.json`` are kept
``parquet``      a parquet file / folder / glob with image bytes (binary column or
                 ``{bytes, path}`` struct as Hugging Face writes)
``hf``           a Hugging Face dataset saved with ``save_to_disk`` with an ``Image`` column
``urls``         (no path) download the selected captions' URLs with img2dataset
===============  ==========================================================================

Linking a record to a caption (``link`` option, default ``auto``): a ``caption_id`` field in
the record (our own URL export writes it through img2dataset's ``save_additional_columns``);
else the record's ``url`` matched against ``captions.url``; else, for ``dir`` sources, the file
name as the caption_id. ``link = "row"`` with ``corpus_file = PATH`` reads the key as the row
number in that corpus file (img2dataset run directly on the corpus with its default 10,000
samples per shard numbers records so). Other options: ``image_column``, ``url_column``,
``key_column`` (parquet/hf), ``split`` (hf), and for ``urls``: ``image_size`` (512),
``resize_mode`` (keep_ratio), ``processes_count`` (2), ``thread_count`` (16), ``timeout`` (10),
``retries`` (0), ``output`` (``<study>/downloads/img2dataset``).

Only captions of the training subsets (``samples``; ``images.scope = "captions"``: every
selected caption) are registered, one image per caption: ``image_id = 'train:<caption_id>'``.
Image bytes from shards, parquet and datasets are written under ``<study>/images/train/`` by
names made from the caption_id, never from member names, so a tar member named
``../../x.jpg`` cannot write outside the study (such members are skipped and recorded in
``image_skips`` as ``unsafe_name``). Files of ``dir`` sources are referenced where they are.
Images are not decoded here; the ``label`` stage records undecodable ones as ``unreadable``.

Shape: **read** (each kind is a module of :mod:`corpus_audit.backends.image_sources`, registered in
``SOURCES``, whose typed options are checked when the config loads) -> **link**
(:class:`Linker`: record -> wanted caption ids) -> **write** (:class:`ImageWriter`: bytes under
the study, rows in batches). The queries are in ``corpus_audit/sql/images_*.sql``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from corpus_audit.backends import boundary
from corpus_audit.backends.engines.base import Progress, progress_bar
from corpus_audit.backends.image_sources import SOURCES, parse_source
from corpus_audit.backends.image_sources.base import (
    IMAGE_EXTS,
    Record,
    Skip,
    SourceContext,
    SourceOptions,
    Unit,
    as_int,
)
from corpus_audit.core.errors import BackendOutputError, ImageSourceError, StageOrderError
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, execute_sql, execute_sql_rows

INSERT_BATCH = 1000  # rows per transaction: a killed run loses at most this many

Wanted = dict[int, tuple[str | None, str | None]]  # caption_id -> (url, occupation or None)


@dataclass
class SourceCounts:
    """What happened to the records of one source (or one unit of it)."""

    records: int = 0
    registered: int = 0
    already: int = 0
    unmatched: int = 0
    skipped: int = 0

    def add(self, other: SourceCounts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


# -- link ------------------------------------------------------------------------------------
def wanted_captions(study: Study, scope: str) -> Wanted:
    """caption_id -> (url, occupation when the caption is sampled for exactly one)."""
    query = "images/wanted_samples" if scope == "samples" else "images/wanted_captions"
    rows = study.sql(query).fetchall()
    return {int(cid): (url, occ) for cid, url, occ in rows}


def _row_index(study: Study, index: int, corpus_file: str) -> dict[int, int]:
    """row number in ``corpus_file`` -> caption_id, for ``link = "row"``."""
    if not corpus_file:
        raise ImageSourceError(
            f"images.sources[{index}]: link = 'row' needs corpus_file (the corpus file "
            "the keys number the rows of)"
        )
    target = study.config.resolve(corpus_file).resolve()
    rows = study.sql("images/caption_rows").fetchall()
    exact = [(r, c) for f, r, c in rows if Path(f).resolve() == target]
    if not exact:
        exact = [(r, c) for f, r, c in rows if Path(f).name == target.name]
    if not exact:
        raise ImageSourceError(
            f"images.sources[{index}].corpus_file: {target}: no selected captions come "
            "from this file"
        )
    return {int(r): int(c) for r, c in exact}


class Linker:
    """Maps a record to the wanted caption ids it belongs to (``link`` option)."""

    def __init__(self, ctx: SourceContext, options: SourceOptions) -> None:
        self.mode = options.link
        self.kind = options.kind
        self.wanted = ctx.wanted
        self.by_url: dict[str, list[int]] = {}
        for cid, (url, _) in ctx.wanted.items():
            if url:
                self.by_url.setdefault(url, []).append(cid)
        self.by_row: dict[int, int] = {}
        if self.mode == "row":
            self.by_row = _row_index(ctx.study, ctx.index, options.corpus_file)

    def _if_wanted(self, cid: int | None) -> list[int]:
        return [cid] if cid is not None and cid in self.wanted else []

    def link(self, rec: Record) -> list[int]:
        mode = self.mode
        if mode in ("auto", "caption_id") and rec.caption_id is not None:
            return self._if_wanted(rec.caption_id)
        if mode in ("auto", "url") and rec.url:
            return self.by_url.get(rec.url, [])
        if mode == "caption_id" or (mode == "auto" and self.kind == "dir"):
            return self._if_wanted(as_int(rec.key))
        if mode == "row":
            row = as_int(rec.key)
            return self._if_wanted(self.by_row.get(row) if row is not None else None)
        return []


# -- write -----------------------------------------------------------------------------------
def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


class ImageWriter:
    """Writes linked records: bytes under ``<study>/images/train/`` (named by caption_id
    only), rows of ``images`` / ``image_skips`` / ``image_shards`` in batches."""

    def __init__(self, study: Study, wanted: Wanted) -> None:
        self.study = study
        self.wanted = wanted
        con = study.con
        registered = execute_sql(con, "images/registered").fetchall()
        self.registered = {int(cid) for (cid,) in registered}
        done = execute_sql(con, "images/done_shards").fetchall()
        self.done = {(source, shard) for source, shard in done}
        self.rows: list[tuple] = []
        self.skips: list[tuple] = []

    def image_path(self, caption_id: int, ext: str) -> Path:
        """Where bytes of caption ``caption_id`` are written: inside the study, by id only."""
        ext = ext if ext in IMAGE_EXTS else ".img"
        return self.study.path("images", "train", f"{caption_id % 1000:03d}", f"{caption_id}{ext}")

    def store_path(self, path: Path) -> str:
        """Relative to the study dir when inside it, else absolute."""
        resolved = path.resolve()
        try:
            return resolved.relative_to(self.study.root.resolve()).as_posix()
        except ValueError:
            return str(resolved)

    def add(self, rec: Record, ids: list[int], counts: SourceCounts) -> None:
        """Register ``rec`` for each caption id not registered yet (bytes written once)."""
        stored: str | None = None
        for cid in ids:
            if cid in self.registered:
                counts.already += 1
                continue
            if stored is None:
                if rec.data is not None:
                    target = self.image_path(cid, rec.ext)
                    _write_atomic(target, rec.data)
                    stored = self.store_path(target)
                else:
                    stored = self.store_path(rec.file)  # type: ignore[arg-type]
            self.rows.append((f"train:{cid}", cid, self.wanted[cid][1], stored, rec.origin))
            self.registered.add(cid)
            counts.registered += 1

    def skip(self, source: str, item: Skip) -> None:
        self.skips.append((source, item.item, item.reason, item.detail))

    def flush(self, finished: tuple | None = None, *, when_full: bool = False) -> None:
        """Commit the pending rows (and the finished unit's mark) in one transaction."""
        if when_full and len(self.rows) + len(self.skips) < INSERT_BATCH:
            return
        if not self.rows and not self.skips and finished is None:
            return
        with self.study.transaction() as con:
            execute_sql_rows(con, "images/insert", self.rows)
            execute_sql_rows(con, "images/insert_skip", self.skips)
            if finished is not None:
                execute_sql_rows(con, "images/insert_shard", [finished])
        self.rows, self.skips = [], []

    def download_stats(self, source: str, stats: list[dict[str, Any]]) -> None:
        keys = ("shard", "count", "successes", "failed_to_download", "failed_to_resize")
        rows = [(source, *(s[k] for k in keys), s["status_dict"]) for s in stats]
        with self.study.transaction() as con:
            execute_sql_rows(con, "images/clear_download_stats", [(source,)])
            execute_sql_rows(con, "images/insert_download_stats", rows)


# -- read -> link -> write -------------------------------------------------------------------
def _register_unit(
    writer: ImageWriter, linker: Linker, unit: Unit, source: str, run: StageRun, bar: Any
) -> SourceCounts:
    """Read one unit, link its records and write them; mark it finished unless it failed."""
    counts = SourceCounts()
    failed = False
    for item in unit.read():
        if isinstance(item, Skip):
            writer.skip(source, item)
            counts.skipped += 1
            run.drop(item.reason)
            failed = failed or item.reason == "unreadable_shard"
            continue
        counts.records += 1
        bar.update(1)
        ids = linker.link(item)
        if not ids:
            counts.unmatched += 1
            continue
        writer.add(item, ids, counts)
        writer.flush(when_full=True)
    mark = None
    if unit.resumable and not failed:
        mark = (source, str(unit.path), counts.records, counts.registered)
    writer.flush(mark)
    return counts


def _checked_read(read: Any, who: str, plugin: bool) -> Any:
    """``read`` of a unit whose items are checked (a :class:`Record` or a :class:`Skip`) and
    whose exceptions, for a plugin, are one line naming it."""

    def checked() -> Iterator[Record | Skip]:
        items = boundary.call(who, plugin, "read", lambda: iter(read()))
        end = object()
        while (item := boundary.call(who, plugin, "read", next, items, end)) is not end:
            if not isinstance(item, (Record, Skip)):
                raise BackendOutputError(
                    f"{who}: read yielded {boundary.shown(item)}, not a Record or a Skip"
                )
            yield item

    return checked


def _register_source(
    ctx: SourceContext, options: SourceOptions, writer: ImageWriter, run: StageRun, bar: Any
) -> dict[str, Any]:
    """All units of one source entry; returns the entry as read (for provenance)."""
    source = f"sources[{ctx.index}]:{options.kind}"
    # a plugin's exceptions are one line naming it, its units and records are checked
    # before anything is written (backends/boundary.py)
    who, plugin = (
        boundary.backend_name(SOURCES, options.kind),
        boundary.is_plugin(SOURCES, options.kind),
    )
    kind = SOURCES.get(options.kind)
    options = boundary.call(who, plugin, "prepare", kind.prepare, ctx, options)  # urls: download
    if not isinstance(options, SourceOptions):
        raise BackendOutputError(f"{who}: prepare returned {boundary.shown(options)}, not options")
    kind = SOURCES.get(options.kind)
    linker = Linker(ctx, options)
    counts = SourceCounts()
    units = boundary.call(who, plugin, "units", lambda: list(kind.units(ctx, options)))
    for unit in units:
        if not isinstance(unit, Unit) or not callable(unit.read):
            raise BackendOutputError(f"{who}: units returned {boundary.shown(unit)}, not a Unit")
        if (source, str(unit.path)) not in writer.done:
            read = _checked_read(unit.read, who, plugin)
            unit = Unit(unit.path, read, unit.resumable)
            counts.add(_register_unit(writer, linker, unit, source, run, bar))
    stats = boundary.call(who, plugin, "download_stats", kind.download_stats, ctx, options)
    if stats:
        writer.download_stats(source, stats)
        total = sum(s["count"] or 0 for s in stats)
        ok = sum(s["successes"] or 0 for s in stats)
        run.messages.append(
            f"{source}: img2dataset downloaded {ok} of {total} "
            f"({total - ok} failed; see table download_stats)"
        )
    run.rows_in += counts.records
    run.rows_out += counts.registered
    run.drop("no_matching_caption", counts.unmatched)
    run.summary.append(
        {
            "source": source,
            "path": options.spec.get("path", ""),
            "records": counts.records,
            "registered": counts.registered,
            "already": counts.already,
            "unmatched": counts.unmatched,
            "skipped": counts.skipped,
        }
    )
    return dict(options.spec)


def _wanted_or_fail(study: Study, scope: str) -> Wanted:
    """The wanted captions; :class:`StageOrderError` when select has not run or they are none."""
    if study.count("captions") == 0:
        raise StageOrderError(
            "images: no selected captions yet; run `corpus-audit select DIR` first"
        )
    wanted = wanted_captions(study, scope)
    if not wanted:
        raise StageOrderError(
            "images: the training subsets (samples) are empty; run select first, or set "
            "images.scope = 'captions'"
        )
    return wanted


def _no_sources(study: Study) -> str | None:
    """The ``off`` guard: why the stage has nothing to do (no ``images.sources``), or None."""
    if study.config.images.sources:
        return None
    return (
        "no image sources configured (images.sources in study.toml): training images "
        "are not registered"
    )


@stage_body("images", off=_no_sources)
def images(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Register training images from ``images.sources``, linked to the wanted captions.

    Resumable: finished shards are listed in ``image_shards`` and skipped; images already
    registered are skipped; a killed run loses at most the last ``INSERT_BATCH`` records.
    """
    cfg = study.config.images
    wanted = _wanted_or_fail(study, cfg.scope)
    entries = [parse_source(i, spec) for i, spec in enumerate(cfg.sources)]
    writer = ImageWriter(study, wanted)
    run.rows_in = 0
    bar = progress_bar(Progress("images", "img", enabled=progress))
    try:
        provenance = [
            _register_source(SourceContext(study, i, wanted), entry, writer, run, bar)
            for i, entry in enumerate(entries)
        ]
    finally:
        bar.close()
    found = len(writer.registered & set(wanted))
    run.messages.append(
        f"{found} of {len(wanted)} wanted captions have an image ({len(wanted) - found} without)"
    )
    run.provenance.update({"sources": provenance, "scope": cfg.scope})
    if run.rows_out == 0:
        run.skipped = True
    return run
