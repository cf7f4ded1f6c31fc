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
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from tqdm import tqdm

from corpus_audit.core.stage_state import Progress, require_inputs
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.texts.sampling import OPEN, Decision, PairCounts, Rule, decide, seed_for

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
    from corpus_audit.core.errors import ConfigError
    from corpus_audit.methods.lexicon.llm_prompts import (
        expand,
        load_llm_occupations,
        load_llm_prompts,
    )

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


def llm_texts(study: Study, *, progress: bool = True) -> StageRun:
    """Generate every model's texts by the sampling rule (module docstring).

    Raises :class:`ModelError` when a model cannot be loaded or a request fails for good
    (the batches committed so far are kept; the rerun continues), :class:`LexiconError` for
    a bad prompt or occupations file.
    """
    from corpus_audit.methods.lexicon import load_association_terms
    from corpus_audit.methods.texts.association import AssociationCounter

    cfg = study.config.llm
    with study.stage(STAGE) as run:
        require_inputs(study, STAGE)
        pairs = plan(study)
        terms = load_association_terms(study.config.texts.association_terms, base=study.root)
        counter = AssociationCounter(terms)
        drawn = 0
        for model in cfg.models:
            drawn += _run_model(study, model, pairs, counter, progress=progress)
        run.rows_in = len(pairs) * len(cfg.models)
        run.rows_out = study.count("llm_texts")
        run.skipped = drawn == 0
        run.provenance.update({"texts_this_run": drawn, "pairs_per_model": len(pairs)})
        run.summary = summary_rows(study)
        if not cfg.models:
            run.messages.append("llm.models is empty: no model to ask (set llm.models)")
    return run


def _run_model(study: Study, model: str, pairs: list[Pair], counter: Any, *, progress: bool) -> int:
    """Draw ``model``'s open pairs round by round until none is open; texts drawn."""
    rule = rule_of(study)
    counts = _stored_counts(study, model)
    generator = None
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
                generator = _load(study, model)
            drawn += _round(study, model, generator, todo, counts, counter, progress=progress)
    finally:
        if generator is not None:
            generator.close()
    return drawn


def _load(study: Study, model: str) -> Any:
    from corpus_audit.backends.text_generators import load_text_generator, split_spec

    cfg = study.config.llm
    settings = sampling_of(study)
    generator = load_text_generator(
        model,
        settings,
        device=study.config.engine.device,
        batch_size=cfg.batch_size,
        dtype=cfg.dtype,
        api_base=cfg.api_base,
        api_key_env=cfg.api_key_env,
        concurrency=cfg.concurrency,
        n_per_request=cfg.n_per_request,
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        backoff_s=cfg.backoff_s,
        max_backoff_s=cfg.max_backoff_s,
    )
    with study.transaction():
        study.con.execute(
            "INSERT OR REPLACE INTO llm_models VALUES (?, ?, ?, ?, ?)",
            [
                model,
                split_spec(model)[0],
                json.dumps(generator.describe(), sort_keys=True, default=str),
                json.dumps(settings.as_dict(), sort_keys=True),
                _now(),
            ],
        )
    return generator


def sampling_of(study: Study) -> Any:
    from corpus_audit.backends.text_generators import SamplingSettings

    cfg = study.config.llm
    return SamplingSettings(cfg.temperature, cfg.top_p, cfg.max_tokens, cfg.send_seed)


def _round(
    study: Study,
    model: str,
    generator: Any,
    todo: list[tuple[Pair, int, Decision]],
    counts: dict[tuple[str, str, str], PairCounts],
    counter: Any,
    *,
    progress: bool,
) -> int:
    from corpus_audit.backends.text_generators import TextRequest

    seed = study.config.study.seed
    requests = [
        TextRequest(pair.prompt, d.draw, seed_for(seed, model, *pair.key, batch))
        for pair, batch, d in todo
    ]
    total = sum(r.n for r in requests)
    sampling = json.dumps(sampling_of(study).as_dict(), sort_keys=True)
    drawn = 0
    bar = tqdm(total=total, desc=f"llm_texts {model}", unit="text", disable=not progress)
    with bar:
        for index, completions in generator.stream(requests):
            pair, batch, _ = todo[index]
            before = counts.get(pair.key, PairCounts())
            counts[pair.key] = _commit(
                study, model, pair, batch, completions, before, counter, sampling
            )
            drawn += len(completions)
            bar.update(len(completions))
    return drawn


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
    """Store one batch and its pair's new counts and state, in one transaction."""
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
    from datetime import UTC, datetime

    return datetime.now(UTC).replace(tzinfo=None)


# -- status -----------------------------------------------------------------------------------
def progress(study: Study) -> Progress:
    """Pairs closed (done, abandoned, capped) of every model's pairs (for ``status``)."""
    try:
        total = len(plan(study)) * len(study.config.llm.models)
    except Exception:  # noqa: BLE001  (status must not fail on a file edited since)
        total = study.count("llm_pairs")
    closed = study.con.execute("SELECT count(*) FROM llm_pairs WHERE state <> 'open'").fetchall()[0]
    return Progress(int(closed[0]), total, "pairs")


def summary_rows(study: Study) -> list[dict[str, Any]]:
    """Per model: texts, pairs per state, refusals, tokens (``status`` and the run print it)."""
    from corpus_audit.stages.analyze.read import rows

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
