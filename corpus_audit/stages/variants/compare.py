"""The ``variants`` stage's comparisons as study tables and CSVs.

:func:`compare_all` runs :func:`~corpus_audit.methods.recaption.compare.compare_variants` for the
baseline against every other variant (image key = ``caption_id``; bootstrap seeded from
``study.seed`` at ``analysis.confidence``; caption-prompt similarity with the study's
embedder, ``neighbors.model``, against the study's ``prompts``, unless
``variants.similarity = false``). :func:`write_comparisons` replaces the ``variant_*`` tables
(``sql/schema/002_variants.sql``) and writes each as ``<study>/report/variants/<table>.csv``
(every pair in one file, told apart by ``variant_a`` / ``variant_b``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from corpus_audit.backends.embeddings import load_embedder
from corpus_audit.backends.engines.models import (
    ModelSpec,
    SessionEncoder,
    encode_texts,
    model_session,
)
from corpus_audit.core.store import StageRun, Study, clear_tables, insert_rows
from corpus_audit.methods.recaption.compare import (
    PairedBootstrap,
    VariantComparison,
    compare_variants,
)
from corpus_audit.methods.recaption.similarity import caption_prompt_similarity, similarity_inputs
from corpus_audit.tables.analysis import VARIANT_TABLES

TABLES = VARIANT_TABLES  # field -> study table (and CSV name)
CSV_DIR = ("report", "variants")
# the rows of the differences the CLI prints after a run (every paired image)
SUMMARY_METRICS = ("any_indicator", "female_indicator", "male_indicator", "mentions")


def compare_all(
    study: Study,
    labelled: pd.DataFrame,
    mentions: pd.DataFrame,
    baseline: str,
    *,
    run: StageRun,
    progress: bool = False,
) -> dict[tuple[str, str], VariantComparison]:
    """(baseline, variant) -> the variant's comparison with ``baseline`` (``labelled``:
    caption_variants rows, ``mentions``: variant_mentions rows)."""
    cfg = study.config.variants
    captions = labelled.rename(columns={"caption_id": "image_key", "text": "caption"})
    captions = captions[["image_key", "variant", "label", "caption", "triggers"]]
    marks = mentions.rename(columns={"caption_id": "image_key"})
    boot = PairedBootstrap(
        replicates=cfg.replicates,
        seed=study.config.study.seed,
        confidence=study.config.analysis.confidence,
    )
    out = {}
    for other in sorted(set(captions["variant"]) - {baseline}):
        sims = None
        if cfg.similarity:
            sims = similarities(study, run, captions, marks, baseline, other)
        out[(baseline, other)] = compare_variants(
            captions,
            marks,
            baseline,
            other,
            similarities=sims,
            basis=cfg.basis,
            examples=cfg.examples,
            bootstrap=boot,
        )
    return out


def similarities(
    study: Study, run: StageRun, captions: pd.DataFrame, mentions: pd.DataFrame, a: str, b: str
) -> pd.DataFrame:
    """Caption-prompt cosines of both variants' captions in each occupation's set, with the
    prompts of the study's ``prompts`` table (occupations without a prompt are left out);
    the embedder (``[neighbors]``'s model) runs on the run's engine, one model session."""
    prompts = study.con.execute("SELECT occupation, prompt_id, text FROM prompts").df()
    items = similarity_inputs(captions, mentions, a, b, basis=study.config.variants.basis)
    items = items[items["occupation"].isin(set(prompts["occupation"]))]
    prompts = prompts[prompts["occupation"].isin(set(items["occupation"]))]  # embed only these
    n = study.config.neighbors
    options = {
        "backend": n.embedder,
        "device": study.config.engine.device,
        "precision": n.precision,
        "batch_size": n.batch_size,
        "max_seq_length": n.max_seq_length,
    }
    # load_embedder keeps one model per process: the worker shares it, never closes it
    spec = ModelSpec(load_embedder, (n.model,), encode_texts, options, shared=True)
    with model_session(study.config.engine, "variants", spec, run=run) as session:
        return caption_prompt_similarity(items, prompts, SessionEncoder(session))


def _as_rows(name: str, frame: pd.DataFrame, baseline: str, other: str) -> pd.DataFrame:
    """One comparison table ready for its study table: the pair's columns, keys as text."""
    frame = frame.copy()
    if "variant_a" not in frame.columns:
        frame.insert(0, "variant_b", other)
        frame.insert(0, "variant_a", baseline)
    if name == "transitions":
        frame["example_keys"] = ["; ".join(map(str, keys)) for keys in frame["example_keys"]]
    return frame


def write_comparisons(
    study: Study, comparisons: dict[tuple[str, str], VariantComparison]
) -> list[dict[str, Any]]:
    """Replace the ``variant_*`` tables and CSVs; returns the summary rows the CLI prints.
    Runs inside the caller's transaction."""
    con = study.con
    folder = study.path(*CSV_DIR, "x").parent
    for field, table in TABLES.items():
        parts = []
        for (baseline, other), result in comparisons.items():
            frame = getattr(result, field)
            if frame is not None:
                parts.append(_as_rows(field, frame, baseline, other))
        clear_tables(con, table)
        if not parts:
            (folder / f"{table}.csv").unlink(missing_ok=True)
            continue
        rows = pd.concat(parts, ignore_index=True)
        insert_rows(con, table, rows)
        rows.to_csv(folder / f"{table}.csv", index=False)
    return summary_rows(comparisons)


def summary_rows(
    comparisons: dict[tuple[str, str], VariantComparison],
) -> list[dict[str, Any]]:
    """Per pair and summary metric, over every paired image: the two rates, the difference
    (percentage points) with its interval, McNemar's p."""
    rows = []
    for result in comparisons.values():
        diffs = result.differences
        every = diffs[diffs["occupation"].isna() & diffs["metric"].isin(SUMMARY_METRICS)]
        for r in every.itertuples():
            rows.append(
                {
                    "baseline": r.variant_a,
                    "variant": r.variant_b,
                    "metric": r.metric,
                    "images": int(r.n_images),
                    "baseline %": r.value_a,
                    "variant %": r.value_b,
                    "difference": r.difference,
                    "ci_low": r.ci_low,
                    "ci_high": r.ci_high,
                    "p": r.p_value,
                }
            )
    return rows
