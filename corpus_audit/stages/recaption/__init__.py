"""The ``recaption`` stage: a captioning model over the study's training images.

``corpus-audit recaption DIR --model PATH [--variant NAME]`` (or ``[recaption]`` in
``study.toml``; the flags are written there, so the run is reproducible from the config) runs
:func:`corpus_audit.stages.recaption.driver.recaption` over every training image of ``images`` with
the captioner of ``recaption.model`` (:func:`~corpus_audit.backends.captioners.load_captioner`:
an image-captioning model of transformers, or ``paraphrase:<spec>``, the text-only rewrite of
the image's caption) on ``engine.device``, decoding within ``images.max_pixels``.

Resumable: the sink inserts each finished batch into ``recaptions`` in one transaction, and a
rerun passes the variant's stored image ids as ``done``; a run killed with ``kill -9`` loses at
most the batch in flight and never writes an image twice (primary key (variant, image_id)).
A variant holds the captions of one captioner and settings: when the stored rows of
``recaption.variant`` have another settings fingerprint the stage stops before captioning and
says to name a new variant. The captioner's ``describe()`` (model, revision, generation
settings, versions) goes into the run's provenance. The ``variants`` stage then compares the
new variant with the original captions.

One path whatever the engine (``stage_engine(study.config.engine, run)``): the pending
batches (``recaption.batch_size`` items each) are the engine's work units
(:func:`corpus_audit.stages.recaption.driver.recaption_on_engine`): its ``prepare`` decodes
each batch of an image captioner (on the ``local`` engine in its threads, ahead of the model),
a caption worker (:func:`corpus_audit.stages.recaption.on_engine.captioner_spec`: the model
loaded once per worker; on Ray ``engine.gpus_per_worker`` GPUs and 1 CPU each,
``engine.workers.recaption`` actors) captions it, and the driver writes each batch's rows in
batch order through the sink, so the table is the same whichever engine ran it. A probe
worker of the same engine (:func:`corpus_audit.stages.recaption.on_engine.probe_spec`) loads
the captioner once first and answers its id, kind, fingerprint and description (a model that
cannot load fails before any work, and the variant is checked against its fingerprint); it is
closed before the caption workers load theirs. The driver never loads a model.
The run's provenance records the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corpus_audit.backends.captioners import CaptionInput, CaptionSettings
from corpus_audit.backends.engines import model_resources, stage_engine
from corpus_audit.backends.engines.models import model_session
from corpus_audit.core.errors import ConfigError, StudyError, printable
from corpus_audit.core.imagefile import study_image_path
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.stages.recaption.driver import RecaptionSummary, recaption_on_engine
from corpus_audit.stages.recaption.on_engine import captioner_spec, probe_spec, worker_settings

STAGE = "recaption"


@stage_body(STAGE)
def recaption_stage(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Caption every training image not yet in ``recaptions`` for ``recaption.variant``."""
    cfg = study.config.recaption
    if not cfg.model:
        raise ConfigError(
            "recaption.model: no captioning model set (corpus-audit recaption DIR --model "
            "PATH, or [recaption] model in study.toml)"
        )
    eng = study.config.engine
    items = training_items(study)
    caption_settings = worker_settings(cfg.model, settings(study), eng.gpus_per_worker)
    # probed first, on a worker of the engine: a model that cannot load fails before
    # any work, and the variant is checked against its fingerprint; the probe is closed
    # before the caption workers load their copies
    with model_session(eng, STAGE, probe_spec(cfg.model, caption_settings), run=run) as probe:
        facts = probe(None)
    check_variant(study, cfg.variant, facts.model_id, facts.fingerprint)
    done = _done(study, cfg.variant)
    summary = _recaption(
        study, run, caption_settings, facts.kind, facts.fingerprint, facts.described,
        items, done, progress,
    )  # fmt: skip
    run.rows_in = summary.items
    run.rows_out = summary.written
    run.skipped = summary.written == 0
    run.drop("unreadable", summary.unreadable)
    run.drop("no_text", summary.no_text)
    run.provenance["captioner"] = summary.settings
    run.provenance["variant"] = cfg.variant
    run.messages.append(
        f"variant {cfg.variant!r}: {summary.captioned} captioned, "
        f"{summary.already_done} already done; run `corpus-audit variants` to compare"
    )
    return run


def _recaption(
    study: Study,
    run: StageRun,
    caption_settings: CaptionSettings,
    kind: str,
    fingerprint: str,
    described: dict[str, Any],
    items: list[CaptionInput],
    done: set[str],
    progress: bool,
) -> RecaptionSummary:
    """The pending batches captioned by the engine's caption workers (1 CPU +
    ``engine.gpus_per_worker`` GPUs each, ``engine.workers.recaption`` of them on Ray), each
    batch written here in batch order, one transaction each; records the engine."""
    cfg = study.config.recaption
    eng = study.config.engine
    return recaption_on_engine(
        stage_engine(eng, run),
        captioner_spec(cfg.model, caption_settings, fingerprint),
        items,
        kind=kind,
        sink=batch_sink(study, cfg.variant),
        batch_size=caption_settings.batch_size,
        done=done,
        max_pixels=study.config.images.max_pixels,
        resources=model_resources(eng),
        workers=eng.workers_for(STAGE),
        settings=described,
        progress=progress,
    )


def settings(study: Study) -> CaptionSettings:
    """The :class:`CaptionSettings` of ``[recaption]`` on ``engine.device``."""
    return CaptionSettings.from_config(study.config)


def training_items(study: Study) -> list[CaptionInput]:
    """One :class:`CaptionInput` per training image (path resolved against the study)."""
    rows = study.sql("recaption/items").fetchall()
    if not rows:
        raise StudyError(
            "recaption: the study has no training images (run `corpus-audit images` first)"
        )
    return [
        CaptionInput(image_id, study_image_path(study.root, path), text=text, occupation=occupation)
        for image_id, path, text, occupation in rows
    ]


def check_variant(study: Study, variant: str, model_id: str, fingerprint: str) -> None:
    """A StudyError when ``variant`` already holds captions made with other settings."""
    rows = study.con.execute(
        "SELECT DISTINCT model_id, settings_fingerprint FROM recaptions WHERE variant = ? "
        "AND settings_fingerprint <> ?",
        [variant, fingerprint],
    ).fetchall()
    if rows:
        old_model, old_fp = rows[0]
        raise StudyError(
            f"recaption: variant {variant!r} holds captions of {printable(old_model)} "
            f"(settings {old_fp}); {printable(model_id)} with these settings is {fingerprint}: "
            "name a new variant (--variant NAME) or delete that variant's rows from recaptions"
        )


def _done(study: Study, variant: str) -> set[str]:
    rows = study.con.execute(
        "SELECT image_id FROM recaptions WHERE variant = ?", [variant]
    ).fetchall()
    return {r[0] for r in rows}


def batch_sink(study: Study, variant: str) -> Callable[[Any], None]:
    """The driver's sink: one batch of rows into ``recaptions`` in one transaction."""

    def write(frame: Any) -> None:
        frame = frame.assign(variant=variant, image_id=frame["image_id"].astype(str))
        with study.transaction() as con:
            con.register("_recaption_batch", frame)
            try:
                con.execute("INSERT INTO recaptions BY NAME SELECT * FROM _recaption_batch")
            finally:
                con.unregister("_recaption_batch")

    return write
