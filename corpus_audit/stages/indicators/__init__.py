"""The ``indicators`` stage: explicit gender indicators of every occupation caption (METHODS 1.6).

For every caption in ``mentions`` it writes one row of ``indicators`` (label ``male``,
``female``, ``both`` or ``none`` and a readable ``triggers`` string) and one row of
``indicator_triggers`` per trigger (kind ``word``/``pronoun``/``name``, token, gender, and for
names gender-guesser's raw answer). The matching rules live in :mod:`corpus_audit.methods.gender_text`.
Then it writes the ``no_indicators`` training subsets into ``samples``
(``indicators.no_indicator_sample``): ``split`` (default, the paper's: "we split the training
examples selected in Section 4") takes the keyword sample's captions labelled ``none`` in its
rank order, so the subset is the indicator-free part of the keyword subset; ``fresh`` draws a
new uniform random sample among all the occupation's captions labelled ``none``, ordered by the
same hash rule as the keyword sample (as many candidates as the keyword sample keeps).

How: the to-do captions are cut into batches, the units of the study's engine
(``[engine]``); workers that load spaCy once each (:mod:`corpus_audit.stages.indicators.tagging`)
label them and the driver writes each batch's rows in batch order. On the ``local`` engine one
worker runs in this process with NER in ``indicators.ner_processes`` processes (0 = the
engine's CPUs, ``engine.threads``, shared by its ``engine.workers.indicators`` workers); on
Ray each actor (1 CPU) runs NER in its own process.

Resumable: captions are labelled in batches of ``indicators.batch_size``, each committed in one
transaction with its triggers; a rerun labels only what has no label yet (a killed run loses at
most the batch in flight, nothing is written twice). When the labelling settings change (the
gender-terms lexicon, the spaCy model or its version, the NER components, ``use_names``,
gender-guesser's version) every caption is relabelled, in one transaction with the wipe.

:func:`indicator_summary` gives the per-occupation table (captions, % with any indicator,
% male-only, % female-only, % both); the stage also puts it in ``run.summary`` and the
share of occupation captions with an indicator in ``run.messages``, both as the mean over
occupations (the paper's statistic) and pooled over distinct captions. At the end of every run
it rewrites the per-corpus results, ``corpus_file_groups`` and ``corpus_summary``
(:mod:`corpus_audit.stages.indicators.corpus`, groups from ``corpus.groups``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa

from corpus_audit.backends.engines import stage_engine
from corpus_audit.backends.engines.base import ONE_CPU, Engine
from corpus_audit.core.errors import StageOrderError
from corpus_audit.core.model_sources import spacy_source
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.stage_state import StageProgress
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts
from corpus_audit.methods.gender_text import WordMatcher, gender_guesser_version
from corpus_audit.methods.lexicon import load_gender_terms
from corpus_audit.stages.indicators.corpus import file_groups, write_corpus_summary
from corpus_audit.stages.indicators.tagging import (
    Tagger,
    TaggerSettings,
    tag_batches,
    tagger_spec,
)
from corpus_audit.tables.corpora import PAPER_LAION_SHARE, corpus_summary

STAGE = "indicators"
STRATEGY = "no_indicators"
# one batch of captions to label (sql/indicators/batch.sql), as the tagger reads it
_BATCH_SCHEMA = pa.schema([("caption_id", pa.int64()), ("text", pa.string())])
MARKUP_RULE = (
    "html-unescape+strip-tags/1"  # version of gender_text.clean_markup, for the fingerprint
)


@stage_body(STAGE)
def indicators(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Label every caption of ``mentions`` and draw the ``no_indicators`` samples.

    Raises :class:`StageOrderError` when ``select`` has not run, :class:`LexiconError` for a
    bad gender-terms file and :class:`ModelError` when the spaCy model cannot be loaded.
    """
    engine = stage_engine(study.config.engine, run)  # closed with the run
    file_groups(study)  # a bad corpus.hypernymized fails here, before anything changes
    terms_spec = study.config.lexicon.gender_terms
    terms = load_gender_terms(terms_spec, base=study.root)
    WordMatcher(terms, source=terms_spec)  # validates the terms
    settings = _settings(study, terms)
    fingerprint = _fingerprint(settings)
    tagging = TaggerSettings.for_study(study.config, study.root)
    checked, relabel, orphans = _check_stored_labels(
        study, run, engine, tagging, settings, fingerprint
    )
    con = study.con
    study.sql("indicators/todo")
    todo = study.count("indicators_todo")
    labelled_now = 0
    stats = {"distinct_texts": 0, "ner_texts": 0}
    if todo:
        if not checked:  # pragma: no cover - todo > 0 implies unlabelled captions
            run.provenance.update(_check_tagger(study, engine, tagging))
        labelled_now = _label_all(study, run, engine, tagging, todo, stats, progress=progress)
    con.execute("DROP TABLE IF EXISTS indicators_todo")

    sample_rows, sample_changed = _write_no_indicator_samples(study)
    corpora_changed = write_corpus_summary(study)

    total = study.count("indicators")
    share = _share(study)
    run.rows_in = share["captions"]
    run.rows_out = total
    run.skipped = not (todo or relabel or orphans or sample_changed or corpora_changed)
    run.summary = indicator_summary(study)
    run.messages.append(_share_message(share))
    run.messages.extend(corpus_messages(corpus_summary(study)))
    run.provenance.update(_provenance(study, settings, fingerprint, share, relabel, sample_rows))
    run.provenance.update(
        {
            "captions_labelled_this_run": labelled_now,
            "distinct_texts_this_run": stats["distinct_texts"],
            "ner_texts_this_run": stats["ner_texts"],
        }
    )
    return run


def _check_stored_labels(
    study: Study,
    run: StageRun,
    engine: Engine,
    tagging: TaggerSettings,
    settings: dict[str, Any],
    fingerprint: str,
) -> tuple[bool, bool, int]:
    """Compare the stored labels with the current settings and ``select`` run; remove those
    that are stale (all of them when the settings changed). Loads a tagger here when
    labelling is due (:func:`_check_tagger`), so that a bad lexicon or model fails before
    anything changes. Returns (whether the tagger was checked, whether all labels were
    removed, how many were removed as orphans)."""
    stored_fp, stored_select = _stored_settings(study)
    select_fp = _select_fingerprint(study)
    stale = stored_fp not in (None, fingerprint) or (
        stored_fp is None and study.count("indicators") > 0
    )
    recheck = stored_select != select_fp  # select rewrote captions since the last check
    checked = False
    if stale or recheck or _share(study)["unlabelled"]:
        # everything that can fail (lexicon, model) fails here, before anything is changed
        run.provenance.update(_check_tagger(study, engine, tagging))
        checked = True
    relabel, orphans = False, 0
    if stale or recheck or stored_fp != fingerprint:
        relabel, orphans = _update_settings(study, fingerprint, settings, select_fp, stale)
    if relabel:
        run.messages.append(
            "labelling settings changed since the stored labels were made (lexicon, spaCy "
            "model, NER components or gender-guesser): relabelling all captions"
        )
    if orphans:
        run.messages.append(
            f"removed the labels of {orphans} captions that left mentions or whose text "
            "changed (select was rerun); they are labelled again"
        )
    return checked, relabel, orphans


def _provenance(
    study: Study,
    settings: dict[str, Any],
    fingerprint: str,
    share: dict[str, Any],
    relabel: bool,
    sample_rows: int,
) -> dict[str, Any]:
    """The settings and outcome the stage records (besides this run's counts)."""
    cfg = study.config.indicators
    return {
        "settings_fingerprint": fingerprint,
        "gender_terms": study.config.lexicon.gender_terms,
        "use_names": cfg.use_names,
        "spacy_model": cfg.spacy_model if cfg.use_names else None,
        "spacy_model_version": settings.get("spacy_model_version"),
        "spacy_source": settings.get("spacy_source"),  # which source served the pipeline
        "gender_guesser_version": settings.get("gender_guesser_version"),
        "relabelled_all": relabel,
        "sample_seed": _sample_seed(study),
        "sample_size": study.config.select.sample_size,
        "no_indicator_sample": cfg.no_indicator_sample,
        "no_indicators_rows": sample_rows,
        "share_with_indicator_pct": share["pct"],
        "mean_occupation_share_pct": share["mean_occupation_pct"],
    }


def indicator_summary(study: Study) -> list[dict[str, Any]]:
    """Per occupation: ``captions``, ``pct_any_indicator``, ``pct_male_only``,
    ``pct_female_only``, ``pct_both`` (percent, 0-100, one decimal) and ``captions_none``.

    Over the captions of ``mentions`` (a caption naming two occupations counts for both).
    Raises :class:`StageOrderError` while some captions of ``mentions`` have no label yet.
    """
    share = _share(study)
    if share["unlabelled"]:
        raise StageOrderError(
            f"{study.root}: {share['unlabelled']} captions in mentions have no indicator label "
            "yet; run `corpus-audit indicators` first"
        )
    return dicts(study.sql("indicators/summary"))


def corpus_share(study: Study) -> dict[str, Any]:
    """Corpus-wide: distinct occupation ``captions``, those ``with_indicator``, ``unlabelled``,
    ``pct`` (pooled: percent with an indicator among labelled captions, 0-100, or None),
    ``mean_occupation_pct`` (the mean over ``occupations`` of each one's percent: the paper's
    statistic) and ``occupations``."""
    return _share(study)


# -- steps ----------------------------------------------------------------------------------
def progress(study: Study) -> StageProgress:
    """Captions of ``mentions`` with a label, of all of them (for ``status``)."""
    share = _share(study)
    return StageProgress(share["captions"] - share["unlabelled"], share["captions"], "captions")


def _settings(study: Study, terms: Any) -> dict[str, Any]:
    """Everything a label depends on (not batch sizes): hashed into the fingerprint."""
    cfg = study.config.indicators
    settings: dict[str, Any] = {
        "words": {g: list(terms.words[g]) for g in ("male", "female")},
        "pronouns": {g: list(terms.pronouns[g]) for g in ("male", "female")},
        "markup": MARKUP_RULE,
        "use_names": cfg.use_names,
    }
    if cfg.use_names:
        settings.update(
            {
                "name_guesses": {g: list(terms.name_guesses[g]) for g in ("male", "female")},
                "spacy_model": cfg.spacy_model,
                "spacy_model_version": _model_version(cfg.spacy_model),
                "spacy_source": spacy_source(cfg.spacy_model).source,
                "ner_pipes": list(cfg.ner_pipes) or "auto",
                "gender_guesser_version": gender_guesser_version(),
            }
        )
    return settings


def _model_version(model: str) -> str:
    """The installed version of a spaCy pipeline package or path, without loading it (the
    default ``en_core_web_sm``: of the package that serves it)."""
    model = spacy_source(model).load
    try:
        return metadata.version(model)
    except (metadata.PackageNotFoundError, ValueError):
        pass
    meta = Path(model).expanduser() / "meta.json"
    if meta.is_file():
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
            return f"{data.get('name', '?')}-{data.get('version', '?')}"
        except (OSError, ValueError):
            pass
    return "unknown"


def _fingerprint(settings: dict[str, Any]) -> str:
    blob = json.dumps(settings, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _stored_settings(study: Study) -> tuple[str | None, str | None]:
    """(settings fingerprint, select fingerprint) the stored labels were checked against."""
    rows = study.con.execute(
        "SELECT fingerprint, select_fingerprint FROM indicator_settings"
    ).fetchall()
    return (rows[0][0], rows[0][1]) if len(rows) == 1 else (None, None)


def _select_fingerprint(study: Study) -> str:
    """What identifies the output of the latest ``select`` run (its own fingerprint)."""
    last = study.last_run("select") or {}
    prov = last.get("provenance") or {}
    return str(prov.get("fingerprint") or last.get("finished_at") or "")


def _update_settings(
    study: Study,
    fingerprint: str,
    settings: dict[str, Any],
    select_fp: str,
    stale: bool,
) -> tuple[bool, int]:
    """In one transaction: remove all labels when ``stale`` (other settings), else those whose
    caption left ``mentions`` or changed text; record the settings. Returns (all removed,
    how many removed as orphans)."""
    con = study.con
    before = study.count("indicators")
    with study.transaction():
        if stale:
            clear_tables(con, "indicator_triggers", "indicators", "indicator_texts")
        elif before:
            study.sql("indicators/orphans")
        con.execute("DELETE FROM indicator_settings")
        con.execute(
            "INSERT INTO indicator_settings VALUES (?, ?, ?)",
            [fingerprint, json.dumps(settings, sort_keys=True), select_fp],
        )
    con.execute("DROP TABLE IF EXISTS indicators_stale")
    removed = before - study.count("indicators")
    return stale and before > 0, 0 if stale else removed


def _workers(study: Study, engine: Engine) -> tuple[int, int]:
    """(taggers, NER processes of each): ``engine.workers.indicators`` taggers (0 = the
    engine's default: one in this process locally, one per CPU on Ray), each running NER in
    ``indicators.ner_processes`` processes, 0 = its share of the engine's CPUs (locally
    ``engine.threads`` for the one tagger; on Ray 1: the actors are the parallelism)."""
    workers = engine.actor_workers(ONE_CPU, study.config.engine.workers_for(STAGE))
    processes = study.config.indicators.ner_processes
    return workers, processes or max(1, engine.parallelism(ONE_CPU) // workers)


def _check_tagger(study: Study, engine: Engine, tagging: TaggerSettings) -> dict[str, Any]:
    """Load a tagger here, without NER processes (the word matcher and, with ``use_names``,
    spaCy + gender-guesser), so a bad lexicon or model fails before anything changes; the
    workers load their own (in this process spaCy is then reused). Returns its provenance
    with the NER processes the workers will run."""
    tagger = Tagger(tagging.with_processes(1))
    tagger.close()
    info = dict(tagger.info)
    if info:
        info["ner_processes"] = _workers(study, engine)[1]
    return info


def _label_all(
    study: Study,
    run: StageRun,
    engine: Engine,
    tagging: TaggerSettings,
    todo: int,
    stats: dict[str, int],
    *,
    progress: bool,
) -> int:
    """Label the to-do list on ``engine``: its batches are the units, labelled by the
    engine's taggers (:func:`_workers`) and written here, in batch order, one transaction
    each. Returns the captions done."""
    workers, processes = _workers(study, engine)
    run.provenance["engine"] = engine.describe()
    spec = tagger_spec(tagging.with_processes(processes))
    in_flight: dict[int, pa.Table] = {}  # the texts of the batches out with the workers

    def units() -> Iterator[tuple[int, pa.Table]]:
        for lo, table in _todo_batches(study, todo):
            in_flight[lo] = table
            yield lo, table

    done = 0
    batches = -(-todo // study.config.indicators.batch_size)
    tagged_batches = tag_batches(
        engine, spec, units(), workers=workers, progress=progress, total=batches
    )
    with contextlib.closing(tagged_batches):  # the workers stop however the loop ends
        for lo, tagged in tagged_batches:
            table = in_flight.pop(lo)
            _write_batch(study, table, tagged.labels, tagged.triggers)
            done += table.num_rows
            stats["distinct_texts"] += tagged.distinct_texts
            stats["ner_texts"] += tagged.ner_texts
    return done


def _todo_batches(study: Study, todo: int) -> Iterator[tuple[int, pa.Table]]:
    """``(lo, table of caption_id + text)`` for each batch of ``indicators_todo``, read as
    it is asked for."""
    batch = study.config.indicators.batch_size
    for lo in range(0, todo, batch):
        cols = study.sql("indicators/batch", lo=lo, hi=lo + batch).fetchnumpy()
        yield lo, pa.table(cols, schema=_BATCH_SCHEMA)


def _write_batch(study: Study, table: pa.Table, labels: pa.Table, triggers: pa.Table) -> None:
    """One labelled batch into ``indicators``, ``indicator_triggers`` and ``indicator_texts``,
    in one transaction."""
    con = study.con
    with study.transaction():
        con.register("_indicators_batch", labels)
        con.register("_indicator_triggers_batch", triggers)
        con.register("_indicator_texts_batch", table)
        try:
            study.sql("indicators/write_batch")
        finally:
            for name in ("_indicators_batch", "_indicator_triggers_batch"):
                con.unregister(name)
            con.unregister("_indicator_texts_batch")


def _sample_seed(study: Study) -> int:
    """The seed of the per-occupation samples: the same one the keyword sample uses."""
    return int(study.config.study.seed)


def _write_no_indicator_samples(study: Study) -> tuple[int, bool]:
    """(Re)write the ``no_indicators`` rows of ``samples`` when they differ from what the rule
    (``indicators.no_indicator_sample``) gives now; one transaction. Returns (rows, whether
    they were rewritten)."""
    select = study.config.select
    if study.config.indicators.no_indicator_sample == "split":
        study.sql("indicators/sample_split")
    else:
        n = select.candidates(select.sample_size)
        study.sql("indicators/sample_fresh", seed=_sample_seed(study), n=n)
    diff = study.sql("indicators/sample_diff").fetchall()[0][0]
    rows = study.count("indicators_sample_new")
    if diff:
        with study.transaction():
            study.sql("indicators/sample_write")
    study.con.execute("DROP TABLE IF EXISTS indicators_sample_new")
    return rows, bool(diff)


def _share(study: Study) -> dict[str, Any]:
    ((captions, with_indicator, unlabelled, mean_occ, occupations),) = study.sql(
        "indicators/share"
    ).fetchall()
    labelled = captions - unlabelled
    pct = round(100.0 * with_indicator / labelled, 1) if labelled else None
    return {
        "captions": int(captions),
        "with_indicator": int(with_indicator),
        "unlabelled": int(unlabelled),
        "pct": pct,
        "mean_occupation_pct": None if mean_occ is None else round(float(mean_occ), 1),
        "occupations": int(occupations),
    }


def corpus_messages(rows: list[dict[str, Any]]) -> list[str]:
    """One line per corpus group when there are several: its share with an indicator (mean
    over occupations and pooled), hypernymized groups flagged; nothing for one group (the
    pooled line says it all)."""
    groups = [r for r in rows if r["occupation"] is None and r["corpus_group"] is not None]
    if len(groups) < 2:
        return []
    parts = []
    for r in groups:
        if not r["captions"]:
            parts.append(f"{r['corpus_group']} no occupation caption")
            continue
        flag = ", hypernymized" if r["hypernymized"] else ""
        parts.append(
            f"{r['corpus_group']} {r['mean_occupation_pct']:.1f} % (pooled "
            f"{r['pct_any_indicator']:.1f} % of {r['captions']:,}{flag})"
        )
    return ["per corpus, mean over occupations: " + "; ".join(parts)]


def _share_message(share: dict[str, Any]) -> str:
    if share["pct"] is None:
        return "no occupation captions to label (mentions is empty)"
    return (
        f"captions with an explicit gender indicator: mean over {share['occupations']} "
        f"occupations {share['mean_occupation_pct']:.1f} % (the paper's statistic; LAION: "
        f"{PAPER_LAION_SHARE} %); pooled over the {share['captions']:,} distinct occupation "
        f"captions {share['pct']:.1f} % ({share['with_indicator']:,})"
    )
