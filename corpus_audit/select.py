"""Stage ``select``: find the captions that mention an occupation and draw keyword samples.

How a mention is found (METHODS 1.5, "naive / keyword")
    :func:`build_matcher` turns every surface form of the lexicon into one RE2 alternation,
    longest form first, matched case-insensitively. A form's edges are guarded by ``\\b``
    (ASCII word boundary) when its first/last character is an ASCII letter/digit, so
    ``teacher's``, ``Teachers'`` and ``teacher-student`` mention teacher while ``internal``,
    ``cookie``, ``cookbook`` do not mention intern or cook. Spaces inside multi-word forms match
    any run of white space (``prime  minister``); the hyphenated variant (``prime-minister``)
    is its own form (the lexicon adds it). Edges that are non-ASCII letters are guarded by a
    consumed non-letter character instead (``\\b`` is ASCII-only in RE2). Only lexicon forms
    match: plurals and synonyms come from the lexicon file, nothing is hard-coded here.

One pass over the corpus
    Files are read as arrow record batches (:mod:`corpus_audit.corpus`), ``engine.threads``
    batches at a time. With ``select.prefilter`` (default) each batch is first filtered with
    pyarrow's vectorised RE2 (``match_substring_regex``), which costs about half of DuckDB's
    ``regexp_matches`` per row; the few % of rows that pass go to DuckDB, where the SQL in
    ``sql/select_*.sql`` re-checks them with the same pattern, extracts every match
    (``regexp_extract_all``), maps it to its lexicon form and occupation, writes
    ``mentions``/``captions`` and samples. Without the prefilter DuckDB's SQL does it all (same
    result, slower). Memory is bounded by a few batches in flight plus DuckDB's
    ``engine.memory_limit`` (candidates spill to disk), whatever the corpus size.

Ids and samples
    ``caption_id = (file_id << 40) | row_in_file`` with ``file_id`` the index in the sorted
    list of corpus files. The keyword sample of an occupation is its captions ordered by
    ``md5('keyword:<seed>:<occupation>:<key>')`` (key = the corpus key column, else
    ``<file key>:<row>`` with the file key of :func:`sample_keys`: the file name, or as many
    trailing folders as tell two equal names apart), ranks 1..``select.sample_size`` (with
    ``select.sample_unit = "labelled_images"``: 1..ceil(sample_size x overdraw) candidates,
    cut later at N labelled images, see :mod:`corpus_audit.subsets`): a uniform sample without
    replacement that does not depend on thread count, file order, DuckDB version or where the
    corpus folder lies.

Idempotence
    Everything is written in one transaction (a failed run leaves the previous results as
    they were). A rerun whose config, lexicon files and corpus files (paths, sizes, mtimes)
    are unchanged is skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from corpus_audit.config import parse_size
from corpus_audit.corpus import (
    ColumnMap,
    CorpusFile,
    check_text_column,
    fingerprint_entry,
    get_reader,
    iter_clean_batches,
    resolve_columns,
    resolve_corpus,
)
from corpus_audit.errors import CorpusError
from corpus_audit.lexicon import Occupation, load_occupations
from corpus_audit.lexicon import resolve_path as lexicon_path
from corpus_audit.lexicon.study_prompts import prompt_files as _prompt_files
from corpus_audit.lexicon.study_prompts import study_prompts
from corpus_audit.store import StageRun, Study, execute_sql, sql_text

STAGE = "select"
SQL_FILES = (
    "select_00_clear.sql",
    "select_05_work_tables.sql",
    "select_10_candidates.sql",
    "select_20_found.sql",
    "select_21_spaces.sql",
    "select_22_edges.sql",
    "select_25_mentions.sql",
    "select_30_captions.sql",
    "select_40_samples.sql",
    "select_50_summary.sql",
)
_RE2_SPECIAL = set("\\.+*?()|[]{}^$#&-~/")
_SPACE = r"[\s\p{Zs}]+"
_NOT_WORD = r"[^\p{L}\p{N}_]"


# -- the matcher -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Matcher:
    """The regex of all lexicon forms and the form -> occupation table behind it."""

    pattern: str  # RE2 syntax, to be used case-insensitively
    forms: tuple[tuple[str, str], ...]  # (form, occupation), forms lower case
    occupations: tuple[str, ...]  # lexicon order


def _escape(text: str) -> str:
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in text)


def _ascii_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def form_regex(form: str) -> str:
    """The RE2 fragment matching one lower-case surface form (see the module docstring)."""
    body = _SPACE.join(_escape(part) for part in form.split())
    left = _edge(form[0], f"(?:^|{_NOT_WORD})")
    right = _edge(form[-1], f"(?:{_NOT_WORD}|$)")
    return left + body + right


def _edge(ch: str, outside_word: str) -> str:
    """The guard for a form's edge character ``ch``: ``\\b`` after an ASCII word character,
    ``outside_word`` (start/end of text or a non-word character) after another letter or
    digit (RE2's ``\\b`` is ASCII-only), nothing after punctuation."""
    if _ascii_word(ch):
        return r"\b"
    if ch.isalnum():
        return outside_word
    return ""


def build_matcher(occupations: list[Occupation]) -> Matcher:
    """One case-insensitive RE2 alternation over every form, longest first (so ``prime
    minister`` wins over a shorter form it contains)."""
    forms: dict[str, str] = {}
    for occ in occupations:
        for form in occ.forms:
            norm = " ".join(form.lower().split())
            if norm:
                forms.setdefault(norm, occ.name)
    if not forms:
        raise CorpusError("lexicon: no occupation forms to search for")
    ordered = sorted(forms, key=lambda f: (-len(f), f))
    pattern = "(?:" + "|".join(form_regex(f) for f in ordered) + ")"
    return Matcher(
        pattern, tuple((f, forms[f]) for f in ordered), tuple(o.name for o in occupations)
    )


# -- scanning --------------------------------------------------------------------------------
@dataclass
class _Work:
    file: CorpusFile
    unit: Any
    columns: ColumnMap


@dataclass
class _Piece:
    """What a worker hands to the main thread for one batch."""

    file_id: int
    rows: int
    null_text: int
    bad_text: int
    candidates: pa.Table
    unit_done: bool = False


@dataclass
class FileCounts:
    """Counts over the rows read from one file: every row, null or empty captions, captions
    with invalid UTF-8, and candidate rows (those that passed the prefilter)."""

    rows: int = 0
    null_text: int = 0
    bad_text: int = 0
    candidates: int = 0

    def add(self, piece: _Piece | Any) -> None:
        """Count one scanned piece: a ``_Piece`` here, an engine unit's ``UnitScan``."""
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

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.files.values())


def _scan_unit(work: _Work, pattern: str, prefilter: bool, batch_rows: int) -> Iterator[_Piece]:
    import numpy as np
    import pyarrow.compute as pc

    def keep(text: pa.Array) -> pa.Array:
        return pc.match_substring_regex(text, pattern, ignore_case=True)

    fid = work.file.file_id
    batches = iter_clean_batches(
        work.file, work.unit, work.columns, batch_rows, keep if prefilter else None
    )
    for cb in batches:
        table = cb.table
        table = table.add_column(0, "file_id", pa.array(np.full(table.num_rows, fid, np.int32)))
        yield _Piece(fid, cb.rows, cb.null_text, cb.bad_text, table)
    yield _Piece(fid, 0, 0, 0, pa.table({}), unit_done=True)


_EXIT = object()
_FLUSH_ROWS = 65_536  # candidate rows gathered before one INSERT (each query has a fixed cost)


def _parallel(
    works: list[_Work],
    fn: Callable[[_Work], Iterator[_Piece]],
    threads: int,
) -> Iterator[_Piece]:
    """Run ``fn`` over ``works`` in ``threads`` threads; yield pieces as they come.

    A bounded queue keeps at most ``2 * threads`` pieces waiting, so memory does not grow
    with the corpus. The first error raised in a worker is re-raised here; then the other
    workers stop after their current batch.
    """
    out: queue.Queue = queue.Queue(maxsize=2 * threads)
    stop = threading.Event()
    todo = list(reversed(works))
    lock = threading.Lock()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def worker() -> None:
        try:
            while not stop.is_set():
                with lock:
                    if not todo:
                        break
                    work = todo.pop()
                for piece in fn(work):
                    if not put(piece):
                        return
        except BaseException as exc:  # handed to the main thread
            put(exc)
        finally:
            put(_EXIT)

    pool = [
        threading.Thread(target=worker, daemon=True, name=f"select-{i}")
        for i in range(max(1, threads))
    ]
    for t in pool:
        t.start()
    running = len(pool)
    try:
        while running:
            item = out.get()
            if item is _EXIT:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()
        for t in pool:
            t.join()


def _scan_on_engine(
    study: Study, files: list[CorpusFile], matcher: Matcher, run: StageRun, *, progress: bool
) -> ScanStats:
    """Fill ``_select_candidates`` on the configured engine (``engine.engine``): ``local``
    scans here (:func:`scan_corpus`); another engine runs one task per file unit
    (:func:`corpus_audit.engines.select_scan.scan_into`), giving the same rows in the same
    order. The engine's description goes in the run's provenance."""
    cfg = study.config
    columns = {
        "text_column": cfg.corpus.text_column,
        "url_column": cfg.corpus.url_column,
        "key_column": cfg.corpus.key_column,
        "prefilter": cfg.select.prefilter,
        "batch_rows": cfg.select.batch_rows,
        "progress": progress,
    }
    if cfg.engine.engine == "local":
        run.provenance["engine"] = {"engine": "local", "threads": cfg.engine.threads}
        return scan_corpus(study.con, files, matcher, threads=cfg.engine.threads, **columns)
    from corpus_audit.engines import engine_from_config
    from corpus_audit.engines.select_scan import scan_into

    with engine_from_config(cfg.engine) as engine:
        run.provenance["engine"] = engine.describe()
        return scan_into(study.con, engine, files, matcher, **columns)


def scan_corpus(
    con: Any,
    files: list[CorpusFile],
    matcher: Matcher,
    *,
    text_column: str = "",
    url_column: str = "",
    key_column: str = "",
    prefilter: bool = True,
    threads: int = 2,
    batch_rows: int = 262_144,
    progress: bool = True,
) -> ScanStats:
    """Read every file once and fill ``_select_candidates`` (which must exist).

    Raises CorpusError (naming the file) for unreadable files or missing columns; all files
    are inspected before any row is read, so such errors come fast.
    """
    from tqdm import tqdm

    stats = ScanStats({f.file_id: FileCounts() for f in files})
    works, known_rows = _plan_units(files, stats, text_column, url_column, key_column)
    pending = CandidateBuffer(con, prefilter, matcher.pattern)
    t0 = time.perf_counter()
    bar = tqdm(
        total=len(files), unit="file", disable=not progress, desc="select", dynamic_ncols=True
    )
    bar.update(len(files) - len({w.file.file_id for w in works}))  # empty files
    units_left = {f.file_id: 0 for f in files}
    for w in works:
        units_left[w.file.file_id] += 1
    try:
        for piece in _parallel(
            works, lambda w: _scan_unit(w, matcher.pattern, prefilter, batch_rows), threads
        ):
            counts = stats.files[piece.file_id]
            total = known_rows[piece.file_id]
            if piece.unit_done:
                units_left[piece.file_id] -= 1
                if not units_left[piece.file_id]:
                    bar.update(1 - (counts.rows / total if total else 0.0))
                continue
            counts.add(piece)
            if total:
                bar.update(piece.rows / total)
            pending.add(piece.candidates)
            bar.set_postfix(rows=f"{stats.rows:,}", refresh=False)
        pending.flush()
    finally:
        bar.close()
    stats.seconds = time.perf_counter() - t0
    return stats


def _plan_units(
    files: list[CorpusFile],
    stats: ScanStats,
    text_column: str,
    url_column: str,
    key_column: str,
) -> tuple[list[_Work], dict[int, int | None]]:
    """Inspect every file (columns checked, nothing read yet): the units to scan and each
    file's row count when known. Sets ``stats.columns`` (None for an empty file)."""
    works: list[_Work] = []
    known_rows: dict[int, int | None] = {}
    for f in files:
        info = get_reader(f.format).inspect(Path(f.path))
        known_rows[f.file_id] = info.rows
        stats.columns[f.file_id] = None
        if info.empty:
            continue
        columns = resolve_columns(f.path, info.columns, text_column, url_column, key_column)
        if columns.text in info.types:  # parquet, HF: refused before any row is read
            check_text_column(f.path, columns.text, info.types[columns.text])
        stats.columns[f.file_id] = columns
        if info.rows == 0:
            continue
        works += [_Work(f, unit, columns) for unit in info.units]
    return works, known_rows


class CandidateBuffer:
    """Candidate rows on their way into ``_select_candidates``: inserted (checked again by
    ``sql/select_10_candidates.sql``) once ``_FLUSH_ROWS`` have gathered, and at the end.
    Used by :func:`scan_corpus` and by the engine path (``engines.select_scan.scan_into``)."""

    def __init__(self, con: Any, prefilter: bool, pattern: str) -> None:
        self.con, self.prefilter, self.pattern = con, prefilter, pattern
        self.tables: list[pa.Table] = []
        self.rows = 0

    def add(self, table: pa.Table) -> None:
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
                self.con, "select_10_candidates", prefiltered=self.prefilter, pattern=self.pattern
            )
        finally:
            self.con.unregister("_select_batch")
        self.tables, self.rows = [], 0


# -- the stage ---------------------------------------------------------------------------------
def sample_keys(paths: list[str]) -> dict[str, str]:
    """Per corpus file path, the file key its captions' sample order hashes.

    The key is the shortest tail of the path (its last components, joined by ``/``) that no
    other corpus file shares: the file name when names are distinct (so samples drawn before
    this rule existed are unchanged), ``a/part-0.parquet`` and ``b/part-0.parquet`` for two
    equal names in different folders. Only trailing components count, so moving or renaming
    the folder that holds the corpus keeps every sample.
    """
    parts = {p: Path(p).parts for p in paths}
    out: dict[str, str] = {}
    for path, mine in parts.items():
        for depth in range(1, len(mine) + 1):
            tail = mine[-depth:]
            if all(other[-depth:] != tail for q, other in parts.items() if q != path):
                break
        out[path] = "/".join(tail)
    return out


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _prompt_hashes(prompts: str | list[str], root: Path, categories: str) -> str | list[str]:
    """sha256 of the prompt files (one string for a single set, as before lists existed)."""
    hashes = [_sha256_file(p) for p in _prompt_files(prompts, root, categories)]
    return hashes[0] if len(hashes) == 1 else hashes


def _fingerprint(study: Study, files: list[CorpusFile]) -> str:
    """Hash of everything the results depend on: seed, corpus/lexicon/select config, the
    lexicon files' contents, the corpus files' paths/sizes/mtimes and the SQL text."""
    cfg = study.config
    data = {
        "seed": cfg.study.seed,
        "corpus": dataclasses.asdict(cfg.corpus),
        "select": dataclasses.asdict(cfg.select),
        "occupations": _sha256_file(lexicon_path(cfg.lexicon.occupations, study.root)),
        "prompts": _prompt_hashes(cfg.lexicon.prompts, study.root, cfg.lexicon.categories),
        "files": [fingerprint_entry(f) for f in files],
        "sql": hashlib.sha256("".join(sql_text(n) for n in SQL_FILES).encode()).hexdigest(),
    }
    if cfg.lexicon.prompt_occupations:  # only when set: older studies keep their fingerprint
        data["prompt_occupations"] = sorted(cfg.lexicon.prompt_occupations)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]


def summary_rows(study: Study, occupations: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per occupation (lexicon order): captions mentioning it and its keyword sample size."""
    cur = study.sql("select_50_summary", occupations=list(occupations))
    return [{"occupation": o, "captions": int(c), "sample": int(s)} for o, c, s in cur.fetchall()]


def select(study: Study, *, progress: bool = True) -> StageRun:
    """Find occupation mentions in the corpus; write corpus_files, captions, mentions,
    prompts and the ``keyword`` samples (see the module docstring).

    Raises CorpusError (bad/missing/corrupt corpus file, empty corpus) and LexiconError
    (bad lexicon file); the study is unchanged by a failed run.
    """
    cfg = study.config
    occupations = load_occupations(cfg.lexicon.occupations, base=study.root)
    lex = cfg.lexicon
    prompt_sets = study_prompts(
        lex.prompts, occupations, study.root, lex.categories, lex.prompt_occupations
    )
    matcher = build_matcher(occupations)
    files = resolve_corpus(cfg.corpus.paths, cfg.corpus.format, base=study.root)
    fingerprint = _fingerprint(study, files)

    last = study.last_run(STAGE)
    if last is not None and last["provenance"].get("fingerprint") == fingerprint:
        return _unchanged(study, last, matcher)

    headroom = _arrow_headroom(study, cfg.engine.threads, cfg.select.batch_rows)
    with headroom, study.transaction(), study.stage(STAGE) as run:
        study.sql("select_00_clear")
        study.sql("select_05_work_tables")
        stats = _scan(study, files, matcher, run, progress=progress)
        _write_corpus_files(study, files, stats)
        derived = _derive_tables(study, matcher, prompt_sets)
        derived["timings"] = {"scan": round(stats.seconds, 3), **derived["timings"]}
        _record(study, run, files, stats, matcher, derived)
        run.provenance.update(
            {
                "fingerprint": fingerprint,
                "files": len(files),
                "pattern_sha256": hashlib.sha256(matcher.pattern.encode()).hexdigest()[:16],
                "sample_rule": "md5('keyword:<seed>:<occupation>:<sample_key>') ascending",
                "sample_seed": cfg.study.seed,
                "sample_size": cfg.select.sample_size,
                "sample_unit": cfg.select.sample_unit,
                "prefilter": cfg.select.prefilter,
                "threads": cfg.engine.threads,
                "rows_per_second": round(stats.rows / stats.seconds) if stats.seconds else None,
                "prompt_set": _set_names(prompt_sets.prompts),
            }
        )
    return run


def _unchanged(study: Study, last: dict[str, Any], matcher: Matcher) -> StageRun:
    """A skipped run that repeats the last one's counts (corpus, lexicon, settings unchanged)."""
    with study.stage(STAGE) as run:
        run.skipped = True
        run.rows_in, run.rows_out = int(last["rows_in"] or 0), int(last["rows_out"] or 0)
        run.dropped = dict(last["dropped"])
        run.provenance.update(
            {
                k: v
                for k, v in last["provenance"].items()
                if k not in ("versions", "config_hash", "seed")
            }
        )
        run.summary = summary_rows(study, matcher.occupations)
        run.messages.append("corpus, lexicon and settings unchanged since the last run")
    return run


def _scan(
    study: Study, files: list[CorpusFile], matcher: Matcher, run: StageRun, *, progress: bool
) -> ScanStats:
    """Fill the work tables: the lexicon forms, then every file's candidate captions."""
    con = study.con
    forms = pa.table(
        {"form": [f for f, _ in matcher.forms], "occupation": [o for _, o in matcher.forms]}
    )
    con.register("_select_forms_in", forms)
    con.execute("INSERT INTO _select_forms SELECT * FROM _select_forms_in")
    con.unregister("_select_forms_in")
    stats = _scan_on_engine(study, files, matcher, run, progress=progress)
    if stats.rows == 0:
        raise CorpusError(
            f"corpus: all {len(files)} corpus files are empty (0 rows), e.g. {files[0].path}"
        )
    return stats


def _derive_tables(study: Study, matcher: Matcher, prompt_sets: Any) -> dict:
    """From the candidates: mentions, captions, the keyword samples and the prompts (the
    ``select_2x``-``select_40`` files), then drop the work tables. Returns the counts and
    seconds per step the provenance records."""
    cfg = study.config
    con = study.con
    timings: dict[str, float] = {}
    step = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal step
        now = time.perf_counter()
        timings[name] = round(now - step, 3)
        step = now

    study.sql("select_20_found", pattern=matcher.pattern)
    study.sql("select_21_spaces")
    study.sql("select_22_edges")
    unmapped = study.count("_select_found", "occupation IS NULL")
    lap("extract")
    study.sql("select_25_mentions")
    lap("mentions")
    study.sql("select_30_captions")
    lap("captions")
    candidates_n = cfg.select.candidates(cfg.select.sample_size)
    study.sql("select_40_samples", seed=cfg.study.seed, n=candidates_n)
    lap("samples")
    prompts = prompt_sets.prompts
    for table, rows in (("prompts", prompts), ("prompt_categories", prompt_sets.categories)):
        if rows:  # table: one of the two names written here, never config or corpus text
            con.register("_select_rows", pa.Table.from_pylist(rows))
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _select_rows")
            con.unregister("_select_rows")
    lap("prompts")
    candidates = study.count("_select_candidates")
    for table in ("_select_found", "_select_candidates", "_select_forms"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    return {
        "timings": timings,
        "unmapped": unmapped,
        "candidates": candidates,
        "candidates_per_subset": candidates_n,
        "prompts": len(prompts),
    }


def _record(
    study: Study,
    run: StageRun,
    files: list[CorpusFile],
    stats: ScanStats,
    matcher: Matcher,
    derived: dict[str, Any],
) -> None:
    """Counts, drop reasons, summary, notes and the counting part of the provenance."""
    cfg = study.config
    captions = study.count("captions")
    null_text = sum(c.null_text for c in stats.files.values())
    bad_text = sum(c.bad_text for c in stats.files.values())
    run.rows_in = stats.rows
    run.rows_out = captions
    run.drop("null_or_empty_caption", null_text)
    run.drop("invalid_utf8_caption", bad_text)
    run.drop("no_occupation_mentioned", stats.rows - null_text - bad_text - captions)
    run.summary = summary_rows(study, matcher.occupations)
    empty = [f.path for f in files if stats.files[f.file_id].rows == 0]
    if empty:
        run.messages.append(f"{len(empty)} empty corpus file(s) (0 rows), e.g. {empty[0]}")
    small = [r["occupation"] for r in run.summary if r["sample"] < cfg.select.sample_size]
    if small:
        run.messages.append(
            f"{len(small)} occupation(s) have fewer than {cfg.select.sample_size} captions: "
            + ", ".join(small[:10])
            + (" ..." if len(small) > 10 else "")
        )
    unmapped = derived["unmapped"]
    if unmapped:
        run.messages.append(f"{unmapped} regex matches mapped to no lexicon form (ignored)")
    run.provenance.update(
        {
            "mentions": study.count("mentions"),
            "candidates": derived["candidates"],
            "unmapped_matches": unmapped,
            "forms": len(matcher.forms),
            "occupations": len(matcher.occupations),
            "candidates_per_subset": derived["candidates_per_subset"],
            "seconds": derived["timings"],
            "prompts": derived["prompts"],
        }
    )


def _set_names(prompts: list[dict[str, Any]]) -> str | list[str]:
    """The prompt sets' names: one name, or the sorted list of several."""
    names = sorted({str(p["prompt_set"]) for p in prompts})
    return names[0] if len(names) == 1 else names


def parse_bytes(text: str) -> int | None:
    """``'2GB'`` -> 2000000000 (DuckDB's units, KB = 1000 B, KiB = 1024 B); None if unknown."""
    return parse_size(text)


@contextmanager
def _arrow_headroom(study: Study, threads: int, batch_rows: int) -> Iterator[None]:
    """Room for the arrow batches in flight and Python (256 MiB + threads x batch_rows x
    640 B) within ``engine.memory_limit``: DuckDB's memory_limit is lowered by that much when
    the study opens (``store.duckdb_memory_limit``), as the study connection's configuration
    is locked (an untrusted study cannot change it, and neither can this stage)."""
    yield


def _write_corpus_files(study: Study, files: list[CorpusFile], stats: ScanStats) -> None:
    """One corpus_files row per file, with its counts, the columns it was read with and the
    file key of its captions' sample order (:func:`sample_keys`)."""
    keys = sample_keys([f.path for f in files])
    rows = []
    for f in files:
        cols = stats.columns.get(f.file_id)
        c = stats.files[f.file_id]
        rows.append(
            [
                f.file_id,
                f.path,
                f.format,
                cols.text if cols else "",
                cols.url if cols else None,
                c.rows,
                c.null_text,
                c.bad_text,
                keys[f.path],
            ]
        )
    study.con.executemany(
        "INSERT INTO corpus_files (file_id, path, format, text_column, url_column, rows_total, "
        "rows_null_text, rows_bad_text, sample_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
