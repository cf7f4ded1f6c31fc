"""The ``variants`` stage: several captions of the same corpus rows, labelled and compared.

A **variant** is one caption per corpus row from one source (docs/recaptioning.md):

- ``original``: the caption column ``select`` reads (what ``captions`` holds);
- one per ``[variants] columns`` entry: another text column of the same rows
  (``{blip = "recaption"}``, a second human caption);
- one per variant of the ``recaptions`` table (the ``recaption`` stage: a model's captions of
  the study's training images, linked to their caption rows through ``images``).

Which rows: every corpus row whose caption mentions an occupation in **at least one** column
variant (the union, so "a doctor" -> "a woman in a white coat" is kept), plus every
recaptioned training image. Every variant's caption of those rows is stored in
``caption_variants`` with its gender-indicator label (the ``indicators`` stage's rules and
settings: gender terms, spaCy model, names) and its occupation mentions in
``variant_mentions`` (the ``select`` matcher); then each variant is compared with
``variants.baseline`` by :func:`corpus_audit.methods.recaption.compare.compare_variants` (paired over
rows, bootstrap seeded from ``study.seed``) into the ``variant_*`` tables and
``<study>/report/variants/*.csv`` (:mod:`corpus_audit.stages.variants.compare`).

The stage recomputes everything from its inputs and replaces its tables in one transaction:
a killed run leaves the previous results as they were. A study without variants records a
skipped run and writes nothing. Rows without text in a variant (NULL, empty, undecodable) are
not captions of it; they are counted in the run's ``dropped``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from corpus_audit.backends.corpus import (
    ColumnMap,
    CorpusFile,
    check_text_column,
    get_reader,
    iter_clean_batches,
)
from corpus_audit.backends.engines.base import Progress, progress_bar
from corpus_audit.core.errors import ConfigError, CorpusError, printable
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, clear_tables, execute_sql, insert_rows
from corpus_audit.methods.gender_text import (
    IndicatorTagger,
    NameFinder,
    WordMatcher,
    load_spacy,
    readable,
)
from corpus_audit.methods.lexicon import load_gender_terms, load_occupations
from corpus_audit.methods.texts.mentions import find_mentions
from corpus_audit.stages.variants.compare import compare_all, write_comparisons

STAGE = "variants"
TEXT_COLUMNS = ["variant", "caption_id", "text", "source"]
MENTION_COLUMNS = ["variant", "caption_id", "occupation"]


@stage_body(STAGE)
def variants(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Gather, label and compare every caption variant (module docstring)."""
    texts, mentions = gather(study, run, progress=progress)
    names = sorted(set(texts["variant"]))
    run.provenance["variants"] = names
    if len(names) < 2:
        _clear(study)  # results of an earlier config no longer match this one
        return run.skip(
            "no caption variants to compare (set [variants] columns, or run recaption); "
            "earlier variant results, if any, were cleared"
        )
    baseline = study.config.variants.baseline
    if baseline not in names:
        raise ConfigError(
            f"variants.baseline: no variant {baseline!r} in this study "
            f"(variants: {', '.join(names)})"
        )
    labelled = label_texts(study, texts, progress=progress)
    comparisons = compare_all(study, labelled, mentions, baseline, run=run, progress=progress)
    with study.transaction() as con:
        clear_tables(con, "caption_variants", "variant_mentions")
        insert_rows(con, "caption_variants", labelled)
        insert_rows(con, "variant_mentions", mentions)
        run.summary = write_comparisons(study, comparisons)
    run.rows_in = len(texts)
    run.rows_out = len(comparisons)
    for name, path in sorted(_csv_outputs(study).items()):
        run.outputs[name] = path
    return run


def _clear(study: Study) -> None:
    """Empty ``caption_variants``, ``variant_mentions`` and the ``variant_*`` tables and remove
    their CSVs, in one transaction: a skipped run leaves no results of another config (which
    ``status`` and the report would otherwise show as this one's)."""
    with study.transaction() as con:
        clear_tables(con, "caption_variants", "variant_mentions")
        write_comparisons(study, {})  # no comparisons: empties each table, removes its CSV


def _csv_outputs(study: Study) -> dict[str, str]:
    folder = study.root / "report" / "variants"
    return {f"csv {p.stem}": str(p) for p in folder.glob("*.csv")} if folder.is_dir() else {}


# -- gathering ---------------------------------------------------------------------------------
def gather(
    study: Study, run: StageRun, *, progress: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every variant's texts (:data:`TEXT_COLUMNS`) and mentions (:data:`MENTION_COLUMNS`)."""
    parts = [column_variants(study, run, progress=progress), recaption_variants(study)]
    both = set(parts[0][0]["variant"]) & set(parts[1][0]["variant"]) - {"original"}
    if both:
        raise ConfigError(
            f"variants.columns: {', '.join(sorted(both))} is also a recaption variant of this "
            "study; give the column variant another name"
        )
    texts = pd.concat([p[0] for p in parts], ignore_index=True)
    texts = texts.drop_duplicates(["variant", "caption_id"], keep="first")
    mentions = pd.concat([p[1] for p in parts], ignore_index=True)
    mentions = mentions.drop_duplicates(MENTION_COLUMNS).reset_index(drop=True)
    texts["caption_id"] = texts["caption_id"].astype(np.int64)
    mentions["caption_id"] = mentions["caption_id"].astype(np.int64)
    return texts.reset_index(drop=True), mentions


def _empty() -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.DataFrame(columns=TEXT_COLUMNS), pd.DataFrame(columns=MENTION_COLUMNS)


def _occupations(study: Study) -> list[Any]:
    return load_occupations(study.config.lexicon.occupations, base=study.root)


def _mentions_of(frame: pd.DataFrame, occupations: list[Any]) -> pd.DataFrame:
    """(variant, caption_id, occupation) of every occupation a text of ``frame`` mentions."""
    if frame.empty:
        return pd.DataFrame(columns=MENTION_COLUMNS)
    found = find_mentions(frame["text"].tolist(), occupations, source="caption variants")
    rows = frame.iloc[found["row"].to_numpy()]
    return pd.DataFrame(
        {
            "variant": rows["variant"].to_numpy(),
            "caption_id": rows["caption_id"].to_numpy(),
            "occupation": found["occupation"].to_numpy(),
        }
    )


def column_variants(
    study: Study, run: StageRun, *, progress: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``original`` and ``[variants] columns`` captions of every row that mentions an
    occupation in at least one of them (two passes over the corpus: mentions, then the
    missing texts of the union's rows)."""
    columns = study.config.variants.columns
    if not columns:
        return _empty()
    files = study.con.execute(
        "SELECT file_id, path, format, text_column FROM corpus_files ORDER BY file_id"
    ).fetchall()
    occupations = _occupations(study)
    batch_rows = study.config.select.batch_rows
    texts, mentions = [], []
    bar = progress_bar(
        Progress("variants: read", "column", len(files) * (len(columns) + 1), progress)
    )
    for file_id, path, fmt, text_column in files:
        wanted = {"original": text_column, **columns}
        found = {}
        for name, column in wanted.items():
            found[name] = _read_variant(file_id, path, fmt, name, column, batch_rows, run)
            bar.update(1)
        marks = {name: _mentions_of(frame, occupations) for name, frame in found.items()}
        union = np.unique(np.concatenate([m["caption_id"].to_numpy() for m in marks.values()]))
        for name, frame in found.items():
            texts.append(frame[frame["caption_id"].isin(union)])
            mentions.append(marks[name])
    bar.close()
    return pd.concat(texts, ignore_index=True), pd.concat(mentions, ignore_index=True)


def _read_variant(
    file_id: int, path: str, fmt: str, name: str, column: str, batch_rows: int, run: StageRun
) -> pd.DataFrame:
    """Every non-empty caption of ``column`` in one corpus file, as :data:`TEXT_COLUMNS`."""
    frames = []
    nulls = 0
    for rows, text, null_text in _column_batches(file_id, path, fmt, name, column, batch_rows):
        nulls += null_text
        frame = pd.DataFrame({"caption_id": (file_id << 40) | rows, "text": text})
        frames.append(frame[frame["text"].notna()])
    run.drop(f"no_text:{name}", nulls)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["caption_id", "text"])  # fmt: skip
    out.insert(0, "variant", name)
    out["source"] = f"column:{column}"
    return out[TEXT_COLUMNS]


def _column_batches(
    file_id: int, path: str, fmt: str, name: str, column: str, batch_rows: int
) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """(row numbers, texts with None for unusable ones, count of null/empty/bad captions) per
    batch of one column of one corpus file; a missing column is a CorpusError naming both."""
    reader = get_reader(fmt)
    info = reader.inspect(Path(path))
    if info.empty:
        return
    if column not in info.columns:
        listed = ", ".join(printable(c) for c in info.columns)
        raise CorpusError(
            f"{printable(path)}: no column {printable(column)!r} for caption variant "
            f"{name!r} (variants.columns; columns: {listed})"
        )
    if column in info.types:
        check_text_column(path, column, info.types[column], f"variants.columns.{name}")
    file = CorpusFile(file_id, path, fmt)
    for unit in info.units:
        for batch in iter_clean_batches(file, unit, ColumnMap(column), batch_rows):
            rows = batch.table.column("row_in_file").to_numpy()
            text = batch.table.column("text").to_numpy(zero_copy_only=False)
            yield rows, text, batch.null_text + batch.bad_text


def recaption_variants(study: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The captions of the ``recaptions`` variants and the ``original`` text of their rows."""
    con = study.con
    recaps = execute_sql(con, "variants/recaptions").df()
    if recaps.empty:
        return _empty()
    ids = pd.DataFrame({"caption_id": recaps["caption_id"].unique()})
    con.register("_variant_ids", ids)
    try:
        originals = execute_sql(con, "variants/originals").df()
    finally:
        con.unregister("_variant_ids")
    texts = pd.concat([originals, recaps], ignore_index=True)[TEXT_COLUMNS]
    return texts, _mentions_of(texts, _occupations(study))


# -- labels ------------------------------------------------------------------------------------
def label_texts(study: Study, texts: pd.DataFrame, *, progress: bool) -> pd.DataFrame:
    """``texts`` with ``label`` and ``triggers``: the indicators stage's rules and settings
    (gender terms, spaCy model and components, names on or off; in this process)."""
    cfg = study.config.indicators
    spec = study.config.lexicon.gender_terms
    terms = load_gender_terms(spec, base=study.root)
    names = None
    if cfg.use_names:
        nlp = load_spacy(cfg.spacy_model)
        names = NameFinder(nlp, terms, cfg.ner_batch_size, cfg.ner_pipes or None)
    tagger = IndicatorTagger(WordMatcher(terms, source=spec), names)
    try:
        tagged = tagger.tag(texts["text"].tolist())
    finally:
        tagger.close()
    return texts.assign(
        label=tagged.labels, triggers=[readable(t) for t in tagged.triggers]
    ).reset_index(drop=True)
