"""The ``analyze`` stage: %female, amplification per strategy, indicator statistics.

Reads ``samples``, ``prompts``, ``images``, ``face_filter``, ``labels``, ``mentions`` and
``indicators`` (whatever of them earlier stages filled) and rewrites the tables of
``sql/schema/001_analyze.sql`` in one transaction. Works with only the caption side done
(the demo: no images): then the amplification tables stay empty and the stage says why.

Idempotent and resumable: the run records a fingerprint of its inputs (row counts and an
order-free hash of the columns it reads, plus the ``analysis`` config); a rerun with the
same fingerprint keeps the tables and reports ``skipped``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping
from functools import partial

import numpy as np

from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.base import progress_bar
from corpus_audit.core.errors import StageOrderError
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.preset import paper_differences
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.stage_state import require_sample_captions
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts, insert_rows
from corpus_audit.methods.amplification import (
    OverallSummary,
    Pair,
    PromptSummary,
    Rate,
    make_pair,
    paper_layout,
    strategy_sort_key,
    summarize,
)
from corpus_audit.methods.correlation import indicator_correlation
from corpus_audit.methods.stats import stable_seed
from corpus_audit.stages.analyze import correction
from corpus_audit.stages.analyze.attribute_pairs import attribute_tables
from corpus_audit.stages.analyze.generated_gender import (
    generated_gender_rows,
    headline,
    headline_note,
)
from corpus_audit.stages.analyze.image_similarity import enabled as image_similarity_enabled
from corpus_audit.stages.analyze.image_similarity import image_similarity_rows, summary_messages
from corpus_audit.stages.analyze.percent import (
    CAPTION_PROMPTS_TEMPLATE,
    ImageSet,
    caption_prompt_sets,
    generated_sets,
    indicator_match_rows,
    occupation_indicator_rows,
    training_sets,
)
from corpus_audit.tables.analysis import (
    ANALYSIS_TABLES,
    correction_messages,
    input_fingerprint,
    untrained_classifiers,
)
from corpus_audit.tables.labelled import choose_classifier, prepare_labels
from corpus_audit.tables.read import summary_table
from corpus_audit.tables.subsets import CutRule, cut, drop, shortfall_lines, status_rows


@stage_body("analyze")
def analyze(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Compute every analysis table from the study's tables (see the module docstring)."""
    if not any(study.count(t) for t in ("samples", "mentions", "images")):
        first = (
            f"import the model's images (`corpus-audit import-images {study.root} SOURCE`) or "
            f"`corpus-audit generate {study.root}`, then `label`"
            if study_kind(study.config) == "images"
            else f"run `corpus-audit select {study.root}` and the later stages"
        )
        raise StageOrderError(
            f"{study.root}: nothing to analyse (no mentions, samples or images); {first} first"
        )
    require_sample_captions(study, by="analyze")
    fingerprint = input_fingerprint(study)
    last = study.last_run("analyze")
    run.provenance["input_fingerprint"] = fingerprint
    if last is not None and last["provenance"].get("input_fingerprint") == fingerprint:
        run.skipped = True
        for key in (
            "classifier",
            "threshold",
            "bootstrap",
            "confidence",
            "bootstrap_seed",
            "parity_side",
            "correction",
        ):
            if key in last["provenance"]:
                run.provenance[key] = last["provenance"][key]
        run.rows_out = study.count(_output_table(study))
        run.summary = summary_rows(study)
        run.headline = headline(study)  # printed without -v too
        run.messages.append("inputs unchanged since the last analysis; tables kept")
        return run
    _analyze(study, run, progress=progress)
    return run


def _analyze(study: Study, run: StageRun, *, progress: bool) -> None:
    cfg = study.config.analysis
    classifier = choose_classifier(study)
    seed = stable_seed(study.config.study.seed, "analyze")
    rule = CutRule.from_config(study.config)
    _record_settings(study, run, classifier, seed, rule)
    with study.transaction():
        n_labelled = prepare_labels(study, classifier, cfg.threshold)
        cut(study, rule)
        status = status_rows(study, rule)
        short = {(r["strategy"], r["occupation"], r["prompt_id"]): r["shortfall"] for r in status}
        train = training_sets(study, short)
        gen = generated_sets(study)
        caps = caption_prompt_sets(study)
        match = indicator_match_rows(study, cfg.confidence)
        gender_rows = generated_gender_rows(study, cfg.confidence)
        occ_rows = occupation_indicator_rows(study)
        sim_rows = _similarity(study, run, progress)
        no_template = [g for g in gen if g.template_id is None]
        gen = [g for g in gen if g.template_id is not None]
        amp_rows, summ_rows = _amplification(
            train, gen, caps, cfg.bootstrap, cfg.confidence, seed, progress, cfg.parity_side
        )
        corr = indicator_correlation(occ_rows)

        corrected = _corrected(study, classifier, seed, train, gen, caps, (amp_rows, summ_rows))
        attributes = _attributes(study, seed, classifier)
        _write_tables(
            study,
            {
                "percent_female": _percent_rows(train, gen, caps, cfg.confidence),
                "amplification": amp_rows,
                "amplification_summary": summ_rows,
                "indicator_match": match,
                "occupation_indicators": occ_rows,
                "indicator_correlation": [corr],
                "image_similarity": sim_rows,
                **corrected,
                "generated_gender": gender_rows,
                **attributes,
            },
        )

    _count(study, run, n_labelled, gender_rows, amp_rows, gen, caps)
    run.summary = summary_rows(study)
    run.headline = headline(study)  # printed without -v too
    if not paper_layout(summary_table(study)):  # the summary is the generated %female
        run.messages += headline_note(study)
    run.messages += _notes(study, classifier, train, gen, caps, no_template, corr)
    run.messages += threshold_note(study, classifier, cfg.threshold)
    if train:
        run.messages += _shortfall(study, status, rule)
    run.messages += summary_messages(sim_rows)
    run.provenance["correction"] = correction.provenance(corrected, summ_rows, cfg.correction)
    run.messages += correction_messages(run.provenance["correction"])


def _similarity(study: Study, run: StageRun, progress: bool) -> list[dict]:
    """The ``image_similarity`` rows (none when the diagnostic is off), its provenance kept."""
    if not image_similarity_enabled(study):
        return []
    rows, run.provenance["image_similarity"] = image_similarity_rows(study, run, progress=progress)
    return rows


def _attributes(study: Study, seed: int, classifier: str | None) -> dict[str, list[dict]]:
    """The ``attribute_*`` tables' rows (none with ``analysis.attributes`` off)."""
    cfg = study.config.analysis
    if not cfg.attributes:
        return {}
    return attribute_tables(study, cfg.confidence, cfg.bootstrap, seed, classifier)


def _count(
    study: Study,
    run: StageRun,
    n_labelled: int,
    gender_rows: list[dict],
    amp_rows: list[dict],
    gen: list[ImageSet],
    caps: list,
) -> None:
    """The run's counts: labelled images in, output rows out, excluded pairs dropped."""
    run.rows_in = n_labelled
    run.rows_out = len(gender_rows) if _output_table(study) == "generated_gender" else len(amp_rows)
    for row in amp_rows:
        if row["excluded"]:
            run.drop(f"pair excluded: {row['exclude_reason']}")
    run.provenance["models"] = sorted({g.model_id for g in gen} | {c[1].model_id for c in caps})
    run.provenance["labelled_images"] = n_labelled


def _percent_rows(
    train: list[ImageSet], gen: list[ImageSet], caps: list, confidence: float
) -> list[dict]:
    """The ``percent_female`` rows: training subsets, generated sets, then each caption-prompt
    pair's training and generated side."""
    rows = [s.row(confidence) for s in train + gen]
    for t_set, g_set in caps:
        rows += [t_set.row(confidence), g_set.row(confidence)]
    return rows


def _shortfall(study: Study, status: list[dict], rule: CutRule) -> list[str]:
    """The lines about subsets short of N labelled images."""
    templates = dict(study.con.execute("SELECT prompt_id, template_id FROM prompts").fetchall())
    return shortfall_lines(status, rule, templates)


def _output_table(study: Study) -> str:
    """The table whose rows ``rows_out`` counts: the amplification pairs, or in a study
    without a corpus (no training side) the generated_gender rows."""
    return "generated_gender" if study_kind(study.config) == "images" else "amplification"


def _corrected(
    study: Study,
    classifier: str | None,
    seed: int,
    train: list[ImageSet],
    gen: list[ImageSet],
    caps: list[tuple[ImageSet, ImageSet]],
    uncorrected: tuple[list[dict], list[dict]],
) -> dict[str, list[dict]]:
    """Rows of the correction's tables (stages/analyze/correction.py), by table."""
    cfg = study.config.analysis
    fix = correction.learn(study, classifier, cfg.bootstrap, seed)
    amplify = partial(
        _amplification, replicates=cfg.bootstrap, confidence=cfg.confidence, seed=seed,
        progress=False, parity_side=cfg.parity_side,
    )  # fmt: skip
    amp, summ = correction.amplification_rows(fix, amplify, uncorrected, train, gen, caps)
    sets = train + gen + [s for pair in caps for s in pair]
    return {
        "classifier_errors": fix.error_rows,
        "percent_female_corrected": correction.percent_rows(fix, sets, cfg.confidence),
        "amplification_corrected": amp,
        "amplification_summary_corrected": summ,
    }


def _record_settings(
    study: Study, run: StageRun, classifier: str | None, seed: int, rule: CutRule
) -> None:
    """The settings of this analysis, in its provenance."""
    cfg = study.config.analysis
    run.provenance.update(
        {
            "classifier": classifier,
            "threshold": cfg.threshold,
            "bootstrap": cfg.bootstrap,
            "confidence": cfg.confidence,
            "bootstrap_seed": seed,
            "parity_side": cfg.parity_side,
        }
    )
    run.provenance["subsets"] = {
        "sample_unit": rule.unit,
        "sample_size": rule.n_occupation,
        "k": rule.n_prompt,
        "overdraw": study.config.select.overdraw,
        "no_indicator_sample": study.config.indicators.no_indicator_sample,
    }


def _write_tables(study: Study, rows: dict[str, list[dict]]) -> None:
    """Replace every analysis table (inside the caller's transaction): the training subsets
    from the cut's temp tables (dropped after), the others from ``rows`` (table -> rows, in
    this order)."""
    con = study.con
    clear_tables(con, *ANALYSIS_TABLES)
    study.sql("analyze/write_subsets")
    drop(con)
    con.execute("DROP TABLE IF EXISTS analysis_labelled")
    for table, table_rows in rows.items():
        insert_rows(con, table, table_rows)


def _amplification(
    train: list[ImageSet],
    gen: list[ImageSet],
    caps: list[tuple[ImageSet, ImageSet]],
    replicates: int,
    confidence: float,
    seed: int,
    progress: bool,
    parity_side: str,
    rate_of: Callable[[ImageSet], Rate] = ImageSet.rate,
    draws: Mapping[Hashable, np.ndarray] | None = None,
) -> tuple[list[dict], list[dict]]:
    """Rows of ``amplification`` and ``amplification_summary``; ``rate_of`` gives a set's
    %female (the corrected one for the corrected tables), ``draws`` bootstrap replicates of
    some rates (see :func:`corpus_audit.methods.amplification.summarize`)."""
    per_prompt_strategies = {t.strategy for t in train if t.prompt_id is not None}
    strategies = sorted({t.strategy for t in train if t.strategy}, key=strategy_sort_key)
    t_index = _training_index(train)
    templates = sorted({g.template_id for g in gen})
    by_model: dict[str, list[ImageSet]] = defaultdict(list)
    for g in gen:
        by_model[g.model_id or "unknown"].append(g)

    amp_rows: list[dict] = []
    summ_rows: list[dict] = []
    jobs = [(m, s) for m in sorted(by_model) for s in strategies]
    cap_groups: dict[tuple[str, str], list[tuple[ImageSet, ImageSet]]] = defaultdict(list)
    for t_set, g_set in caps:
        cap_groups[(g_set.model_id or "unknown", t_set.strategy or "")].append((t_set, g_set))
    bar = progress_bar(EngineProgress("analyze", "table", len(jobs) + len(cap_groups), progress))
    for model, strategy in jobs:
        per_strategy = strategy in per_prompt_strategies
        pairs = _template_pairs(
            by_model[model], strategy, per_strategy, t_index, parity_side, rate_of
        )
        per_prompt, overall = summarize(
            pairs, prompts=templates, replicates=replicates, confidence=confidence, seed=seed,
            draws=draws,
        )  # fmt: skip
        amp_rows += [_amp_row(model, strategy, p) for p in pairs]
        summ_rows += [_summ_of(model, strategy, s.prompt, s, None) for s in per_prompt]
        summ_rows.append(_overall_row(model, strategy, per_prompt, overall))
        bar.update()
    for (model, strategy), group in sorted(cap_groups.items()):
        pairs = [
            make_pair(g.occupation, CAPTION_PROMPTS_TEMPLATE, rate_of(t), rate_of(g), parity_side)
            for t, g in sorted(group, key=lambda tg: tg[1].occupation)
        ]
        (s,), overall = summarize(
            pairs, prompts=[CAPTION_PROMPTS_TEMPLATE], replicates=replicates,
            confidence=confidence, seed=seed, draws=draws,
        )  # fmt: skip
        amp_rows += [_amp_row(model, strategy, p) for p in pairs]
        summ_rows.append(_summ_of(model, strategy, None, s, overall.n_prompts))
        bar.update()
    bar.close()
    return amp_rows, summ_rows


def _training_index(train: list[ImageSet]) -> dict[tuple, ImageSet]:
    """Training sets by (strategy, occupation, template; None for per-occupation subsets)."""
    return {
        (t.strategy, t.occupation, t.template_id if t.prompt_id is not None else None): t
        for t in train
    }


def _template_pairs(
    generated: list[ImageSet],
    strategy: str,
    per_prompt: bool,
    t_index: dict[tuple, ImageSet],
    parity_side: str,
    rate_of: Callable[[ImageSet], Rate] = ImageSet.rate,
) -> list[Pair]:
    """The (training, generated) pairs of one model's template prompts for ``strategy``, by
    occupation and template; a training subset that is missing gives an empty rate."""
    pairs: list[Pair] = []
    for g in sorted(generated, key=lambda s: (s.occupation, s.template_id)):
        template = g.template_id if per_prompt else None
        t = t_index.get((strategy, g.occupation, template))
        t_rate = rate_of(t) if t else Rate(("missing", strategy, g.occupation, template), None, 0)
        pairs.append(make_pair(g.occupation, g.template_id, t_rate, rate_of(g), parity_side))
    return pairs


def _summ_of(
    model: str, strategy: str, prompt: Hashable | None, s: PromptSummary, n_prompts: int | None
) -> dict:
    """An ``amplification_summary`` row from one prompt's summary ``s``."""
    return _summ_row(
        model,
        strategy,
        prompt,
        s.n_included,
        s.n_excluded,
        n_prompts,
        s.mean,
        s.ci_low,
        s.ci_high,
        s.t_stat,
        s.p_value,
    )


def _overall_row(
    model: str, strategy: str, per_prompt: list[PromptSummary], overall: OverallSummary
) -> dict:
    """The ``amplification_summary`` row over all prompts (template_id NULL)."""
    return _summ_row(
        model,
        strategy,
        None,
        sum(s.n_included for s in per_prompt),
        sum(s.n_excluded for s in per_prompt),
        overall.n_prompts,
        overall.mean,
        overall.ci_low,
        overall.ci_high,
        None,
        None,
    )


def _amp_row(model: str, strategy: str, p: Pair) -> dict:
    return {
        "model_id": model,
        "strategy": strategy,
        "occupation": p.occupation,
        "template_id": p.prompt,
        "training_pf": p.training.percent,
        "generated_pf": p.generated.percent,
        "amplification": p.amplification,
        "excluded": p.excluded,
        "exclude_reason": p.exclude_reason,
        "training_n": p.training.n,
        "generated_n": p.generated.n,
    }


def _summ_row(model, strategy, template, n_inc, n_exc, n_prompts, mean, lo, hi, t, p) -> dict:
    return {
        "model_id": model,
        "strategy": strategy,
        "template_id": template,
        "n_included": n_inc,
        "n_excluded": n_exc,
        "n_prompts": n_prompts,
        "mean_amplification": mean,
        "ci_low": lo,
        "ci_high": hi,
        "t_stat": t,
        "p_value": p,
    }


def summary_rows(study: Study) -> list[dict]:
    """What the CLI prints: the paper-layout table; without it the generated images' %female
    per occupation against the labour statistics (a model-only audit, the most skewed first),
    or the caption-side summary."""
    layout = paper_layout(summary_table(study))
    if layout:
        out = []
        for model, rows in layout.items():
            for row in rows:
                line = {"model": model, "strategy": row["strategy"]}
                for col in [c for c in row if c.startswith("#")] + ["average"]:
                    cell = row.get(col)
                    line[col] = _cell_text(cell)
                out.append(line)
        return out
    return headline(study) or dicts(study.sql("analyze/indicator_summary"))


def _cell_text(cell: dict | None) -> str | None:
    if not cell or cell.get("mean") is None:
        return None
    text = f"{cell['mean']:+.1f}"
    if cell.get("ci_low") is not None:
        text += f" [{cell['ci_low']:+.1f}, {cell['ci_high']:+.1f}]"
    return text


def _classifier_notes(study: Study, classifier: str | None) -> list[str]:
    """Which labels the analysis used, a warning first when any model has random weights."""
    notes = []
    untrained = untrained_classifiers(study)
    if untrained:
        notes.append(
            f"WARNING: untrained (random) model weights ({', '.join(untrained)}): every label, "
            "%female, amplification and similarity from them is meaningless (tests and "
            "benchmarks only)",
        )
    if classifier is None:
        notes.append(
            "no perceived-gender labels: %female and amplification need the images, "
            "generate and label stages"
        )
    else:
        notes.append(f"labels of classifier '{classifier}'")
    return notes


def _caption_prompt_notes(caps: list[tuple[ImageSet, ImageSet]]) -> list[str]:
    """One line per (model, strategy) of captions used as prompts: how many captions T and G
    share."""
    per_set: dict[tuple[str, str], int] = defaultdict(int)
    for t, g in caps:
        per_set[(g.model_id or "unknown", t.strategy or "")] += t.n_captions or 0
    return [
        f"{strategy} ({model}): T and G over the same {n_captions} captions, those with a "
        "labelled training image and generated images"
        for (model, strategy), n_captions in sorted(per_set.items())
    ]


def _notes(study, classifier, train, gen, caps, no_template, corr) -> list[str]:
    notes = _classifier_notes(study, classifier)
    differ = paper_differences(study.config)
    if differ and study_kind(study.config) != "images":  # the paper's numbers are amplification
        notes.append(
            f"not comparable with the paper in {len(differ)} setting(s) (listed in the report "
            "header): " + ", ".join(d["key"] for d in differ)
        )
    if study_kind(study.config) == "images":  # no corpus: no training side, no amplification
        notes.append(
            "a model audited without its training data: generated_gender holds %female per "
            "occupation and prompt against the labour statistics (docs/model_only.md)"
        )
        return notes
    if not gen:
        notes.append("no generated images from prompts: no amplification table")
    if train and not any(t.n for t in train):
        notes.append("no labelled training images: training %female is undefined")
    if no_template:
        n = sum(g.n_images for g in no_template)
        notes.append(f"{n} generated images name a prompt_id not in `prompts`; not analysed")
    cfg = study.config
    notes.append(
        f"training subsets: {cfg.select.sample_size} per occupation, {cfg.neighbors.k} per "
        f"prompt, counted in {cfg.select.sample_unit.replace('_', ' ')}; no_indicators: "
        + (
            "the keyword subset's captions without indicators (split, the paper's)"
            if cfg.indicators.no_indicator_sample == "split"
            else "a fresh draw among indicator-free captions"
        )
    )
    notes += _caption_prompt_notes(caps)
    if corr["r"] is not None:
        notes.append(
            f"Pearson r(training %female, % female-indicator captions) = {corr['r']:.3f} "
            f"(p = {corr['p_value']:.3g}, {corr['n_occupations']} occupations; paper -0.458)"
        )
    return notes


def threshold_note(study: Study, classifier: str | None, threshold: float) -> list[str]:
    """One line when ``analysis.threshold`` (0 or in [0.5, 1]) relabels stored labels made at
    another threshold: which labels, and that ``label.threshold`` then does not count here."""
    if not threshold:
        return []
    stored = study.column(
        "SELECT DISTINCT threshold FROM labels WHERE classifier = ? AND threshold <> ? ORDER BY 1",
        [classifier or "", float(threshold)],
    )
    if not stored:
        return []
    made = ", ".join(f"{t:g}" for t in stored)
    return [
        f"analysis.threshold = {threshold:g} relabels the labels of {classifier} (made at "
        f"threshold {made}) from p_female; label.threshold does not change this analysis "
        "(set analysis.threshold = 0 to use the stored labels)"
    ]
