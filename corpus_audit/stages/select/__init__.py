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
    ``select.matcher`` (:mod:`corpus_audit.methods.multimatch`) picks how mentions are found,
    with the same rows either way: ``hyperscan`` (``auto`` when installed) matches every form
    in one multi-pattern pass inside the scan units, which return the mentions themselves
    (DuckDB's extraction below is skipped); ``duckdb`` is the reference path described here.
    Every file or parquet row group is one unit of work run on the study's engine
    (:mod:`corpus_audit.stages.select.scan`: ``engine.threads`` units at a time on the
    ``local`` engine, Ray tasks on ``ray``), read as arrow record batches
    (:mod:`corpus_audit.backends.corpus`); the driver inserts the units' candidates in unit
    order. With ``select.prefilter`` (default) each batch is first filtered with
    pyarrow's vectorised RE2 (``match_substring_regex``), which costs about half of DuckDB's
    ``regexp_matches`` per row; the few % of rows that pass go to DuckDB, where the SQL in
    ``sql/select/*.sql`` re-checks them with the same pattern, extracts every match
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
    cut later at N labelled images, see :mod:`corpus_audit.tables.subsets`): a uniform sample without
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
import time
from pathlib import Path
from typing import Any

from corpus_audit.backends.corpus import (
    CorpusFile,
    fingerprint_entry,
    resolve_corpus,
)
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.config import parse_size
from corpus_audit.core.errors import StageOrderError
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, drop_tables, insert_rows, sql_digest
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.methods.lexicon import resolve_path as lexicon_path
from corpus_audit.methods.lexicon.study_prompts import prompt_files as _prompt_files
from corpus_audit.methods.lexicon.study_prompts import study_prompts
from corpus_audit.methods.matching import Matcher, build_matcher
from corpus_audit.methods.multimatch import resolve_matcher
from corpus_audit.stages.select.scan import ScanStats, scan_on_engine

STAGE = "select"
SQL_FILES = (
    "select/00_clear.sql",
    "select/05_work_tables.sql",
    "select/10_candidates.sql",
    "select/15_matched.sql",
    "select/20_found.sql",
    "select/21_spaces.sql",
    "select/22_edges.sql",
    "select/25_mentions.sql",
    "select/30_captions.sql",
    "select/40_samples.sql",
    "select/50_summary.sql",
)


# -- the stage ---------------------------------------------------------------------------------
#: corpus settings that only group the per-corpus results (the indicators stage's
#: ``corpus_summary``): outside select's fingerprint, so changing them rescans nothing
GROUPING_KEYS = ("groups", "hypernymized")


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
    select_cfg = dataclasses.asdict(cfg.select)
    select_cfg.pop("matcher")  # every matcher gives the same rows (tested): not a change
    data = {
        "seed": cfg.study.seed,
        "corpus": {
            k: v
            for k, v in dataclasses.asdict(cfg.corpus).items()
            if k not in GROUPING_KEYS  # they group results; the rows do not depend on them
        },
        "select": select_cfg,
        "occupations": _sha256_file(lexicon_path(cfg.lexicon.occupations, study.root)),
        "prompts": _prompt_hashes(cfg.lexicon.prompts, study.root, cfg.lexicon.categories),
        "files": [fingerprint_entry(f) for f in files],
        "sql": sql_digest(SQL_FILES),
    }
    if cfg.lexicon.prompt_occupations:  # only when set: older studies keep their fingerprint
        data["prompt_occupations"] = sorted(cfg.lexicon.prompt_occupations)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]


def summary_rows(study: Study, occupations: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per occupation (lexicon order): captions mentioning it and its keyword sample size."""
    cur = study.sql("select/50_summary", occupations=list(occupations))
    return [{"occupation": o, "captions": int(c), "sample": int(s)} for o, c, s in cur.fetchall()]


@stage_body(STAGE)
def select(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Find occupation mentions in the corpus; write corpus_files, captions, mentions,
    prompts and the ``keyword`` samples (see the module docstring).

    Raises CorpusError (bad/missing/corrupt corpus file, empty corpus) and LexiconError
    (bad lexicon file); the study is unchanged by a failed run (the stage is ``atomic``).
    """
    cfg = study.config
    if study_kind(cfg) == "images":
        raise StageOrderError(
            f"{study.root}: `select` reads a corpus and this study has none (a model audited "
            "without its training data, init --kind images); its prompts come from "
            f"`corpus-audit prompts {study.root}`"
        )
    occupations = load_occupations(cfg.lexicon.occupations, base=study.root)
    lex = cfg.lexicon
    prompt_sets = study_prompts(
        lex.prompts, occupations, study.root, lex.categories, lex.prompt_occupations
    )
    matcher = build_matcher(occupations)
    files = resolve_corpus(
        cfg.corpus.paths,
        cfg.corpus.format,
        base=study.root,
        store=StoreOptions.from_config(cfg.storage),
    )
    fingerprint = _fingerprint(study, files)

    last = study.last_run(STAGE)
    if last is not None and last["provenance"].get("fingerprint") == fingerprint:
        return _unchanged(study, run, last, matcher)

    # DuckDB's memory_limit already leaves room for the arrow batches in flight: it is set
    # when the study opens (store.duckdb_memory_limit), the configuration being locked then
    kind, note = resolve_matcher(cfg.select.matcher)
    run.messages.append(note)
    study.sql("select/00_clear")
    study.sql("select/05_work_tables")
    stats = scan_on_engine(study, files, matcher, run, progress=progress, kind=kind)
    _write_corpus_files(study, files, stats)
    derived = _derive_tables(study, matcher, prompt_sets, stats, kind)
    derived["timings"] = {"scan": round(stats.seconds, 3), **derived["timings"]}
    _record(study, run, files, stats, matcher, derived)
    run.provenance["fingerprint"] = fingerprint
    run.provenance.update(_settings(study, len(files), matcher, kind, stats, prompt_sets))
    return run


def _settings(
    study: Study, files: int, matcher: Matcher, kind: str, stats: ScanStats, prompt_sets: Any
) -> dict[str, Any]:
    """What the run's provenance says of how it selected: the pattern, the sample rule and
    settings, the matcher, threads and speed, the prompt sets."""
    cfg = study.config
    return {
        "files": files,
        "pattern_sha256": hashlib.sha256(matcher.pattern.encode()).hexdigest()[:16],
        "sample_rule": "md5('keyword:<seed>:<occupation>:<sample_key>') ascending",
        "sample_seed": cfg.study.seed,
        "sample_size": cfg.select.sample_size,
        "sample_unit": cfg.select.sample_unit,
        "prefilter": cfg.select.prefilter,
        "matcher": kind,
        "threads": cfg.engine.threads,
        "rows_per_second": round(stats.rows / stats.seconds) if stats.seconds else None,
        "prompt_set": _set_names(prompt_sets.prompts),
    }


def _unchanged(study: Study, run: StageRun, last: dict[str, Any], matcher: Matcher) -> StageRun:
    """``run`` made a skipped run that repeats the last one's counts (corpus, lexicon,
    settings unchanged)."""
    run.skipped = True
    run.rows_in, run.rows_out = int(last["rows_in"] or 0), int(last["rows_out"] or 0)
    run.dropped = dict(last["dropped"])
    run.provenance.update(
        {
            k: v
            for k, v in last["provenance"].items()
            # messages: this run's own (the last run's first note would hide it)
            if k not in ("versions", "config_hash", "seed", "messages")
        }
    )
    run.summary = summary_rows(study, matcher.occupations)
    run.messages.append("corpus, lexicon and settings unchanged since the last run")
    return run


def _derive_tables(
    study: Study, matcher: Matcher, prompt_sets: Any, stats: ScanStats, kind: str = "duckdb"
) -> dict:
    """From the candidates: mentions, captions, the keyword samples and the prompts (the
    ``sql/select/20_found.sql``-``40_samples.sql`` files), then drop the work tables. With
    the ``hyperscan`` matcher the scan already filled ``_select_found`` (steps 20-22 are
    skipped). Returns the counts and seconds per step the provenance records."""
    cfg = study.config
    con = study.con
    timings: dict[str, float] = {}
    step = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal step
        now = time.perf_counter()
        timings[name] = round(now - step, 3)
        step = now

    if kind == "duckdb":
        study.sql("select/20_found", pattern=matcher.pattern)
        study.sql("select/21_spaces")
        study.sql("select/22_edges")
        unmapped = study.count("_select_found", "occupation IS NULL")
    else:
        unmapped = stats.unmapped
    lap("extract")
    study.sql("select/25_mentions")
    lap("mentions")
    study.sql("select/30_captions")
    lap("captions")
    candidates_n = cfg.select.candidates(cfg.select.sample_size)
    study.sql("select/40_samples", seed=cfg.study.seed, n=candidates_n)
    lap("samples")
    prompts = prompt_sets.prompts
    for table, rows in (("prompts", prompts), ("prompt_categories", prompt_sets.categories)):
        insert_rows(con, table, rows)
    lap("prompts")
    candidates = study.count("_select_candidates")
    drop_tables(con, "_select_found", "_select_candidates", "_select_forms")
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
