"""The ``who_how`` stage: who is represented and how, for captions and any text corpus.

Inputs (``texts.source``):

- ``captions`` (default): the study's occupation captions (``select``: ``captions``,
  ``mentions``) and, when ``indicators`` ran, the gender each caption specifies through its
  indicator words and names (``sql/who_how/10_views_captions.sql``);
- ``corpus``: the files of ``corpus.paths`` read as a text corpus into ``texts_documents``
  (:mod:`corpus_audit.stages.who_how.inputs`; what ``corpus-audit texts FILE --out DIR`` sets up).

Steps, each written to the tables of ``sql/schema/002_who_how.sql``:

1. **association** of every text (:class:`~corpus_audit.methods.texts.association.AssociationCounter`)
   in batches of ``texts.batch_size``, each committed: a killed run loses at most the batch
   in flight and a rerun counts only texts without a row (resumable, with a progress bar).
   When the association terms change every count is redone; a text that left the inputs or
   whose text changed is counted again;
2. **tables** (:func:`corpus_audit.methods.texts.who_how.who_how_tables`): agreement with the
   specified gender, who (% women vs labour statistics, deciles), the calibrated marked words
   per occupation and pooled, SRBS with Welch's t-tests (SBERT, ``texts.srbs``). Written in
   one transaction; skipped when the inputs, the associations and the settings are those of
   the stored tables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from corpus_audit.backends.embeddings import DEFAULT_MODEL, load_embedder
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.base import progress_bar, track
from corpus_audit.backends.engines.models import (
    ModelSpec,
    SessionEncoder,
    encode_texts,
    model_session,
)
from corpus_audit.core.catalogue import stage
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.stage_state import StageProgress, require
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts, execute_sql, insert_rows
from corpus_audit.methods.lexicon import (
    load_association_terms,
    load_gender_terms,
    load_labor_stats,
    load_occupations,
)
from corpus_audit.methods.texts.association import AssociationCounter
from corpus_audit.methods.texts.marked_words import MarkedWordsSettings
from corpus_audit.methods.texts.mentions import occupation_words
from corpus_audit.methods.texts.srbs import embed_words
from corpus_audit.methods.texts.tokens import clean_texts, words_of
from corpus_audit.methods.texts.who_how import (
    WhoHowSettings,
    agreement_table,
    drop_words_for,
    who_how_tables,
)
from corpus_audit.stages.who_how.inputs import read_documents

STAGE = "who_how"
# what the stage reads and keeps, as opposed to the tables it replaces whole each time
INPUT_TABLES = ("texts_documents", "texts_occupations", "texts_settings", "texts_associations")


def _result_tables() -> tuple[str, ...]:
    return tuple(t for t in stage(STAGE).writes if t not in INPUT_TABLES)


@stage_body(STAGE)
def who_how(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Associate every text and write the who-and-how tables (module docstring).

    Raises :class:`StageOrderError` when ``select`` has not run (captions),
    :class:`CorpusError` for a bad text corpus, :class:`LexiconError` for a bad terms file
    and :class:`ModelError` when SRBS cannot load its embedder.
    """
    cfg = study.config.texts
    read = False
    if cfg.source == "captions":
        require(study, "select", by=STAGE, optional=("indicators",))
        study.sql("who_how/10_views_captions")
    elif cfg.source == "llm":  # the llm_texts stage's texts, compared per model
        require(study, "llm_texts", by=STAGE)
        study.sql("who_how/12_views_llm")
    else:
        read = read_documents(study, run, progress=progress)
        study.sql("who_how/11_views_corpus")
    terms = load_association_terms(cfg.association_terms, base=study.root)
    counted = associate_all(study, terms, progress=progress)
    wrote = write_tables(study, terms, run, progress=progress)
    run.rows_in = study.count("texts_text")
    run.rows_out = study.count("texts_associations")
    run.skipped = not (read or counted or wrote)
    run.provenance.update({"source": cfg.source, "associated_this_run": counted})
    run.summary = summary_rows(study)
    run.messages.extend(messages(study))
    return run


def progress(study: Study) -> StageProgress:
    """Texts with an association, of all input texts (for ``status``)."""
    tables = {"captions": "captions", "llm": "llm_texts"}
    table = tables.get(study.config.texts.source, "texts_documents")
    return StageProgress(study.count("texts_associations"), study.count(table), "texts")


# -- step 1: association ----------------------------------------------------------------------
def associate_all(study: Study, terms: Any, *, progress: bool = True) -> int:
    """Count and associate every input text without a stored association; returns how many."""
    settings = {"pronouns": terms.pronouns, "honorifics": terms.honorifics}
    settings["non_binary"] = list(terms.non_binary)
    fingerprint = _fingerprint(settings)
    con = study.con
    with study.transaction():
        if _stored(study, "associations") != fingerprint:
            con.execute("DELETE FROM texts_associations")
            _store(study, "associations", fingerprint, settings)
        execute_sql(con, "who_how/20_stale")
    todo = execute_sql(con, "who_how/31_todo").fetchnumpy()["text_id"]
    counter = AssociationCounter(terms)
    size = study.config.texts.batch_size
    bar = progress_bar(EngineProgress("who_how association", "text", len(todo), progress))
    with bar:
        for lo in range(0, len(todo), size):
            ids = todo[lo : lo + size]
            batch = execute_sql(con, "who_how/30_batch", lo=int(ids[0]), hi=int(ids[-1])).df()
            counts = counter.count(batch["text"], source="texts")
            counts.insert(0, "text_id", batch["text_id"].to_numpy())
            _insert_associations(study, counts)
            bar.update(len(ids))
    return len(todo)


def _insert_associations(study: Study, counts: pd.DataFrame) -> None:
    con = study.con
    with study.transaction():
        con.register("texts_batch", counts)
        try:
            execute_sql(con, "who_how/32_insert")
        finally:
            con.unregister("texts_batch")


# -- step 2: the tables -----------------------------------------------------------------------
def write_tables(study: Study, terms: Any, run: StageRun, *, progress: bool = True) -> bool:
    """Compute and store the who-and-how tables unless they are current; True when written."""
    settings = table_settings(study, terms)
    names = ["texts_text", "texts_labels", "texts_occ", "texts_associations"]
    if study.config.texts.source == "llm":
        names.append("texts_model")
    inputs = {name: study.fingerprint(name) for name in names}
    cfg = study.config.texts
    config = [repr(settings), cfg.source, cfg.srbs, cfg.embedding_model]
    fingerprint = _fingerprint({"inputs": inputs, "settings": config})
    if _stored(study, "analysis") == fingerprint:
        return False
    texts = study.sql("who_how/40_frame").df()
    occupations = study.con.execute("SELECT * FROM texts_occ ORDER BY text_id, occupation").df()
    labels = {"gender column": "specified"}
    if cfg.source == "captions":
        labels = {"indicator words": "specified", "indicators": "indicator"}
    if cfg.source == "llm":
        labels = {"prompt": "specified"}
        with _embedder(study, run) as embedder:
            tables = _per_model(texts, occupations, settings, labels, embedder, study=study,
                                progress=progress)  # fmt: skip
    else:
        steps = progress_bar(EngineProgress("who_how tables", "step", 1, progress))
        with steps, _embedder(study, run) as embedder:
            tables = who_how_tables(texts, occupations, settings, embedder, labels)
            steps.update(1)
    with study.transaction():
        for name in _result_tables():
            _replace(study, name, tables[name])
        _store(study, "analysis", fingerprint, {"inputs": inputs})
    run.provenance["tables_fingerprint"] = fingerprint
    return True


def _per_model(
    texts: pd.DataFrame,
    occupations: pd.DataFrame,
    settings: Any,
    labels: dict[str, str],
    embedder: Callable[[Any], Any] | None,
    *,
    study: Study,
    progress: bool = True,
) -> dict[str, pd.DataFrame]:
    """The tables of each model's texts (``texts.source = 'llm'``), with a ``model`` column:
    every comparison, prior and calibration is within one model's texts. As in the paper,
    *who* (% women) and the *associated* marked words read the texts of the prompts without
    a gender only (the association of a specified text is its agreement, not a draw of who
    the model imagines); the agreement reads the specified texts."""
    models = study.con.execute("SELECT text_id, model FROM texts_model").df()
    texts = texts.merge(models, on="text_id", how="inner")
    out: dict[str, list[pd.DataFrame]] = {}
    names = sorted(texts["model"].unique())
    if not names:  # no text yet: the empty tables
        return who_how_tables(texts.drop(columns="model"), occupations, settings, None, labels)
    for model in track(names, EngineProgress("who_how tables", "model", enabled=progress)):
        mine = texts[texts["model"] == model].drop(columns="model")
        occ = occupations[occupations["text_id"].isin(mine["text_id"])]
        unspecified = mine.assign(
            association=mine["association"].where(mine["specified"].isna(), "none")
        )
        tables = who_how_tables(unspecified, occ, settings, embedder, labels)
        tables["texts_agreement"] = agreement_table(mine, labels)
        for name, frame in tables.items():
            out.setdefault(name, []).append(frame.assign(model=model))
    return {name: pd.concat(frames, ignore_index=True) for name, frames in out.items()}


def table_settings(study: Study, terms: Any) -> Any:
    """The resolved settings of the tables (marked words, drop words, labour statistics)."""
    cfg, lex = study.config.texts, study.config.lexicon
    marked = MarkedWordsSettings(
        z_threshold=cfg.z_threshold,
        corpus_weight=cfg.corpus_weight,
        prior_strength=cfg.prior_strength or None,
        common_zipf=cfg.common_zipf,
        corpus_top=cfg.corpus_top,
        language=cfg.language,
        min_texts=cfg.min_texts,
        examples=cfg.examples,
    )
    gender = load_gender_terms(lex.gender_terms, base=study.root)
    gender_words = [w for g in ("female", "male") for w in gender.words[g]]
    occupations = load_occupations(lex.occupations, base=study.root)
    names = occupation_words(occupations) + _one_word_occupations(study)
    drop = drop_words_for(terms.words(), gender_words if cfg.drop_gender_words else (), names)
    labor = load_labor_stats(lex.labor_stats, base=study.root)
    confidence = study.config.analysis.confidence
    return WhoHowSettings(marked, drop, labor, cfg.min_associated, confidence)


def _one_word_occupations(study: Study) -> tuple[str, ...]:
    """The one-word occupation names of the inputs themselves (a corpus's own column)."""
    names = [
        r[0] for r in study.con.execute("SELECT DISTINCT occupation FROM texts_occ").fetchall()
    ]
    if not names:
        return ()
    flat, rows = words_of(clean_texts(names))
    single = np.bincount(rows, minlength=len(names)) == 1
    return tuple(w for w, r in zip(flat.to_pylist(), rows.tolist(), strict=True) if single[r])


@contextlib.contextmanager
def _embedder(study: Study, run: StageRun) -> Iterator[Callable[[Any], Any] | None]:
    """SRBS's word embedder (None when ``texts.srbs`` is off): ``words -> {word: vector}``
    with the model on the run's engine (a model session: the worker loads
    ``texts.embedding_model`` when SRBS first needs vectors; ``load_embedder`` keeps one
    model per process, so the worker shares it and never closes it)."""
    cfg = study.config.texts
    if not cfg.srbs:
        yield None
        return
    model = cfg.embedding_model or DEFAULT_MODEL
    options = {"device": study.config.engine.device}
    spec = ModelSpec(load_embedder, (model,), encode_texts, options, shared=True)
    with model_session(study.config.engine, STAGE, spec, run=run) as session:
        encoder = SessionEncoder(session)
        yield lambda words: embed_words(words, encoder)


def _replace(study: Study, table: str, frame: pd.DataFrame) -> None:
    """Replace every row of ``table`` (a result table of the declaration) by ``frame``."""
    data = frame.copy()
    for column in ("examples", "example_ids"):
        if column in data.columns:
            data[column] = [list(v) for v in data[column]]
    arrow = pa.Table.from_pandas(data, preserve_index=False)
    clear_tables(study.con, table)
    insert_rows(study.con, table, arrow)


def _fingerprint(settings: Any) -> str:
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _stored(study: Study, kind: str) -> str | None:
    rows = study.con.execute(
        "SELECT fingerprint FROM texts_settings WHERE kind = ?", [kind]
    ).fetchall()
    return rows[0][0] if rows else None


def _store(study: Study, kind: str, fingerprint: str, settings: Any) -> None:
    study.con.execute(
        "INSERT OR REPLACE INTO texts_settings VALUES (?, ?, ?)",
        [kind, fingerprint, json.dumps(settings, sort_keys=True, default=str)],
    )


# -- what the CLI prints ----------------------------------------------------------------------
def summary_rows(study: Study) -> list[dict[str, Any]]:
    """Per occupation compared: texts and the top marked words of each side."""
    return dicts(study.sql("who_how/50_summary"))


def messages(study: Study) -> list[str]:
    """Associations per gender, agreement with the specified gender, the SRBS tests."""
    rows = study.con.execute(
        "SELECT association, count(*) FROM texts_associations GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    out = ["associations: " + ", ".join(f"{a} {n:,}" for a, n in rows)]
    for model, by, gender, spec, pct, among in study.con.execute(
        "SELECT model, specified_by, gender, specified, agreement_pct, agreement_associated_pct "
        "FROM texts_agreement WHERE specified > 0 ORDER BY model, specified_by, gender"
    ).fetchall():
        out.append(
            f"{_of(model)}agreement with {by}, {gender}: {pct:.1f} % of {spec:,} specified texts "
            f"({among if among is not None else float('nan'):.1f} % of those associated)"
        )
    for model, scope, unit, nf, nm, mf, mm, t, p in study.con.execute(
        "SELECT model, scope, unit, n_female, n_male, mean_female, mean_male, t, p "
        "FROM texts_srbs_tests ORDER BY model, scope"
    ).fetchall():
        out.append(
            f"{_of(model)}SRBS {scope} ({unit}s: {nf} women's, {nm} men's): mean {_f(mf)} vs {_f(mm)}, "
            f"Welch t = {_f(t)}, p = {_f(p, '.3g')}"
        )
    return out


def _of(model: str | None) -> str:
    """``"MODEL: "`` for a row of one model's texts (texts.source = 'llm'), else nothing."""
    return f"{model}: " if model else ""


def _f(value: float | None, fmt: str = "+.3f") -> str:
    return "n/a" if value is None or value != value else format(value, fmt)
