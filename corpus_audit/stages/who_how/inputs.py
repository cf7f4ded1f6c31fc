"""The texts of a text corpus (``texts.source = 'corpus'``): read into ``texts_documents``.

``corpus-audit texts FILE --out DIR`` makes ``DIR`` a study whose ``corpus.paths`` are the
files and whose ``who_how`` stage reads them here, with the project's corpus readers
(:mod:`corpus_audit.backends.corpus`: parquet, CSV/TSV, JSONL, Hugging Face ``save_to_disk``; the text
column found as for captions: ``corpus.text_column`` or ``TEXT``/``caption``/``text``).

- ``text_id`` = ``file_id << 40 | row_in_file``, as ``captions.caption_id``;
- texts that are null or empty and texts that are not UTF-8 are counted and skipped (the
  stage's drop reasons), never fatal;
- ``texts.occupation_column`` (optional): each text's occupation (white space trimmed; a row
  without one is counted and kept for the pooled comparisons). Without it, the occupations
  come from the study's occupation lexicon, matched as the ``select`` stage matches captions
  (:func:`corpus_audit.methods.texts.mentions.find_mentions`);
- ``texts.gender_column`` (optional): the gender a text is *specified* as (``female``,
  ``male``, ``non_binary``; ``non-binary``/``nonbinary`` read as ``non_binary``; empty or null:
  unspecified; any letter case). Another value is a :class:`CorpusError` naming the file, the
  row and the value.

A missing configured column is a :class:`CorpusError` naming the file and listing its
columns. The documents are read again, in one transaction with the removal of the old rows,
only when the files (size, mtime) or the columns changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.backends.corpus import (
    ColumnMap,
    fingerprint_entry,
    get_reader,
    iter_clean_batches,
    resolve_columns,
    resolve_corpus,
    source,
)
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.base import track
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.errors import CorpusError, printable
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.methods.texts.mentions import find_mentions

GENDER_VALUES = {
    "female": "female",
    "male": "male",
    "non_binary": "non_binary",
    "non-binary": "non_binary",
    "nonbinary": "non_binary",
}
FILE_SHIFT = 40  # text_id = file_id << 40 | row_in_file


def read_documents(study: Study, run: StageRun, *, progress: bool = True) -> bool:
    """Fill ``texts_documents`` and ``texts_occupations`` from ``corpus.paths`` when the files
    or columns changed since they were read; True when they were (re)read."""
    cfg = study.config
    store = StoreOptions.from_config(cfg.storage)
    files = resolve_corpus(cfg.corpus.paths, cfg.corpus.format, base=study.root, store=store)
    settings = {
        "files": [fingerprint_entry(f) for f in files],
        "columns": [cfg.corpus.text_column, cfg.texts.occupation_column, cfg.texts.gender_column],
        "occupations": cfg.lexicon.occupations if not cfg.texts.occupation_column else None,
    }
    fingerprint = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    stored = study.con.execute(
        "SELECT fingerprint FROM texts_settings WHERE kind = 'documents'"
    ).fetchall()
    if stored and stored[0][0] == fingerprint:
        return False

    documents = []
    for file in track(files, EngineProgress("who_how read", "file", enabled=progress)):
        documents.extend(_file_batches(study, file, run))
    table = (
        pa.concat_tables(documents)
        if documents
        else pa.table(
            {
                "text_id": pa.array([], pa.int64()),
                "source_file": pa.array([], pa.string()),
                "row_in_file": pa.array([], pa.int64()),
                "text": pa.array([], pa.string()),
                "specified": pa.array([], pa.string()),
                "occupation": pa.array([], pa.string()),
            }
        )
    )
    if table.num_rows == 0:
        names = ", ".join(printable(f.path) for f in files)
        raise CorpusError(f"{names}: no usable text in the corpus (every text is null or empty)")
    occupations = _occupations(study, table, run)
    _write(study, table, occupations, fingerprint, settings)
    return True


def _file_batches(study: Study, file: Any, run: StageRun) -> Iterator[pa.Table]:
    """The usable rows of one file as ``text_id, source_file, row_in_file, text, specified,
    occupation`` (occupation null when the column is not configured)."""
    cfg = study.config
    reader = get_reader(file.format)
    info = reader.inspect(
        source(file.path, file.store, file.known)
    )  # a local Path, or a store's URL
    if info.empty:
        return
    text = resolve_columns(file.path, info.columns, cfg.corpus.text_column).text
    occ_col = _column(file.path, info.columns, cfg.texts.occupation_column, "occupation")
    gender_col = _column(file.path, info.columns, cfg.texts.gender_column, "gender")
    # the readers' two optional string slots carry the occupation and gender columns
    columns = ColumnMap(text, url=occ_col, key=gender_col)
    for unit in info.units:
        for batch in iter_clean_batches(file, unit, columns, cfg.select.batch_rows):
            run.drop("text null or empty", batch.null_text)
            run.drop("text not UTF-8", batch.bad_text)
            yield _usable(file, batch.table, gender_col is not None)


def _column(path: str, have: list[str], name: str, what: str) -> str | None:
    if not name:
        return None
    if name not in have:
        listed = ", ".join(printable(c) for c in have) or "none"
        raise CorpusError(
            f"{printable(path)}: no {what} column '{printable(name)}' (texts.{what}_column; "
            f"columns: {listed})"
        )
    return name


def _usable(file: Any, table: pa.Table, has_gender: bool) -> pa.Table:
    keep = pc.fill_null(pc.greater(pc.utf8_length(table["text"]), 0), False)
    table = table.filter(keep)
    rows = table["row_in_file"].to_numpy()
    specified = _genders(file.path, rows, table["key"].to_pylist()) if has_gender else None
    occupation = pc.utf8_trim_whitespace(table["url"])
    occupation = pc.if_else(pc.equal(occupation, ""), pa.scalar(None, pa.string()), occupation)
    return pa.table(
        {
            "text_id": pa.array((np.int64(file.file_id) << FILE_SHIFT) | rows, pa.int64()),
            "source_file": pa.array([file.path] * len(rows), pa.string()),
            "row_in_file": table["row_in_file"],
            "text": table["text"],
            "specified": pa.array(specified or [None] * len(rows), pa.string()),
            "occupation": occupation,
        }
    )


def _where(path: str, row: int) -> str:
    """Where 0-based data row ``row`` of a corpus file is, as a person looks for it: the line
    of a JSON Lines file (one record per line), else the record counted from 1 (after a CSV
    header; a quoted CSV field may span lines, so no line is claimed)."""
    name = path.lower()
    if any(name.endswith(ext) for ext in (".jsonl", ".jsonl.gz", ".ndjson")):
        return f"line {row + 1}"
    return f"record {row + 1}"


def _genders(path: str, rows: np.ndarray, values: list[str | None]) -> list[str | None]:
    out: list[str | None] = []
    for row, value in zip(rows.tolist(), values, strict=True):
        key = (value or "").strip().lower()
        if not key:
            out.append(None)
        elif key in GENDER_VALUES:
            out.append(GENDER_VALUES[key])
        else:
            raise CorpusError(
                f"{printable(path)}: {_where(path, row)}: gender {printable(repr(value))} is not "
                "female, male, non_binary or empty (texts.gender_column)"
            )
    return out


def _occupations(study: Study, table: pa.Table, run: StageRun) -> pd.DataFrame:
    """(text_id, occupation) from the column, or from the lexicon's mentions."""
    if study.config.texts.occupation_column:
        frame = pd.DataFrame(
            {"text_id": table["text_id"].to_numpy(), "occupation": table["occupation"].to_pylist()}
        )
        missing = int(frame["occupation"].isna().sum())
        if missing:
            run.messages.append(
                f"{missing:,} texts have no occupation: they count in the pooled comparisons only"
            )
        return frame.dropna().drop_duplicates()

    lexicon = load_occupations(study.config.lexicon.occupations, base=study.root)
    found = find_mentions(table["text"], lexicon, source="texts")
    ids = table["text_id"].to_numpy()
    return pd.DataFrame(
        {"text_id": ids[found["row"].to_numpy()], "occupation": found["occupation"]}
    )


def _write(
    study: Study, table: pa.Table, occupations: pd.DataFrame, fingerprint: str, settings: dict
) -> None:
    documents = table.drop_columns(["occupation"])
    con = study.con
    with study.transaction():
        con.execute("DELETE FROM texts_documents")
        con.execute("DELETE FROM texts_occupations")
        con.register("texts_new_documents", documents)
        con.register("texts_new_occupations", occupations)
        try:
            con.execute("INSERT INTO texts_documents BY NAME SELECT * FROM texts_new_documents")
            con.execute("INSERT INTO texts_occupations BY NAME SELECT * FROM texts_new_occupations")
        finally:
            con.unregister("texts_new_documents")
            con.unregister("texts_new_occupations")
        con.execute(
            "INSERT OR REPLACE INTO texts_settings VALUES ('documents', ?, ?)",
            [fingerprint, json.dumps(settings, sort_keys=True)],
        )
