"""Stage ``faircritic``: the FairCritic loop over the study's paired prompts (METHODS 2).

Off unless ``pst.faircritic_rounds`` >= 1 and a model is configured. For each prompt of
``pst.faircritic_prompts`` (default: every paired prompt of the plain variant) the loop of
:class:`corpus_audit.methods.pst.critic.FairCritic` runs ``pst.faircritic_rounds`` rounds of
``pst.faircritic_images`` images from the first ``generate.models`` entry: the critic is the
project's labeller (``label.face_detector`` and the classifier of ``[label]``, the two-face
rule, "biased" when the share of stereotype-following persons exceeds ``pst.bias_threshold``)
and the writer is ``pst.faircritic_writer`` (:data:`WRITERS`: ``template``, the templates
file's ``[feedback]`` texts, or ``transformers:<model>``, a local instruction-tuned LM). The loop's images are judged
in memory and not stored; every round's prompt, judgement and score is.

Engines: the generator, the critic's models and the writer are one model worker of the
run's engine (:func:`load_loop`); a round is one request to it (:func:`play_round`), the next
round's text made from the answer, so the models are loaded once, never on the driver.

Resumable per round: :class:`TableRoundStore` writes each round to ``pst_rounds`` in its own
transaction before the next round starts, and a rerun continues after the last stored round
(more rounds later: raise ``pst.faircritic_rounds`` and run again). Rounds are kept per
(model, prompt): another model starts its own rounds.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from corpus_audit.backends.classifiers import build_classifier
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.base import close_worker, track
from corpus_audit.backends.engines.models import ModelSpec, model_session
from corpus_audit.backends.faces import FaceRule, face_model_setting, get_face_detector
from corpus_audit.backends.feedback import WRITERS
from corpus_audit.backends.generators import GenerationSettings, derive_seed, open_generator
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, dicts, insert_rows
from corpus_audit.methods.lexicon.pst import PstPrompt, load_roles, load_templates
from corpus_audit.methods.pst.critic import (
    ROUND_COLUMNS,
    BatchGenerator,
    FairCritic,
    LabellerCritic,
    run_rounds,
)
from corpus_audit.tables.pst_frames import stored_prompts

NAME = "faircritic"


class TableRoundStore:
    """A :class:`corpus_audit.methods.pst.critic.RoundStore` over ``pst_rounds``, for one model."""

    def __init__(self, study: Study, model_id: str) -> None:
        self.study = study
        self.model_id = model_id

    def load(self, prompt_id: str) -> list[dict[str, Any]]:
        cur = self.study.con.execute(
            "SELECT * FROM pst_rounds WHERE model_id = ? AND prompt_id = ? ORDER BY round",
            [self.model_id, prompt_id],
        )
        rows = [{c: row[c] for c in ROUND_COLUMNS} for row in dicts(cur)]
        for row in rows:
            for key in ("share_stereotyped", "ss"):
                if isinstance(row[key], float) and math.isnan(row[key]):
                    row[key] = None
        return rows

    def save(self, record: dict[str, Any]) -> None:
        with self.study.transaction() as con:
            insert_rows(con, "pst_rounds", [{"model_id": self.model_id, **record}])


def chosen_prompts(study: Study) -> list[PstPrompt]:
    """The prompts of ``pst.faircritic_prompts`` (default: every paired plain prompt);
    a :class:`ConfigError` names ids that are not two-person prompts of ``pst_prompts``."""
    prompts = stored_prompts(study)
    wanted = study.config.pst.faircritic_prompts
    if not wanted:
        return [p for _, p in sorted(prompts.items()) if (p.kind, p.variant) == ("paired", "plain")]
    bad = [pid for pid in wanted if pid not in prompts or prompts[pid].kind == "single"]
    if bad:
        raise ConfigError(
            f"pst.faircritic_prompts: not a paired or power prompt of pst_prompts: {', '.join(bad)}"
        )
    return [prompts[pid] for pid in wanted]


def from_generator(generator: Any) -> BatchGenerator:
    """A :class:`~corpus_audit.methods.pst.critic.BatchGenerator` over a
    :class:`corpus_audit.backends.generators.Generator`: image ``i`` of a round gets the seed
    ``derive_seed(round seed, model, prompt, i)``, so a round is reproducible image by image."""

    def batch(prompt: str, n: int, seed: int) -> list[np.ndarray]:
        seeds = [derive_seed(seed, generator.model_id, prompt, i) for i in range(n)]
        return [g.pixels for g in generator.generate([prompt] * n, seeds)]

    return batch


def loop_args(study: Study, model: str) -> tuple[Any, ...]:
    """The arguments of :func:`load_loop` (picklable: the config, the model spec, the
    templates and roles files read here)."""
    cfg = study.config.pst
    templates = load_templates(cfg.templates, study.root)
    return (study.config, model, templates, load_roles(cfg.roles, study.root))


class LoopWorker:
    """A loaded FairCritic (:func:`load_loop`) serving rounds; ``close()`` frees its
    generator (the GPU memory of a diffusion pipeline, an API's client session)."""

    def __init__(self, loop: FairCritic, generator: Any) -> None:
        self.loop = loop
        self.generator = generator

    def close(self) -> None:
        close_worker(self.generator)  # a plugin's generator may have no close()


def load_loop(config: Any, model: str, templates: Any, roles: Any) -> LoopWorker:
    """One FairCritic worker (the ``load`` of the stage's :class:`ModelSpec`): the generator
    of ``model``, the labeller critic of ``[label]`` and the writer of
    ``pst.faircritic_writer``, with the rounds and images of ``[pst]``. The writers read
    only ``study.config``, so they get the config (as a study's ``config`` attribute)."""
    cfg, label = config.pst, config.label
    classifier = build_classifier(label, device=config.engine.device, seed=config.study.seed)
    detector = get_face_detector(
        label.face_detector,
        face_model=face_model_setting(label.face_model, label.model_dir),
        min_detection_confidence=label.min_detection_confidence,
    )
    critic = LabellerCritic(
        detector,
        classifier,
        threshold=label.threshold,
        bias_threshold=cfg.bias_threshold,
        rule=FaceRule.of(label),
    )
    make_writer = WRITERS.get(cfg.faircritic_writer.partition(":")[0])
    writer = make_writer(cfg.faircritic_writer, templates, roles, SimpleNamespace(config=config))
    generator = open_generator(
        config, model, GenerationSettings.from_config(config), progress=False
    )
    loop = FairCritic(
        from_generator(generator),
        critic,
        writer,
        rounds=cfg.faircritic_rounds,
        images_per_round=cfg.faircritic_images,
        seed=config.study.seed,
    )
    return LoopWorker(loop, generator)


def play_round(worker: LoopWorker, payload: tuple[PstPrompt, str, int]) -> dict[str, Any]:
    """The ``serve`` of a FairCritic worker: one round (prompt, its text, its number) played,
    its record returned (the driver saves it)."""
    return worker.loop.play(*payload)


def _off(study: Study) -> str | None:
    """The ``off`` guard: why FairCritic does not run (no rounds, no generator to call
    again), or None."""
    rounds, models = study.config.pst.faircritic_rounds, study.config.generate.models
    if rounds and not models and _imported(study):
        return (
            "FairCritic needs a generator it can call again, and this study's images were "
            "imported (import-images): an import cannot make new images. Add a model to "
            "generate.models (openai:<model> for an images API, or a diffusers model) to run it"
        )
    if rounds == 0 or not models:
        return "FairCritic is off (pst.faircritic_rounds = 0 or no generate.models)"
    return None


@stage_body(NAME, off=_off)
def faircritic(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Run the missing FairCritic rounds; see the module docstring."""
    cfg = study.config.pst
    prompts = chosen_prompts(study)
    model = study.config.generate.models[0]
    before = study.count("pst_rounds", "model_id = ?", [model])
    run.rows_in = len(prompts) * cfg.faircritic_rounds
    if before >= run.rows_in and all(
        study.count("pst_rounds", "model_id = ? AND prompt_id = ?", [model, p.prompt_id])
        >= cfg.faircritic_rounds
        for p in prompts
    ):
        run.skipped = True
    else:
        _run_rounds(study, run, model, prompts, progress=progress)
    run.rows_out = study.count("pst_rounds", "model_id = ?", [model]) - before
    run.summary = round_summary(study, model)
    run.provenance.update(model=model, rounds=cfg.faircritic_rounds)
    return run


def _run_rounds(
    study: Study, run: StageRun, model: str, prompts: list[PstPrompt], *, progress: bool
) -> None:
    """Every prompt's missing rounds, played by the stage's worker on the run's engine (a
    :class:`ModelSession`: a round's text depends on the round before, so each round is one
    request, answered before the next), each saved in ``pst_rounds`` as it comes back."""
    spec = ModelSpec(load_loop, loop_args(study, model), play_round)
    store = TableRoundStore(study, model)
    rounds = study.config.pst.faircritic_rounds
    with model_session(study.config.engine, NAME, spec, run=run) as session:

        def play(prompt: PstPrompt, text: str, number: int) -> dict[str, Any]:
            return session((prompt, text, number))

        for prompt in track(prompts, EngineProgress(NAME, "prompt", enabled=progress)):
            run_rounds(prompt, store, rounds, play)


def _imported(study: Study) -> bool:
    """Whether the study holds imported images (corpus_audit/stages/import_images/)."""
    return study.table_exists("imported_images") and bool(study.count("imported_images"))


def round_summary(study: Study, model: str) -> list[dict[str, Any]]:
    """Per round: prompts, biased batches and the mean SS."""
    rows = study.con.execute(
        "SELECT round, count(*), count(*) FILTER (WHERE biased), round(avg(ss), 1) "
        "FROM pst_rounds WHERE model_id = ? GROUP BY round ORDER BY round",
        [model],
    ).fetchall()
    return [{"round": r, "prompts": n, "biased": b, "mean_ss": s} for r, n, b, s in rows]
