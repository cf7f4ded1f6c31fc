"""The ``generate`` stage: text-to-image images per prompt and per caption-as-prompt (METHODS 1.3, 1.5).

For each model in ``generate.models`` (several side by side, e.g. SD 1.4 and SD 1.5):

* every prompt of the ``prompts`` table (written by ``select``) gets ``images_per_prompt``
  images (500 in the paper);
* with ``generate.captions_as_prompts = ["keyword", ...]`` the captions of those training
  subsets are prompts themselves, ``images_per_caption`` images each (10 in the paper), linked
  by caption_id; a caption in several subsets is generated once (see
  ``sql/generate/caption_images.sql``). The captions are the subsets' members after the cut
  (:mod:`corpus_audit.tables.subsets`), and with ``generate.caption_prompts = "labelled"`` (default,
  the paper's P_o = S_o) only those whose training image got a confident label, so the
  lower bound compares T and G over the same captions; ``"all"`` takes every member. This
  needs the training images labelled first: ``corpus-audit run`` runs ``label`` before
  ``generate``; a subset whose cut still waits for labels gives no prompt yet;
* with ``generate.paraphraser`` set, the captions of ``paraphrase_strategies`` are paraphrased
  first (``corpus_audit.backends.paraphrasers``, stored in ``paraphrases``) and the paraphrases are
  prompts too (``images.strategy = 'paraphrased:<strategy>'``); a paraphrase that lost the
  occupation word is counted and skipped unless ``paraphrase_keep_lost``.

Seeds: image ``i`` of prompt key ``k`` for model ``m`` has seed
:func:`~corpus_audit.backends.generators.derive_seed` ``(study.seed, m, k, i)``, recorded in
``images.seed``; with ``generation_settings`` it regenerates the image alone
(:func:`regenerate_image`).

Files: ``<study>/images/generated/<model-slug>/{prompts,captions,paraphrases}/.../*.png``, one
``images`` row (source ``generated``) and one ``generated_images`` row each.

Engines: one path for every local-model backend. The work units are the batches of
``generate.batch_size`` missing images, each as its prompts and derived seeds;
``stage_engine(study.config.engine, run)`` draws them with generator workers
(:func:`generator_spec`: a :class:`~corpus_audit.backends.engines.models.ModelSpec` of
:class:`Drawer`, the pipeline loaded once per worker; on the ``local`` engine one in this
process, serving in the engine's background thread; on Ray one actor per
``engine.gpus_per_worker`` GPUs, the pixels travelling back through the object store). The
worker also returns its prompts' token counts and the generator's ``describe()``, so the
driver never loads the pipeline itself. The driver writes each batch's PNGs and then its rows
in batch order while the engine's worker draws the next batch (encoding overlaps generation
without a pool of the stage's own; a 512-px PNG at zlib level 1 encodes in ~10-20 ms, well
under the generation time of an image).

An images API (``openai:``, :mod:`corpus_audit.backends.openai_images`; a backend whose
:class:`~corpus_audit.backends.generators.GeneratorTraits` say ``per_image``) is a model
worker of the same engine (:func:`images_spec`): its load opens the client session, a unit
is ``generate.api_concurrency`` prompts asked for at once, and the driver commits each image
of a unit as one transaction and records refusals, as they came back.

Resumable and idempotent: the work is the ordered list of (model, prompt, index); a run
generates only those without an ``images`` row. A batch's files are written first
(atomically), then its rows in one transaction. An error or Ctrl-C keeps every batch written
before it; a hard kill loses at most the batches in flight (drawn, writing). Files without
rows are made again on the next run (the same pixels: same seeds). Nothing is generated twice.

Prompts longer than the text encoder's context (77 CLIP tokens) are truncated by the pipeline;
each is counted (``generated_images.truncated``, ``run.provenance["truncated_prompts"]``) and
reported in ``run.messages`` and as a ``UserWarning``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, PngImagePlugin

from corpus_audit.backends import boundary, paraphrasers
from corpus_audit.backends.engines import model_actors, stage_engine
from corpus_audit.backends.engines.base import Progress
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.backends.generators import (
    GENERATORS,
    GeneratedImage,
    GenerationSettings,
    Generator,
    derive_seed,
    generator_traits,
    model_slug,
    quiet_loading,
    split_spec,
)
from corpus_audit.backends.openai_images import (
    ImagesSession,
    commit_answers,
    not_refused,
    status_lines,
)
from corpus_audit.core.errors import ApiError, StageOrderError
from corpus_audit.core.fileio import atomic_path
from corpus_audit.core.imagefile import study_image_path
from corpus_audit.core.kinds import prompt_stage
from corpus_audit.core.slugs import slug
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.tables.subsets import CutRule, cut_study, drop, status_rows

SEED_RULE = (
    "seed = int(sha256(f'{study.seed}\\x1f{model_id}\\x1f{prompt_key}\\x1f{index}')[:8]) "
    "& (2**63 - 1); initial noise from a CPU torch.Generator per image"
)


@dataclass(frozen=True)
class PromptSpec:
    """One text given to the generator, ``n_images`` times with different seeds.

    ``key`` identifies it for seeds and resume: a prompt_id (``paper:1:nurse``),
    ``caption:<caption_id>`` or ``paraphrase:<paraphraser hash>:<occupation>:<caption_id>``.
    """

    key: str
    text: str
    n_images: int
    kind: str  # prompt | caption | paraphrase
    occupation: str | None = None
    prompt_id: str | None = None
    caption_id: int | None = None
    strategy: str | None = None


@dataclass(frozen=True)
class Job:
    """One image to make."""

    spec: PromptSpec
    index: int  # 0-based within the prompt
    seed: int
    image_id: str
    rel_path: str  # relative to the study directory


def _no_models(study: Study) -> str | None:
    """The ``off`` guard: why nothing is generated (no ``generate.models``), or None."""
    if study.config.generate.models:
        return None
    return "no text-to-image model configured (generate.models is empty): nothing generated"


@stage_body("generate", off=_no_models)
def generate(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Generate the missing images of every configured model; see the module docstring."""
    cfg = study.config.generate
    settings = settings_from_config(study)
    run.provenance.update(
        seed_rule=SEED_RULE,
        settings=asdict(settings),
        images_per_prompt=cfg.images_per_prompt,
        images_per_caption=cfg.images_per_caption,
        batch_size=cfg.batch_size,
        captions_as_prompts=list(cfg.captions_as_prompts),
    )
    specs = prompt_specs(study)
    pool = list(cfg.captions_as_prompts)
    if cfg.paraphraser:
        pool += [s for s in cfg.paraphrase_strategies if s not in pool]
    if pool:
        caption_pool(study, run, pool)
    specs += caption_specs(study, cfg.captions_as_prompts)
    if cfg.paraphraser:
        paraphrase_captions(study, run, progress=progress)
        specs += paraphrase_specs(study, run)
    study.con.execute("DROP TABLE IF EXISTS subset_prompt_captions")
    if not specs:
        raise StageOrderError(
            f"{study.root}: nothing to generate: the prompts table is empty and no captions "
            f"are used as prompts (run `corpus-audit {_prompt_stage(study)}` first)"
        )
    run.provenance["prompts"] = {
        kind: sum(1 for s in specs if s.kind == kind)
        for kind in ("prompt", "caption", "paraphrase")
    }
    run.provenance["models"] = {}
    run.provenance["truncated_prompts"] = {}
    run.provenance["nsfw_images"] = {}
    for model in cfg.models:
        _generate_model(study, run, model, specs, settings, progress=progress)
    if run.rows_out == 0 and not run.provenance.get("paraphrased"):
        run.skip(f"all {run.rows_in} images already present: nothing generated")
    return run


def settings_from_config(study: Study) -> GenerationSettings:
    """The generation settings of the study config (``generate`` + ``engine.device``)."""
    return GenerationSettings.from_config(study.config)


# -- what to generate -----------------------------------------------------------------------
def _prompt_stage(study: Study) -> str:
    return prompt_stage(study.config)


def prompt_specs(study: Study) -> list[PromptSpec]:
    """The prompt-set prompts, in (set, template, occupation) order."""
    n = study.config.generate.images_per_prompt
    query = "SELECT prompt_id, text, occupation FROM prompts ORDER BY prompt_set, template_id, occupation"
    if study.config.pst.enabled:  # a PST study: the prompts of `pst_prompts` (docs/pst.md)
        query = "SELECT prompt_id, text, occupation FROM pst_prompts ORDER BY prompt_id"
    rows = study.con.execute(query).fetchall()
    return [PromptSpec(pid, text, n, "prompt", occ, prompt_id=pid) for pid, text, occ in rows]


def _check_strategies(study: Study, strategies: Sequence[str], key: str) -> None:
    for strategy in strategies:
        if not study.count("samples", "strategy = ?", [strategy]):
            raise StageOrderError(
                f"{study.root}: {key} names strategy '{strategy}' but the samples table has no "
                "rows for it (run select/indicators/neighbors first, or fix the name: keyword, "
                "no_indicators, nn, nn_no_indicators)"
            )


def caption_pool(study: Study, run: StageRun, strategies: Sequence[str]) -> None:
    """Create the temp table ``subset_prompt_captions``: the captions of the subsets of
    ``strategies`` (after the cut) that may be prompts (``generate.caption_prompts``); say in
    ``run.messages`` how many, and which subsets wait for training labels."""
    which = study.config.generate.caption_prompts
    for key in ("captions_as_prompts", "paraphrase_strategies"):
        mine = [s for s in getattr(study.config.generate, key) if s in strategies]
        _check_strategies(study, mine, f"generate.{key}")
    cut_study(study)
    try:
        study.sql("generate/caption_pool", strategies=list(strategies), which=which)
        status = status_rows(study, CutRule.from_config(study.config))
    finally:
        drop(study.con)
        study.con.execute("DROP TABLE IF EXISTS analysis_labelled")
    counts = dict(
        study.con.execute(
            "SELECT strategy, count(DISTINCT caption_id) FROM subset_prompt_captions GROUP BY 1"
        ).fetchall()
    )
    pending = [r for r in status if r["strategy"] in strategies and r["pending"]]
    run.provenance["caption_prompts"] = {"which": which, "captions": counts}
    run.messages.append(
        "captions as prompts ("
        + ("those with a labelled training image" if which == "labelled" else "every member")
        + " of the subsets after the cut): "
        + ", ".join(f"{s} {counts.get(s, 0)}" for s in strategies)
    )
    if which == "labelled" and not any(counts.values()) and not pending:
        run.messages.append(
            "no caption of these subsets has a labelled training image, so none is a prompt "
            "(register and label the training images: `images`, `label`; or set "
            'generate.caption_prompts = "all")'
        )
    if pending:
        run.messages.append(
            f"{len(pending)} subset(s) of {', '.join(strategies)} still have training images "
            "without a face-filter result or label: their captions are not prompts yet (run "
            "`label`, then `generate` again)"
        )


def caption_specs(study: Study, strategies: Sequence[str]) -> list[PromptSpec]:
    """Captions of the subsets of ``strategies`` as prompts (each caption once); needs
    :func:`caption_pool` first."""
    if not strategies:
        return []
    n = study.config.generate.images_per_caption
    rows = study.sql("generate/caption_prompts", strategies=list(strategies)).fetchall()
    return [
        PromptSpec(f"caption:{cid}", text, n, "caption", occ, caption_id=cid, strategy=strategy)
        for cid, text, strategy, occ in rows
        if text and text.strip()
    ]


def _paraphraser_name(spec: str) -> str:
    return paraphrasers.paraphraser_name(spec)


def paraphrase_captions(study: Study, run: StageRun, *, progress: bool = True) -> None:
    """Paraphrase the captions of ``paraphrase_strategies`` that have no paraphrase yet.

    Rows go to ``paraphrases`` one batch per transaction (a killed run keeps finished batches).
    """
    cfg = study.config.generate
    strategies = list(cfg.paraphrase_strategies)
    name = _paraphraser_name(cfg.paraphraser)
    todo = study.sql("generate/paraphrase_todo", strategies=strategies, paraphraser=name).fetchall()
    run.provenance["paraphraser"] = {"name": name, "strategies": strategies}
    if not todo:
        return
    occupations = {
        o.name: o for o in load_occupations(study.config.lexicon.occupations, study.root)
    }
    backend, _, model = name.partition(":")
    source = study.config.resolve(model)
    spec = ModelSpec(
        _load_paraphraser,
        (
            f"{backend}:{source if source.exists() else model}",
            study.config.engine.device,
            cfg.paraphrase_max_new_tokens,
            cfg.paraphrase_batch_size,
            not progress,
        ),
        _serve_paraphrases,
    )
    batches = list(_chunks(todo, cfg.paraphrase_batch_size))
    units = [(i, _paraphrase_inputs(batch, occupations)) for i, batch in enumerate(batches)]
    done = lost = 0
    bar = Progress("paraphrase", "batch", len(units), progress)
    try:
        with model_actors(
            study.config.engine, "generate", spec, units, run=run, progress=bar
        ) as results:
            for i, (texts, described) in results:
                run.provenance["paraphraser"].update(described, name=name)
                rows = _paraphrase_rows(batches[i], texts, occupations, name)
                lost += sum(not keep for _c, _n, _t, keep, _o in rows)
                with study.transaction() as con:
                    con.executemany(
                        "INSERT INTO paraphrases (caption_id, paraphraser, text, contains_occupation, "
                        "occupation) VALUES (?, ?, ?, ?, ?)",
                        rows,
                    )
                done += len(rows)
    finally:
        run.provenance["paraphrased"] = done
        run.provenance["paraphrases_lost_occupation"] = lost
    run.messages.append(
        f"paraphrased {done} caption(s) with {name}; {lost} lost the occupation word"
    )


def _load_paraphraser(
    spec: str, device: str, max_new_tokens: int, batch_size: int, quiet: bool
) -> Any:
    """The paraphraser of a worker (:func:`paraphrasers.load_paraphraser`), its loading bars
    hidden when ``quiet``."""
    with quiet_loading(quiet):
        return paraphrasers.load_paraphraser(
            spec, device=device, max_new_tokens=max_new_tokens, batch_size=batch_size
        )


def _serve_paraphrases(
    paraphraser: Any, pairs: list[tuple[str, str]]
) -> tuple[list[str], dict[str, Any]]:
    """One batch of (caption, occupation word) paraphrased, with the paraphraser's description."""
    return paraphraser.paraphrase(pairs), paraphraser.describe()


def _paraphrase_inputs(
    batch: Sequence[tuple[int, str, str]], occupations: dict[str, Any]
) -> list[tuple[str, str]]:
    """(caption text, the occupation's display word) of each (caption_id, occupation, text)."""
    out = []
    for _cid, occ, text in batch:
        o = occupations.get(occ)
        out.append((text, o.display if o else occ))
    return out


def _paraphrase_rows(
    batch: Sequence[tuple[int, str, str]],
    texts: Sequence[str],
    occupations: dict[str, Any],
    name: str,
) -> list[tuple[int, str, str, bool, str]]:
    """The ``paraphrases`` rows (caption_id, paraphraser, text, contains_occupation,
    occupation) of one batch of (caption_id, occupation, text) and its paraphrases."""
    rows = []
    for (cid, occ, _t), text in zip(batch, texts, strict=True):
        o = occupations.get(occ)
        forms = o.forms if o else (occ,)
        keep = bool(text) and paraphrasers.keeps_occupation(text, forms)
        rows.append((cid, name, text, keep, occ))
    return rows


def paraphrase_specs(study: Study, run: StageRun) -> list[PromptSpec]:
    """Paraphrases as prompts; those that lost the occupation word are skipped (counted)."""
    cfg = study.config.generate
    name = _paraphraser_name(cfg.paraphraser)
    tag = hashlib.sha256(name.encode()).hexdigest()[:8]
    rows = study.sql(
        "generate/paraphrase_prompts",
        strategies=list(cfg.paraphrase_strategies),
        paraphraser=name,
    ).fetchall()
    specs = []
    for cid, occ, strategy, text, contains in rows:
        if not text or not text.strip():
            run.drop("paraphrase_empty")
            continue
        if not contains and not cfg.paraphrase_keep_lost:
            run.drop("paraphrase_lost_occupation")
            continue
        specs.append(
            PromptSpec(
                f"paraphrase:{tag}:{occ}:{cid}", text, cfg.images_per_caption, "paraphrase", occ,
                caption_id=cid, strategy=f"paraphrased:{strategy}",
            )
        )  # fmt: skip
    return specs


def _safe(part: str) -> str:
    return slug(part)


def image_path(slug: str, spec: PromptSpec, index: int, seed: int) -> str:
    """Where an image goes, relative to the study directory (POSIX separators)."""
    base = f"images/generated/{slug}"
    if spec.kind == "prompt":
        return f"{base}/prompts/{_safe(spec.key)}/{index:04d}_{seed}.png"
    shard = f"{int(spec.caption_id or 0) % 1000:03d}"
    if spec.kind == "caption":
        return f"{base}/captions/{shard}/{spec.caption_id}_{index:03d}_{seed}.png"
    _, tag, occ, _cid = spec.key.split(":", 3)
    return f"{base}/paraphrases/{tag}/{shard}/{spec.caption_id}_{_safe(occ)}_{index:03d}_{seed}.png"


def plan_jobs(study_seed: int, model_id: str, specs: Sequence[PromptSpec]) -> list[Job]:
    """Every image of ``model_id``, in prompt order then index order."""
    slug = model_slug(model_id)
    jobs = []
    for spec in specs:
        for index in range(spec.n_images):
            seed = derive_seed(study_seed, model_id, spec.key, index)
            image_id = f"gen:{slug}:{spec.key}:{seed}"
            jobs.append(Job(spec, index, seed, image_id, image_path(slug, spec, index, seed)))
    return jobs


# -- generation -----------------------------------------------------------------------------
def _generate_model(
    study: Study,
    run: StageRun,
    model: str,
    specs: Sequence[PromptSpec],
    settings: GenerationSettings,
    *,
    progress: bool,
) -> None:
    """Generate the planned images of ``model`` that the study lacks, then record the model's
    counts (summary row, provenance, truncation messages)."""
    slug = model_slug(model)
    jobs = plan_jobs(study.config.study.seed, model, specs)
    present = set(
        study.column(
            "SELECT image_id FROM images WHERE source = 'generated' AND model_id = ?", [model]
        )
    )
    missing = [j for j in jobs if j.image_id not in present]
    stale = len(present - {j.image_id for j in jobs})
    if stale:  # made under another study seed, prompt set, paraphraser or config
        run.provenance.setdefault("images_not_in_plan", {})[model] = stale
        run.messages.append(
            f"{slug}: {stale} earlier generated image(s) are not in the current plan (another "
            "seed, prompt or paraphraser); they stay in the images table"
        )
    run.rows_in += len(jobs)
    made, truncated_now, limit = 0, 0, None
    if missing and generator_traits(model).per_image:
        made = _generate_per_image(study, run, model, missing, settings, progress=progress)
    elif missing:
        made, truncated_now, limit = _generate_missing(
            study, run, model, missing, settings, progress=progress
        )
    run.rows_out += made
    _record_model(study, run, model, len(specs), made, truncated_now, limit)


def _generate_missing(
    study: Study,
    run: StageRun,
    model: str,
    missing: Sequence[Job],
    settings: GenerationSettings,
    *,
    progress: bool,
) -> tuple[int, int, int | None]:
    """Generate the ``missing`` jobs on the study's engine, batch by batch (units: each
    batch's prompts and derived seeds, so an image is the same whichever worker drew it);
    each batch's files are written here, then its rows in one transaction, in batch order.
    Returns (images made, prompts of them the text encoder truncates, its token limit)."""
    eng = study.config.engine
    backend, name = split_spec(model)
    path = study.config.resolve(name)
    spec = generator_spec(backend, str(path) if path.exists() else name, settings, not progress)
    batches = list(_chunks(missing, study.config.generate.batch_size))
    units = [
        (i, (tuple(j.spec.text for j in batch), tuple(j.seed for j in batch)))
        for i, batch in enumerate(batches)
    ]
    made = 0
    settings_id = ""
    limit: int | None = None
    truncated: set[str] = set()
    bar = Progress(f"generate {model_slug(model)}", unit="batch", enabled=progress)
    with model_actors(eng, "generate", spec, units, run=run, progress=bar) as results:
        for i, drawn in results:
            batch = batches[i]
            _check_count(model, drawn.images, batch)
            if not settings_id:  # the first batch: the model as its worker describes it
                run.provenance["models"][model] = drawn.details
                settings_id = _record_settings(study, model, drawn.details)
            limit = drawn.limit
            tokens = dict(zip((j.spec.text for j in batch), drawn.tokens, strict=True))
            truncated.update(t for t, n in tokens.items() if limit and n > limit)
            # the files first, then the rows: while they are written, the engine's
            # worker draws the next batch
            for job, image in zip(batch, drawn.images, strict=True):
                _write_file(study, model, job, image, drawn.details)
            _insert_rows(study, model, settings_id, batch, drawn.images, tokens, limit)
            made += len(batch)
    return made, len(truncated), limit


@dataclass(frozen=True)
class Drawn:
    """What a generator worker returns per batch: one image per prompt, the prompts' token
    counts (in batch order), the text encoder's context in tokens (None if unknown) and the
    generator's ``describe()``."""

    images: list[GeneratedImage]
    tokens: list[int]
    limit: int | None
    details: dict[str, Any]


class Drawer:
    """A local-model generator loaded once per worker (``backend``'s factory on ``model``,
    a path or hub id, with ``settings``; device ``auto``: the GPU the engine gave the worker,
    if any), drawing ``(prompts, seeds)`` batches."""

    def __init__(
        self, backend: str, model: str, settings: GenerationSettings, quiet: bool = True
    ) -> None:
        # a plugin's exception is one line naming it; what it returns is checked here,
        # before the driver stores an image (backends/boundary.py)
        self.who = boundary.backend_name(GENERATORS, backend)
        self.plugin = boundary.is_plugin(GENERATORS, backend)
        with quiet_loading(quiet):
            factory = GENERATORS.get(backend)
            self.generator = boundary.call(
                self.who, self.plugin, "loading the model", factory, model, settings
            )
        self.details = boundary.call(self.who, self.plugin, "describe", self.generator.describe)

    def __call__(self, payload: tuple[tuple[str, ...], tuple[int, ...]]) -> Drawn:
        texts, seeds = payload
        who, plugin, gen = self.who, self.plugin, self.generator
        got = boundary.call(who, plugin, "generate", gen.generate, list(texts), list(seeds))
        images = boundary.check_count(got, len(texts), who, "generate", "prompts")
        for i, image in enumerate(images):
            boundary.check_image(image, who, i, len(images))
        counted = boundary.call(who, plugin, "count_tokens", gen.count_tokens, list(texts))
        tokens = boundary.check_counts(counted, len(texts), who, "count_tokens")
        return Drawn(images, tokens, self.generator.max_prompt_tokens, self.details)

    def close(self) -> None:
        self.generator.close()


def generator_spec(
    backend: str, model: str, settings: GenerationSettings, quiet: bool = True
) -> ModelSpec:
    """The generator workers' recipe (picklable): a :class:`Drawer` per worker."""
    return ModelSpec(Drawer, (backend, model, settings, quiet))


def _generate_per_image(
    study: Study,
    run: StageRun,
    model: str,
    missing: Sequence[Any],
    settings: GenerationSettings,
    *,
    progress: bool,
) -> int:
    """An images API (``openai:``) on the run's engine: its worker (:func:`images_spec`)
    asks for ``generate.api_concurrency`` prompts at a time; each image is committed as its
    unit comes back, refusals recorded (:func:`~corpus_audit.backends.openai_images.commit_answers`).
    A final error stops asking (the answers in flight are kept) and is raised after them."""
    todo = not_refused(study, run, model, missing)
    size = study.config.generate.api_concurrency
    chunks = list(_chunks(todo, size)) or [[]]  # none to ask: one empty unit, to describe
    units = [(i, tuple(j.spec.text for j in chunk)) for i, chunk in enumerate(chunks)]
    made, settings_id, failed = 0, "", None
    bar = Progress(f"generate {model}", "batch", len(units), progress and bool(todo))
    eng = study.config.engine
    # a client needs no GPU: one CPU per worker (ONE_CPU), engine.workers.generate of them
    got = stage_engine(eng, run).map_actors(
        images_spec(study, model, settings), units, workers=eng.workers_for("generate"),
        progress=bar,
    )  # fmt: skip
    with contextlib.closing(got):
        for i, (details, answers) in got:
            if not settings_id:  # the first unit: the API as its worker describes it
                run.provenance["models"][model] = details
                settings_id = _record_settings(study, model, details)
            n, error = commit_answers(study, run, model, settings_id, chunks[i], answers, details)
            made += n
            failed = failed or error
            if failed:
                break
    if failed:
        raise ApiError(
            f"{model}: {failed} ({made} image(s) of this run are kept; run generate again to "
            "ask for the rest)"
        )
    return made


def images_spec(study: Study, model: str, settings: GenerationSettings) -> ModelSpec:
    """The images API's worker recipe (picklable): an
    :class:`~corpus_audit.backends.openai_images.ImagesSession` per worker, with the
    ``[generate]`` section and the study's ``images.max_pixels``."""
    backend, name = split_spec(model)
    config = study.config
    return ModelSpec(
        ImagesSession, (backend, name, settings, config.generate, int(config.images.max_pixels))
    )


def _check_count(model: str, images: Sequence[Any], batch: Sequence[Any]) -> None:
    """A generator must return one image per prompt of the batch."""
    if len(images) != len(batch):
        raise RuntimeError(f"{model}: generator returned {len(images)} images for {len(batch)}")


def _record_model(
    study: Study,
    run: StageRun,
    model: str,
    n_specs: int,
    made: int,
    truncated_now: int,
    limit: int | None,
) -> None:
    """The model's summary row, provenance counts and truncation notes (all its images)."""
    slug = model_slug(model)
    stats = study.sql("generate/model_stats", model=model).fetchone()
    total, nsfw, truncated = (int(x or 0) for x in stats)
    run.provenance["truncated_prompts"][model] = truncated
    run.provenance["nsfw_images"][model] = nsfw
    if truncated:
        run.messages.append(
            f"{slug}: {truncated} prompt(s) longer than the text encoder's context were "
            "truncated (generated_images.truncated)"
        )
    if truncated_now:  # a Python warning for what this run generated
        warnings.warn(
            f"{slug}: {truncated_now} prompt(s) longer than the text encoder's context "
            f"({limit} tokens) were truncated",
            UserWarning,
            stacklevel=4,
        )
    row = {"model": slug, "prompts": n_specs, "images": total, "new": made, "nsfw": nsfw,
           "truncated_prompts": truncated}  # fmt: skip
    if generator_traits(model).per_image:  # an images API
        run.messages += [line for line in status_lines(study) if line.startswith(f"{model}:")]
    run.summary.append(row)
    run.outputs[f"images {slug}"] = str(study.root / "images" / "generated" / slug)


def _record_settings(study: Study, model: str, details: dict[str, Any]) -> str:
    blob = json.dumps(details, sort_keys=True, default=str)
    settings_id = hashlib.sha256(blob.encode()).hexdigest()[:16]
    s = details.get("settings", {})
    with study.transaction() as con:
        con.execute(
            "INSERT INTO generation_settings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            [
                settings_id, model, details.get("backend", ""), details.get("scheduler"),
                s.get("steps"), s.get("guidance_scale"), s.get("height"), s.get("width"),
                details.get("dtype", ""), str(details.get("device", "")).split(":")[0],
                s.get("nsfw_policy", ""), blob,
            ],
        )  # fmt: skip
    return settings_id


def _write_file(
    study: Study, model: str, job: Job, image: GeneratedImage, details: dict[str, Any]
) -> None:
    """Write one image as PNG (tmp file + rename), with its recipe in an iTXt chunk.

    zlib level 1: about 3x faster than Pillow's default 6 for ~10 % larger files, so encoding
    keeps up with a GPU (on the driver, while the engine's worker draws the next batch).
    """
    s = details.get("settings", {})
    path = study.path(job.rel_path)
    info = PngImagePlugin.PngInfo()
    recipe = {
        "model_id": model, "prompt": job.spec.text, "seed": job.seed,
        "steps": s.get("steps"), "guidance_scale": s.get("guidance_scale"),
        "scheduler": details.get("scheduler"), "image_id": job.image_id,
    }  # fmt: skip
    info.add_itxt("corpus_audit", json.dumps(recipe, ensure_ascii=False))
    with atomic_path(path) as tmp:
        Image.fromarray(image.pixels).save(tmp, format="PNG", pnginfo=info, compress_level=1)


def _insert_rows(
    study: Study,
    model: str,
    settings_id: str,
    batch: Sequence[Job],
    images: Sequence[GeneratedImage],
    tokens: dict[str, int],
    limit: int | None,
) -> None:
    """The batch's ``images`` + ``generated_images`` rows, in one transaction."""
    image_rows = []
    gen_rows = []
    batch_id = uuid.uuid4().hex[:16]
    for pos, (job, image) in enumerate(zip(batch, images, strict=True)):
        spec = job.spec
        image_rows.append(
            (job.image_id, "generated", spec.caption_id, spec.prompt_id, spec.occupation,
             job.rel_path, model, spec.text, job.seed, image.nsfw, spec.strategy)
        )  # fmt: skip
        n = tokens.get(spec.text)
        gen_rows.append(
            (job.image_id, settings_id, spec.key, job.index, n,
             bool(limit and n is not None and n > limit), batch_id, pos)
        )  # fmt: skip
    with study.transaction() as con:
        con.executemany(
            "INSERT INTO images (image_id, source, caption_id, prompt_id, occupation, path, "
            "model_id, prompt_text, seed, nsfw, strategy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            image_rows,
        )
        con.executemany("INSERT INTO generated_images VALUES (?, ?, ?, ?, ?, ?, ?, ?)", gen_rows)


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), max(1, size)):
        yield items[start : start + size]


# -- one image again ------------------------------------------------------------------------
def regenerate_image(
    study: Study, image_id: str, *, generator: Generator | None = None, exact: bool = True
) -> GeneratedImage:
    """Make one generated image again from its recorded model, prompt, seed and settings.

    The seed alone fixes the initial noise, but the numerics of a batched call depend a little
    on the batch, so with ``exact`` (default) the whole original batch is replayed (its other
    prompts and seeds are recorded) and this image returned: the same pixels as the stored file
    on the same device type, dtype and library versions. ``exact=False`` generates the image
    alone: the same picture within rounding (pixel values within 1-2 levels).
    Pass ``generator`` to reuse a loaded model (it must have the recorded settings); else
    the model is loaded by the stage's worker recipe (:func:`generator_spec`) in this process:
    ``corpus-audit regenerate`` is a command of one image, not a stage run with an engine.
    """
    row = study.sql("generate/regenerate_image", image_id=image_id).fetchone()
    if row is None and study.count("images", "image_id = ? AND origin LIKE 'import:%'", [image_id]):
        raise StageOrderError(
            f"{study.root}: image '{image_id}' was imported (import-images): it cannot be "
            "regenerated, the study has no recipe for it"
        )
    if row is None:
        raise StageOrderError(f"{study.root}: no generated image '{image_id}' in this study")
    model, text, seed, details, batch_id, batch_pos = row
    if seed is None:  # an images API: no seed (corpus_audit/backends/openai_images.py)
        raise StageOrderError(
            f"{study.root}: image '{image_id}' of {model} came from an images API and cannot be "
            "regenerated: the API takes no seed"
        )
    prompts, seeds, pick = [text], [int(seed)], 0
    if exact and batch_id is not None:
        batch = study.sql("generate/regenerate_batch", batch_id=batch_id).fetchall()
        prompts, seeds, pick = [b[0] for b in batch], [int(b[1]) for b in batch], int(batch_pos)
    if generator is not None:
        return generator.generate(prompts, seeds)[pick]
    recorded = json.loads(details)["settings"]
    recorded["device"] = study.config.engine.device
    # a command of one image, outside any stage run (so no run's engine): the generate
    # stage's own worker recipe, built once here
    backend, name = split_spec(model)
    path = study.config.resolve(name)
    source = str(path) if path.exists() else name
    worker = generator_spec(backend, source, GenerationSettings(**recorded), quiet=False)()
    try:
        return worker((tuple(prompts), tuple(seeds))).images[pick]
    finally:
        worker.close()


def save_regenerated(
    study: Study, image_id: str, out: Path | None = None, *, exact: bool = True
) -> tuple[Path, bool | None]:
    """``corpus-audit regenerate``: make one generated image again and write it as PNG.

    ``out`` defaults to ``<study>/regenerated/<image_id with unsafe characters as _>.png``.
    Returns the path written and whether its pixels equal the stored file's (None when the
    stored file is missing or unreadable).
    """
    image = regenerate_image(study, image_id, exact=exact)
    stored_rel = study.con.execute(
        "SELECT path FROM images WHERE image_id = ?", [image_id]
    ).fetchall()[0][0]
    if out is None:
        safe = slug(image_id, strip="._", empty="image")
        out = study.root / "regenerated" / f"{safe}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image.pixels).save(out, format="PNG")
    try:
        with Image.open(study_image_path(study.root, stored_rel)) as im:
            same: bool | None = bool(np.array_equal(np.asarray(im.convert("RGB")), image.pixels))
    except OSError:
        same = None
    return out, same
