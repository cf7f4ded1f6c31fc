"""The ``llm_texts`` stage: biographies and personas written by language models, the text
corpus of the ``who_how`` stage in an LLM study (``corpus-audit init DIR --kind llm``).

Per model of ``llm.models`` (:mod:`corpus_audit.backends.text_generators`) and per (occupation,
prompt, gender) *pair* of the prompt and occupation files
(:mod:`corpus_audit.methods.lexicon.llm_prompts`), the sampling rule of "More of the Same"
(:mod:`corpus_audit.methods.texts.sampling`): ``llm.n`` texts per specified pair; for unspecified
prompts, batches of ``llm.n`` until ``llm.n`` texts are associated with women and ``llm.n``
with men (the ``who_how`` association rule with ``texts.association_terms``), abandoned after
a batch with fewer than ``llm.abandon_below`` x ``llm.n`` on a side, capped at
``llm.max_texts``.

Rounds: every open pair's next batch is asked for at once (the backend batches them or keeps
``llm.concurrency`` requests in flight) and **each batch is committed as it arrives**, with
its pair's new counts and state, in one transaction (``llm_texts``, ``llm_pairs``). A killed
run loses only the batches in flight; the rerun reads the pairs' counts and asks for the next
batch numbers, each with the seed of its (model, occupation, prompt, gender, batch): no text
is stored twice and none is lost. Tables: ``sql/schema/005_llm_texts.sql``.

Engines: a local model (``transformers:``) draws its batches on the engine's workers,
whichever engine (``stage_engine(study.config.engine, run)``): :func:`lm_spec`, a
:class:`~corpus_audit.backends.engines.models.ModelSpec` of :class:`LocalLM` (on the
``local`` engine one worker in this process; on Ray 1 CPU + ``engine.gpus_per_worker`` each,
``engine.workers["llm_texts"]`` actors), each loading the model once for all the rounds
(:class:`ActorLM` feeds one ``map_actors`` per model, each round's batches followed by a
``DRAIN``). The driver plans every round's batches
(:func:`~corpus_audit.backends.text_generators.transformers_lm.plan_batches`), gets them
back in order and commits each request when its batch arrives, so the tables are the same
whichever engine ran them (on the same device class). The weights are never loaded on the
driver: the ``llm_models`` row is the first worker's description. An API model (``openai:``;
a backend whose traits do not say ``local_model``) is a model worker of the same engine
(:class:`ClientLM`: the worker's load opens the client session, one CPU each): a round's
requests go out in units of ``llm.concurrency`` requests (the client keeps them in flight),
and each request's batch is committed as its unit comes back, in the order they arrived.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit.backends.engines import model_resources, stage_engine
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.base import progress_bar
from corpus_audit.backends.engines.models import ModelSession, ModelSpec
from corpus_audit.backends.text_generators import (
    SamplingSettings,
    TextRequest,
    load_text_generator,
    split_spec,
    text_generator_traits,
)
from corpus_audit.backends.text_generators.transformers_lm import (
    PlannedBatch,
    TransformersLM,
    assemble,
    plan_batches,
)
from corpus_audit.core.errors import ConfigError, CorpusAuditError
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.stage_state import StageProgress
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.lexicon import load_association_terms
from corpus_audit.methods.lexicon.llm_prompts import expand, load_llm_occupations, load_llm_prompts
from corpus_audit.methods.texts.association import AssociationCounter
from corpus_audit.methods.texts.sampling import OPEN, Decision, PairCounts, Rule, decide, seed_for
from corpus_audit.tables.read import rows

STAGE = "llm_texts"
UNSPECIFIED = "unspecified"  # llm_texts.gender of a prompt without a gender


@dataclass(frozen=True)
class Pair:
    """One (occupation, prompt, gender) of the plan and its user message."""

    occupation: str
    prompt_id: str
    gender: str  # unspecified | female | male | non_binary
    prompt: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.occupation, self.prompt_id, self.gender)


def plan(study: Study) -> list[Pair]:
    """The pairs ``llm.prompts`` x ``llm.occupations`` x ``llm.genders`` (with the
    ``only_*`` filters); a :class:`LexiconError` for a bad file, a :class:`ConfigError` for
    a filter naming nothing in it."""
    cfg = study.config.llm
    prompts = load_llm_prompts(cfg.prompts, base=study.root)
    occupations = load_llm_occupations(cfg.occupations, base=study.root)
    for key, wanted, have in (
        ("only_occupations", cfg.only_occupations, [o for o, _ in occupations]),
        ("only_prompts", cfg.only_prompts, [p.id for p in prompts.prompts]),
    ):
        missing = [w for w in wanted if w.strip().lower() not in {h.lower() for h in have}]
        if missing:
            raise ConfigError(f"llm.{key}: {missing[0]!r} is not in the file (have: {have[:8]}...)")
    if cfg.only_occupations:
        chosen = {o.strip().lower() for o in cfg.only_occupations}
        occupations = [o for o in occupations if o[0] in chosen]
    pairs = expand(prompts, occupations, cfg.genders)
    if cfg.only_prompts:
        pairs = [p for p in pairs if p.prompt_id in set(cfg.only_prompts)]
    return [Pair(p.occupation, p.prompt_id, p.gender or UNSPECIFIED, p.text) for p in pairs]


def rule_of(study: Study) -> Rule:
    cfg = study.config.llm
    return Rule(cfg.n, cfg.abandon_below, cfg.max_texts)


@stage_body(STAGE)
def llm_texts(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Generate every model's texts by the sampling rule (module docstring).

    Raises :class:`ModelError` when a model cannot be loaded or a request fails for good
    (the batches committed so far are kept; the rerun continues), :class:`LexiconError` for
    a bad prompt or occupations file.
    """
    cfg = study.config.llm
    pairs = plan(study)
    terms = load_association_terms(study.config.texts.association_terms, base=study.root)
    counter = AssociationCounter(terms)
    engine = partial(stage_engine, study.config.engine, run)  # opened when a model needs it
    drawn = 0
    for model in cfg.models:
        drawn += _run_model(
            study, model, pairs, counter, engine, progress=progress, messages=run.messages
        )
    run.rows_in = len(pairs) * len(cfg.models)
    run.rows_out = study.count("llm_texts")
    run.skipped = drawn == 0
    run.provenance.update({"texts_this_run": drawn, "pairs_per_model": len(pairs)})
    run.summary = summary_rows(study)
    if not cfg.models:
        run.messages.append("llm.models is empty: no model to ask (set llm.models)")
    return run


def _run_model(
    study: Study,
    model: str,
    pairs: list[Pair],
    counter: Any,
    engine: Callable[[], Any],
    *,
    progress: bool,
    messages: list[str] | None = None,
) -> int:
    """Draw ``model``'s open pairs round by round until none is open; texts drawn. The
    generator's server checks (``warnings()``: an API server that ignores ``n`` or ``seed``)
    are added to ``messages`` and printed to stderr."""
    rule = rule_of(study)
    counts = _stored_counts(study, model)
    generator = None
    recorded = False  # the model's llm_models row, written once it can describe itself
    sampling = json.dumps(sampling_of(study).as_dict(), sort_keys=True)  # recorded per text
    drawn = 0
    # each round adds at least one text to every open pair, and an open pair holds fewer
    # than max_texts texts (a specified pair, fewer than n): this bounds the rounds
    max_rounds = rule.max_texts + 2
    try:
        for _ in range(max_rounds):
            todo: list[tuple[Pair, int, Decision]] = []
            for pair in pairs:
                c = counts.get(pair.key, PairCounts())
                decision = decide(c, rule, specified=pair.gender != UNSPECIFIED)
                if decision.state == OPEN:
                    todo.append((pair, c.batches, decision))
                else:
                    _close(study, model, pair, decision.state)
            if not todo:
                break
            if generator is None:
                generator = _load(study, model, engine)
                recorded = _record_model(study, model, generator.describe())
            for index, completions in _round(study, model, generator, todo, progress=progress):
                recorded = recorded or _record_model(study, model, generator.describe())
                pair, batch, _ = todo[index]
                before = counts.get(pair.key, PairCounts())
                counts[pair.key] = _commit(
                    study, model, pair, batch, completions, before, counter, sampling
                )
                drawn += len(completions)
        if generator is not None:  # again, with the server checks of this run's requests
            _record_model(study, model, generator.describe())
    finally:
        if generator is not None:
            for line in getattr(generator, "warnings", list)():
                print(f"warning: {line}", file=sys.stderr)
                if messages is not None:
                    messages.append(line)
            generator.close()
    return drawn


def _load(study: Study, model: str, engine: Callable[[], Any]) -> Any:
    """``model``'s generator on ``engine()``'s workers (whatever the engine): a local model
    (its backend's traits say ``local_model``) is an :class:`ActorLM`, a network client an
    :class:`ClientLM` (the worker's load opens the client session)."""
    cfg = study.config.llm
    eng = study.config.engine
    settings = sampling_of(study)
    if text_generator_traits(model).local_model:
        _, name = split_spec(model)
        path = Path(name).expanduser()  # read like a local load: from the working directory
        source = str(path.resolve()) if path.exists() else name
        factory = lm_spec(name, source, settings, cfg.batch_size, cfg.dtype, eng.device)
        return ActorLM(engine(), factory, model, settings, cfg.batch_size,
                       resources=model_resources(eng), workers=eng.workers_for(STAGE))  # fmt: skip
    options = {
        "device": eng.device,
        "batch_size": cfg.batch_size,
        "dtype": cfg.dtype,
        "api_base": cfg.api_base,
        "api_key_env": cfg.api_key_env,
        "concurrency": cfg.concurrency,
        "n_per_request": cfg.n_per_request,
        "timeout_s": cfg.timeout_s,
        "max_retries": cfg.max_retries,
        "backoff_s": cfg.backoff_s,
        "max_backoff_s": cfg.max_backoff_s,
        "max_body_mb": cfg.max_body_mb,
    }
    spec = ModelSpec(load_text_generator, (model, settings), stream_unit, options)
    # a client needs no GPU: one CPU per worker
    session = ModelSession(engine(), spec, workers=eng.workers_for(STAGE))
    return ClientLM(session, cfg.concurrency)


def _record_model(study: Study, model: str, description: dict[str, Any] | None) -> bool:
    """``model``'s ``llm_models`` row: its generator's description and the settings; False
    (nothing written) while the generator cannot describe itself yet (an :class:`ActorLM`
    before its first batch)."""
    if description is None:
        return False
    with study.transaction():
        study.con.execute(
            "INSERT OR REPLACE INTO llm_models VALUES (?, ?, ?, ?, ?)",
            [
                model,
                split_spec(model)[0],
                json.dumps(description, sort_keys=True, default=str),
                json.dumps(sampling_of(study).as_dict(), sort_keys=True),
                _now(),
            ],
        )
    return True


class LocalLM:
    """One loaded :class:`TransformersLM` drawing planned batches (what :func:`lm_spec`
    loads once per worker): ``(completions, its description)``, the description only with
    the worker's first batch (``None`` after)."""

    def __init__(
        self, model: str, source: str, settings: SamplingSettings, batch_size: int, dtype: str,
        device: str,
    ) -> None:  # fmt: skip
        self.lm = TransformersLM(
            model, settings, device=device, batch_size=batch_size, dtype=dtype, source=source
        )
        self.described = False

    def __call__(self, batch: PlannedBatch) -> tuple[list[Any], dict[str, Any] | None]:
        completions = self.lm.generate_batch(batch)
        description = None if self.described else self.lm.describe()
        self.described = True
        return completions, description

    def close(self) -> None:
        self.lm.close()


def lm_spec(
    model: str, source: str, settings: SamplingSettings, batch_size: int, dtype: str, device: str
) -> ModelSpec:
    """A ``transformers:`` model's recipe for the engine's workers (picklable, plain values):
    ``model`` as the study names it, ``source`` where to load it from (the driver's absolute
    path, or the hub id), the sampling settings, ``llm.batch_size`` (>= 1), ``llm.dtype`` and
    ``engine.device`` (``auto``: resolved in the worker, the GPU the engine gave it, else the
    CPU): a :class:`LocalLM` per worker."""
    return ModelSpec(LocalLM, (model, source, settings, batch_size, dtype, device))


class ActorLM:
    """A :class:`~corpus_audit.backends.text_generators.TextGenerator` whose batches run on
    an engine's actors: one :class:`ModelSession` for all of the model's rounds (the model is
    loaded once per actor), each round's planned batches one request (the next round depends
    on this round's commits). :meth:`stream` yields what :meth:`TransformersLM.stream`
    yields, in the same order."""

    def __init__(
        self,
        engine: Any,
        factory: Callable[[], Any],
        model: str,
        settings: Any,
        batch_size: int,
        *,
        resources: Any,
        workers: int,
    ) -> None:
        """``factory``: an :func:`lm_spec` (picklable); ``model``: the ``transformers:``
        spec; ``batch_size`` (>= 1): rows a batch, as the workers' model is told."""
        self.name = model
        self.settings = settings
        self.batch_size = batch_size
        self.description: dict[str, Any] | None = None
        self.session = ModelSession(engine, factory, resources=resources, workers=workers)

    def stream(self, requests: Sequence[Any]) -> Iterator[tuple[int, list[Any]]]:
        batches = plan_batches(requests, self.batch_size)
        return assemble(requests, self._drawn(batches))

    def _drawn(self, batches: list[Any]) -> Iterator[tuple[Any, list[Any]]]:
        for batch, (completions, description) in zip(
            batches, self.session.map(batches), strict=True
        ):
            if self.description is None:
                self.description = description
            yield batch, completions

    def describe(self) -> dict[str, Any] | None:
        """The first worker's description (``None`` until a batch came back)."""
        return self.description

    def close(self) -> None:
        self.session.close()  # the actors are closed with the map


@dataclass
class StreamedUnit:
    """What a client worker returns per unit: ``(index in the unit, completions)`` in the
    order they arrived, the client's ``describe()`` and ``warnings()`` (its server checks so
    far) and the error that ended the unit early (None: every request answered)."""

    answers: list[tuple[int, list[Any]]]
    description: dict[str, Any]
    warnings: list[str]
    error: CorpusAuditError | None = None


def stream_unit(generator: Any, requests: tuple[TextRequest, ...]) -> StreamedUnit:
    """The ``serve`` of a client worker: one unit's requests streamed (the client keeps
    ``llm.concurrency`` in flight); a request failing for good ends the unit, the answers
    before it kept and its error returned (the driver commits them, then raises it)."""
    answers: list[tuple[int, list[Any]]] = []
    error = None
    try:
        for index, completions in generator.stream(list(requests)):
            answers.append((index, completions))
    except CorpusAuditError as exc:
        error = exc
    return StreamedUnit(answers, generator.describe(), generator.warnings(), error)


class ClientLM:
    """A network client's :class:`~corpus_audit.backends.text_generators.TextGenerator` on
    an engine's worker (a :class:`ModelSession`: the worker's load opens the client session,
    its close closes it): a round's requests go out in units of ``unit`` (``llm.concurrency``)
    requests, each unit's answers yielded (and so committed) as it comes back, in the order
    they arrived; the error that ended a unit is raised after its answers."""

    def __init__(self, session: ModelSession, unit: int) -> None:
        self.session = session
        self.unit = max(1, unit)
        self.description: dict[str, Any] | None = None
        self.checks: list[str] = []

    def stream(self, requests: Sequence[TextRequest]) -> Iterator[tuple[int, list[Any]]]:
        offsets = range(0, len(requests), self.unit)
        units = [tuple(requests[lo : lo + self.unit]) for lo in offsets]
        for offset, got in zip(offsets, self.session.map(units), strict=True):
            self.description, self.checks = got.description, got.warnings
            for index, completions in got.answers:
                yield offset + index, completions
            if got.error is not None:
                raise got.error

    def describe(self) -> dict[str, Any] | None:
        """The worker's description (``None`` until a unit came back)."""
        return self.description

    def warnings(self) -> list[str]:
        """The worker's server checks, as of its last unit."""
        return list(self.checks)

    def close(self) -> None:
        self.session.close()  # the worker (its client session) is closed with the map


def sampling_of(study: Study) -> SamplingSettings:
    return SamplingSettings.from_config(study.config)


def _round(
    study: Study,
    model: str,
    generator: Any,
    todo: list[tuple[Pair, int, Decision]],
    *,
    progress: bool,
) -> Iterator[tuple[int, list[Any]]]:
    """One round: every open pair's next batch asked for at once; ``(index into todo, its
    completions)`` as they arrive."""
    seed = study.config.study.seed
    requests = [
        TextRequest(pair.prompt, d.draw, seed_for(seed, model, *pair.key, batch))
        for pair, batch, d in todo
    ]
    total = sum(r.n for r in requests)
    with progress_bar(EngineProgress(f"llm_texts {model}", "text", total, progress)) as bar:
        for index, completions in generator.stream(requests):
            yield index, completions
            bar.update(len(completions))


def _commit(
    study: Study,
    model: str,
    pair: Pair,
    batch: int,
    completions: list[Any],
    before: PairCounts,
    counter: Any,
    sampling: str,
) -> PairCounts:
    """Store one batch and its pair's new counts and state, in one transaction; ``sampling``
    is the JSON of the sampling settings each text records."""
    texts = [c.text for c in completions]
    association = counter.count(pd.Series(texts, dtype=object), source=model)["association"]
    frame = pd.DataFrame(
        {
            "model": model,
            "occupation": pair.occupation,
            "prompt_id": pair.prompt_id,
            "gender": pair.gender,
            "prompt": pair.prompt,
            "batch": batch,
            "position": range(len(completions)),
            "text": texts,
            "association": association.to_numpy(),
            "finish_reason": [c.finish_reason for c in completions],
            "refusal": pd.Series([c.refusal for c in completions], dtype=object),
            "completion_tokens": pd.array(
                [c.completion_tokens for c in completions], dtype="Int32"
            ),
            "prompt_tokens": pd.array([c.prompt_tokens for c in completions], dtype="Int32"),
            "seed": pd.array([c.seed for c in completions], dtype="Int64"),
            "sampling": sampling,
            "created_at": _now(),
        }
    )
    female = int((frame["association"] == "female").sum())
    male = int((frame["association"] == "male").sum())
    after = PairCounts(
        before.texts + len(frame), before.batches + 1, before.female + female, before.male + male
    )
    state = decide(after, rule_of(study), specified=pair.gender != UNSPECIFIED).state
    con = study.con
    with study.transaction():
        first = con.execute("SELECT coalesce(max(text_id), 0) + 1 FROM llm_texts").fetchall()[0][0]
        frame.insert(0, "text_id", range(first, first + len(frame)))
        con.register("llm_new_texts", frame)
        try:
            con.execute("INSERT INTO llm_texts BY NAME SELECT * FROM llm_new_texts")
        finally:
            con.unregister("llm_new_texts")
        _write_pair(study, model, pair, state)
    return after


def _write_pair(study: Study, model: str, pair: Pair, state: str) -> None:
    """The pair's row of ``llm_pairs``, recounted from its texts (inside the caller's
    transaction)."""
    study.con.execute(
        """
        INSERT OR REPLACE INTO llm_pairs
        SELECT ?, ?, ?, ?, ?, count(*), coalesce(max(batch) + 1, 0),
               count(*) FILTER (association = 'female'), count(*) FILTER (association = 'male'),
               count(*) FILTER (association = 'non_binary'),
               count(*) FILTER (association = 'none'),
               count(*) FILTER (refusal IS NOT NULL),
               coalesce(sum(completion_tokens), 0), coalesce(sum(prompt_tokens), 0), ?
        FROM llm_texts
        WHERE model = ? AND occupation = ? AND prompt_id = ? AND gender = ?
        """,
        [model, *pair.key, state, _now(), model, *pair.key],
    )


def _close(study: Study, model: str, pair: Pair, state: str) -> None:
    """Record a pair's final state (done, abandoned, capped) when its row says otherwise."""
    row = study.con.execute(
        "SELECT state FROM llm_pairs WHERE model = ? AND occupation = ? AND prompt_id = ? "
        "AND gender = ?",
        [model, *pair.key],
    ).fetchall()
    if not row or row[0][0] != state:
        with study.transaction():
            _write_pair(study, model, pair, state)


def _stored_counts(study: Study, model: str) -> dict[tuple[str, str, str], PairCounts]:
    """Each pair's committed counts, from its texts (what the rule decides on)."""
    rows = study.con.execute(
        "SELECT occupation, prompt_id, gender, count(*), coalesce(max(batch) + 1, 0), "
        "count(*) FILTER (association = 'female'), count(*) FILTER (association = 'male') "
        "FROM llm_texts WHERE model = ? GROUP BY ALL",
        [model],
    ).fetchall()
    return {(o, p, g): PairCounts(int(t), int(b), int(f), int(m)) for o, p, g, t, b, f, m in rows}


def _now() -> Any:
    return datetime.now(UTC).replace(tzinfo=None)


# -- status -----------------------------------------------------------------------------------
def progress(study: Study) -> StageProgress:
    """Pairs closed (done, abandoned, capped) of every model's pairs (for ``status``)."""
    try:
        total = len(plan(study)) * len(study.config.llm.models)
    except Exception:  # noqa: BLE001  (status must not fail on a file edited since)
        total = study.count("llm_pairs")
    closed = study.con.execute("SELECT count(*) FROM llm_pairs WHERE state <> 'open'").fetchall()[0]
    return StageProgress(int(closed[0]), total, "pairs")


def summary_rows(study: Study) -> list[dict[str, Any]]:
    """Per model: texts, pairs per state, refusals, tokens (``status`` and the run print it)."""
    return rows(
        study,
        """
        SELECT model, sum(texts) AS texts,
               count(*) FILTER (state = 'done') AS pairs_done,
               count(*) FILTER (state = 'open') AS pairs_open,
               count(*) FILTER (state = 'abandoned') AS pairs_abandoned,
               count(*) FILTER (state = 'capped') AS pairs_capped,
               sum(refusals) AS refusals,
               sum(completion_tokens) AS completion_tokens, sum(prompt_tokens) AS prompt_tokens
        FROM llm_pairs GROUP BY model ORDER BY model
        """,
    )


def status_lines(study: Study) -> list[str]:
    """What ``corpus-audit status`` prints for an LLM study: per model texts, pairs, tokens."""
    if not study.table_exists("llm_pairs"):
        return []
    out = []
    for r in summary_rows(study):
        out.append(
            f"llm_texts {r['model']}: {int(r['texts']):,} texts; pairs done {r['pairs_done']}, "
            f"open {r['pairs_open']}, abandoned {r['pairs_abandoned']}, capped "
            f"{r['pairs_capped']}; refusals {int(r['refusals'])}; tokens "
            f"{int(r['completion_tokens']):,} completion + {int(r['prompt_tokens']):,} prompt"
        )
    return out
