"""Stage ``pst_captions``: the corpus's own stereotype score, caption side (docs/pst.md).

When the study has a corpus (``corpus.paths``), every caption of every file is read
(:func:`corpus_audit.backends.corpus.read_file`: null and non-UTF-8 captions counted and skipped, HTML
removed), the RE2 prefilter keeps those naming a PST role form and the spaCy parse attaches a
gender to each mention (:class:`corpus_audit.methods.pst.captions.CaptionRoleTagger`; rules in
``pst/captions.py``). Writes ``pst_caption_files`` (per file counts) and
``pst_caption_mentions`` (one row per role mention) in one transaction, replacing an earlier
run's; ``pst_analyze`` scores them. A rerun with the same files, corpus settings and lexicons
is skipped (:func:`corpus_key`); a file's identity is the one ``select`` uses
(:func:`~corpus_audit.backends.corpus.fingerprint_entry`: path, size, mtime of a local file;
URL, size and the store's ETag / version of an object). The files are those ``select`` reads:
``corpus.paths`` (local paths, globs, folders, or URLs read with the study's ``[storage]``
options) in ``corpus.format``. A study without a corpus skips the stage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from corpus_audit.backends.corpus import fingerprint_entry, read_file, resolve_corpus
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.base import track
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.lexicon import load_gender_terms, load_occupations
from corpus_audit.methods.lexicon.pst import load_roles
from corpus_audit.methods.pst.captions import CaptionRoleTagger, tag_files
from corpus_audit.tables.pst_frames import insert_frame

if TYPE_CHECKING:
    import pandas as pd

NAME = "pst_captions"


@stage_body(NAME)
def pst_captions(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Tag the corpus captions; see the module docstring."""
    cfg = study.config
    if not cfg.corpus.paths:
        return run.skip("no corpus (corpus.paths is empty): no caption-side score")
    key = corpus_key(study)
    last = study.last_run(NAME)
    if last is not None and last["provenance"].get("corpus_key") == key:
        run.skipped = True
        run.rows_in, run.rows_out = last["rows_in"], last["rows_out"]
        run.provenance["corpus_key"] = key
        run.messages.append("the corpus and the lexicons are unchanged: mentions kept")
        return run
    tagger = CaptionRoleTagger(
        load_roles(cfg.pst.roles, study.root),
        load_gender_terms(cfg.lexicon.gender_terms, study.root),
        occupations=load_occupations(cfg.lexicon.occupations, study.root),
    )
    mentions, files = tag_corpus(
        cfg.corpus.paths,
        tagger,
        text_column=cfg.corpus.text_column,
        progress=progress,
        store=StoreOptions.from_config(cfg.storage),
        fmt=cfg.corpus.format,
        base=study.root,
    )
    with study.transaction() as con:
        con.execute("DELETE FROM pst_caption_files")
        con.execute("DELETE FROM pst_caption_mentions")
        insert_frame(con, "pst_caption_files", files)
        insert_frame(con, "pst_caption_mentions", mentions)
    run.rows_in = int(files["rows"].sum()) if len(files) else 0
    run.rows_out = len(mentions)
    nulls = int(files["null_text"].sum()) if len(files) else 0
    if nulls:
        run.drop("null_or_bad_text", nulls)
    run.summary = files.to_dict("records")
    gendered = int((mentions["gender"] != "none").sum()) if len(mentions) else 0
    run.messages.append(f"{len(mentions)} role mentions, {gendered} with a gender attached")
    run.provenance.update(spacy_model=tagger.spacy_model, files=len(files), corpus_key=key)
    return run


def corpus_key(study: Study) -> str:
    """A hash of what the mentions depend on: the corpus files' identities (``select``'s:
    :func:`~corpus_audit.backends.corpus.fingerprint_entry`), the ``corpus`` settings and the
    lexicon specs; a rerun with the same key is skipped."""
    cfg = study.config
    store = StoreOptions.from_config(cfg.storage)
    corpus = resolve_corpus(list(cfg.corpus.paths), cfg.corpus.format, study.root, store)
    files = [fingerprint_entry(f) for f in corpus]
    blob = json.dumps(
        [files, cfg.section_hash("corpus", "pst.roles", "lexicon")], sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def tag_corpus(
    paths: Sequence[str],
    tagger: CaptionRoleTagger,
    *,
    text_column: str = "",
    progress: bool = True,
    store: StoreOptions | None = None,
    fmt: str = "auto",
    base: Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mention rows of every caption of the corpus files ``paths`` (files, globs, folders,
    URLs; :func:`corpus_audit.backends.corpus.resolve_corpus`, ``fmt`` the format of every
    file or ``auto``, relative paths taken from ``base``) and one row per file
    (:func:`corpus_audit.methods.pst.captions.tag_files`); ``store``: the ``[storage]``
    options URLs are listed and read with."""
    files = resolve_corpus(list(paths), fmt, base, store)
    return tag_files(
        (
            (Path(file.path).name, file.file_id, read_file(file, text_column=text_column))
            for file in track(files, EngineProgress("pst captions", "file", enabled=progress))
        ),
        tagger,
    )
