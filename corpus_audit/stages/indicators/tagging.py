"""The ``indicators`` labelling as engine work: caption batches served by taggers that load
spaCy (and gender-guesser's table) once per worker.

A unit is one to-do batch of the stage (``indicators.batch_size`` captions: ``caption_id``,
``text``), keyed by its batch number; the worker returns the two tables the stage inserts
(``indicators`` and ``indicator_triggers`` rows, made by :func:`batch_tables`), so the
driver writes them batch after batch, one transaction each, whatever engine ran them.

:class:`TaggerSettings` holds what a tagger depends on as plain values (picklable: no study,
no model); :class:`Tagger` is the model a worker loads from them: the gender terms, the word
matcher and, with ``use_names``, the spaCy pipeline and the name finder, whose NER runs in
``ner_processes`` processes (1 = in the worker's own process). The engine's generic model
worker serves it: ``ModelSpec(Tagger, (settings,))`` (:func:`tagger_spec`), run by
:func:`tag_batches` (:meth:`~corpus_audit.backends.engines.base.Engine.map_actors`, one CPU
per worker). The stage builds one :class:`Tagger` in the driver too, with no NER processes,
so that a bad lexicon or model fails before anything changes (spaCy is loaded once per
process: the ``local`` engine's in-process worker reuses that copy).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa

from corpus_audit.backends.engines.base import Engine, Progress, Resources
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.core.config import IndicatorsSection, StudyConfig, derived_from
from corpus_audit.core.config_fields import Help, Range
from corpus_audit.methods.gender_text import (
    IndicatorTagger,
    NameFinder,
    WordMatcher,
    load_spacy,
    readable,
)
from corpus_audit.methods.lexicon import load_gender_terms


@derived_from(
    IndicatorsSection,
    "lexicon.gender_terms",
    "base",
    "use_names",
    "spacy_model",
    "ner_batch_size",
    "ner_pipes",
    "ner_processes",
)
class TaggerSettings:
    """Everything a tagger depends on, as plain values (picklable), derived from
    ``[indicators]`` and ``lexicon.gender_terms`` (their declarations, defaults and checks),
    plus two of the tagger's own: ``base`` and ``ner_processes``.
    """

    base: Annotated[
        str | None, Help("the directory relative lexicon paths are read from (the study root)")
    ] = None
    ner_processes: Annotated[
        int,
        Range(ge=1),
        Help("processes one tagger runs NER in (1 = in its own process); the stage sets it"),
    ] = 1

    @classmethod
    def for_study(cls, config: StudyConfig, base: Path | str | None) -> TaggerSettings:
        """The settings of a study config, lexicon paths read from ``base`` (its root)."""
        settings = cls.from_config(config)  # type: ignore[attr-defined]
        return replace(settings, base=str(base) if base is not None else None, ner_processes=1)

    def with_processes(self, ner_processes: int) -> TaggerSettings:
        """The same settings with ``ner_processes`` NER processes (>= 1)."""
        return replace(self, ner_processes=max(1, int(ner_processes)))


@dataclass
class TaggedBatch:
    """One batch labelled: ``labels`` (caption_id, label, triggers) and ``triggers``
    (caption_id, kind, token, gender, guess) in the stage's table layout, the counts the
    stage reports, and (for throughput and the load-once check) the worker's ``host:pid``,
    its wall seconds on the batch and how many spaCy pipelines its process has loaded."""

    labels: pa.Table
    triggers: pa.Table
    distinct_texts: int
    ner_texts: int
    worker: str
    seconds: float
    spacy_loads: int


class Tagger:
    """Words, pronouns and names of caption batches; the models load in the constructor.

    Raises :class:`LexiconError` for a bad gender-terms file and :class:`ModelError` when
    the spaCy model cannot be loaded. ``info`` is the provenance of the loaded models.
    """

    def __init__(self, settings: TaggerSettings) -> None:
        base = Path(settings.base) if settings.base else None
        terms = load_gender_terms(settings.gender_terms, base=base)
        words = WordMatcher(terms, source=settings.gender_terms)
        names = None
        self.info: dict[str, Any] = {}
        if settings.use_names:
            import spacy  # heavy, optional: only with use_names

            nlp = load_spacy(settings.spacy_model)
            pipes = list(settings.ner_pipes) or None
            names = NameFinder(nlp, terms, settings.ner_batch_size, pipes)
            names.use_processes(settings.spacy_model, terms, settings.ner_processes)
            self.info = {
                "spacy_version": spacy.__version__,
                "spacy_pipeline": f"{nlp.meta.get('lang', '?')}_{nlp.meta.get('name', '?')}",
                "spacy_pipeline_version": nlp.meta.get("version"),
                "ner_pipes_run": names.pipes,
                "ner_batch_size": settings.ner_batch_size,
                "ner_processes": settings.ner_processes,
                "counted_first_names": len(names.names),
            }
        self.tagger = IndicatorTagger(words, names)
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch: pa.Table) -> TaggedBatch:
        """Label one batch (``caption_id``, ``text``)."""
        t0 = time.perf_counter()
        result = self.tagger.tag(batch.column("text"))
        labels, triggers = batch_tables(batch.column("caption_id"), result)
        return TaggedBatch(
            labels,
            triggers,
            result.distinct_texts,
            result.ner_texts,
            self.name,
            time.perf_counter() - t0,
            load_spacy.cache_info().misses,
        )

    def close(self) -> None:
        """Stop the NER processes (idempotent)."""
        self.tagger.close()


def tagger_spec(settings: TaggerSettings) -> ModelSpec[Tagger]:
    """The engine's model worker of ``settings``: a :class:`Tagger` loaded once per worker."""
    return ModelSpec(Tagger, (settings,))


def tag_batches(
    engine: Engine,
    spec: Any,
    batches: Iterable[tuple[int, pa.Table]],
    *,
    workers: int = 0,
    progress: bool = True,
    total: int | None = None,
) -> Iterator[tuple[int, TaggedBatch]]:
    """Label ``(batch number, table of caption_id + text)`` units with ``spec``'s workers
    (:func:`tagger_spec`, or any factory of a worker returning :class:`TaggedBatch`), one CPU
    each, ``workers`` of them (0 = the engine's default), in batch order. ``total``: the
    number of batches, for the progress bar when ``batches`` is not sized."""
    yield from engine.map_actors(
        spec,
        batches,
        resources=Resources(num_cpus=1),
        workers=workers,
        progress=Progress("indicators", unit="batch", total=total, enabled=progress),
    )


def batch_tables(caption_ids: pa.ChunkedArray, result: Any) -> tuple[pa.Table, pa.Table]:
    """The ``indicators`` and ``indicator_triggers`` rows of one tagged batch."""
    ids = caption_ids.to_pylist()
    labels = pa.table(
        {
            "caption_id": pa.array(ids, pa.int64()),
            "label": pa.array(result.labels, pa.string()),
            "triggers": pa.array([readable(t) for t in result.triggers], pa.string()),
        }
    )
    cols: dict[str, list[Any]] = {k: [] for k in ("caption_id", "kind", "token", "gender", "guess")}
    for cid, triggers in zip(ids, result.triggers, strict=True):
        for t in triggers:
            cols["caption_id"].append(cid)
            cols["kind"].append(t.kind)
            cols["token"].append(t.token)
            cols["gender"].append(t.gender)
            cols["guess"].append(t.guess)
    trig = pa.table(
        {
            "caption_id": pa.array(cols["caption_id"], pa.int64()),
            **{k: pa.array(cols[k], pa.string()) for k in ("kind", "token", "gender", "guess")},
        }
    )
    return labels, trig
