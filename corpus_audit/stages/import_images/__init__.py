"""The ``import_images`` stage (``corpus-audit import-images``): another model's images,
registered as a study's generated images.

A user with a folder of images from DALL-E 3, Midjourney, an SDXL on a cluster or any other
model, and the prompt of each file, registers them with::

    corpus-audit import-images DIR SOURCE... [--model NAME] [--strict]

Each SOURCE is one of the registered layouts (:mod:`.layouts`; :func:`read_source` asks them):

- a **manifest**, CSV (``.csv``/``.tsv``) or JSONL (``.jsonl``/``.ndjson``): one image per
  row/line with ``file`` (relative to the manifest's folder), ``prompt_id`` or ``prompt`` (the
  text; matched to the study's prompts exactly after whitespace normalisation), ``model``
  (or ``--model``), optional ``seed`` and ``index``; every other column is kept as metadata;
- a **folder per prompt** (DALL-Eval and other tools): ``<root>/<prompt text>/<n>.png``; the
  folder name is the prompt text, ``n`` the index; needs ``--model``;
- the **BAFIS dataset**: a folder with ``metadata.json`` (``{"0": {"occupation", "model",
  "prompt_group", "language", "prompt"}, ...}``, files ``<key>.png`` beside it), or that file.

Imported images become ``images`` rows with ``source = 'generated'`` (``origin =
'import:<import_id>'``), so ``label``, ``analyze``, the PST stages, ``categories``, ``battles``
and the report use them as they use the images ``generate`` made. Their provenance is in
``image_imports`` (source path and SHA-256, layout, time) and ``imported_images`` (the file,
its SHA-256 and size, manifest line, index, metadata).

Checks, all before anything is written: a bad source (not UTF-8, bad JSON, a missing column, a
prompt the study does not know, a path leaving the manifest's folder, the same file or the same
(model, prompt, index) twice) is a :class:`~corpus_audit.core.errors.ManifestError` naming the file
and line, and the study is left unchanged. A file that is missing, unreadable or not an image is
a named drop reason (``import_skips``), not an error (``--strict`` makes it one). Without
``--strict`` only the header of a file is opened; ``--strict`` decodes every file in full, so
one cut short (a valid header, the rest missing) is ``unreadable`` too. Every file is
hashed: the image id is ``imp:<model-slug>:<prompt_id>:<index>:<sha256[:16]>``, so importing the same
source again adds nothing, and a file whose bytes changed since it was imported is reported
(``changed_since_import``) and left as it was, never silently relabelled. Model names are kept
as given (case-sensitive), but two names with one slug (``DALL-E-3`` and ``dall-e-3``, in one
import or the study and a new import) are refused: their images would share ids. An image
whose bytes are already those of an image of another prompt (the same file imported again for
another prompt, or a copy) is imported and named (``same_image_other_prompt``, with the first
image); ``--strict`` refuses it. All rows of one run go in one transaction.

Imported images have no recipe the study can replay: ``regenerate`` and FairCritic refuse them
with a message.

The readers (:mod:`.readers`, :func:`read_source`) and :func:`resolve_entries` (:mod:`.match`)
are pure functions of the files and the study's prompt list; the files are checked on the
run's engine (:mod:`.files`), each source's rows planned (:mod:`.plan`) and written
(:mod:`.write`) by :func:`import_images`, a stage of the catalogue run by its command only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from corpus_audit.backends.import_remote import mirror_source
from corpus_audit.core.errors import ManifestError
from corpus_audit.core.kinds import prompt_stage
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study
from corpus_audit.core.urls import credentials_refused, has_credentials, is_url
from corpus_audit.stages.import_images.files import check_all, check_file
from corpus_audit.stages.import_images.layouts import LAYOUTS, Layout, read_source, register
from corpus_audit.stages.import_images.manifest import Entry, Source, normalise
from corpus_audit.stages.import_images.match import (
    Item,
    StudyPrompt,
    resolve_entries,
    study_prompts,
)
from corpus_audit.stages.import_images.plan import (
    count,
    image_id,
    plans,
    refuse_any_skip,
    refuse_colliding_names,
    refuse_generated_names,
)
from corpus_audit.stages.import_images.readers import unterminated_quote
from corpus_audit.stages.import_images.write import write

NAME = "import_images"  # the stage's name in the catalogue and stage_runs

__all__ = [
    "LAYOUTS", "NAME", "Entry", "Item", "Layout", "Source", "StudyPrompt", "check_file",
    "image_id", "import_images", "normalise", "read_source", "register", "resolve_entries",
    "study_prompts", "unterminated_quote", "verify_imports",
]  # fmt: skip


@stage_body(NAME)
def import_images(
    study: Study,
    run: StageRun,
    sources: Sequence[Path | str],
    *,
    model: str | None = None,
    strict: bool = False,
    progress: bool = False,
) -> StageRun:
    """Import the images of ``sources`` (see the module docstring); returns the run's counts.

    Nothing is written when a source is bad (:class:`ManifestError`), nor, with ``strict``,
    when any file is missing, unreadable or not an image. ``progress``: a bar of the files
    checked (off by default: the command prints none).
    """
    read = _read_sources(study, sources, model)
    prompts = study_prompts(study)
    if not prompts:
        raise ManifestError(
            f"{study.root}: the study has no prompts yet: run `corpus-audit "
            f"{prompt_stage(study.config)} {study.root}` before importing images"
        )
    matched = resolve_entries([e for s in read for e in s.entries], prompts)
    refuse_generated_names(study, matched)
    refuse_colliding_names(study, matched)
    planned = plans(study, run, read, matched, model, strict, progress=progress)
    if strict:
        refuse_any_skip(planned)
    now = datetime.now(UTC).replace(tzinfo=None)
    with study.transaction() as con:
        for p in planned:
            write(con, p, now)
    count(run, planned)
    models = sorted({i.model for i in matched})
    run.messages.append(
        f"imported images are source = 'generated' rows of model(s) {', '.join(models)}; "
        "run `corpus-audit label` next (they cannot be regenerated: no recipe is known)"
    )
    if run.rows_out == 0:
        run.skipped = True
    return run


def _read_sources(study: Study, sources: Sequence[Path | str], model: str | None) -> list[Source]:
    """Every source read (a manifest on a store mirrored into the study first); a source URL
    with credentials is refused before any request, and never quoted."""
    secret = [str(i + 1) for i, s in enumerate(sources) if has_credentials(str(s))]
    if secret:
        raise ManifestError(credentials_refused([f"source {n}" for n in secret], "import-images"))
    sources = [
        mirror_source(study, str(s), read_source, model) if is_url(str(s)) else s for s in sources
    ]
    return [read_source(s, model) for s in sources]


def verify_imports(study: Study, *, progress: bool = False) -> StageRun:
    """``import-images DIR --verify``: hash every imported file again and report those missing,
    unreadable or changed since their import (nothing is written, no run is recorded)."""
    run = StageRun("import-images --verify")
    if not study.table_exists("imported_images"):
        return run.skip("no imported images")
    rows = study.con.execute(
        "SELECT image_id, file, sha256 FROM imported_images ORDER BY file"
    ).fetchall()
    try:
        checked = check_all(study, run, [Path(r[1]) for r in rows], progress=progress)
    finally:
        run.release()  # the engine the check held (no Study.stage here to close it)
    run.rows_in = len(rows)
    for (iid, file, sha), c in zip(rows, checked, strict=True):
        if c.reason is not None:
            run.drop(c.reason)
            run.messages.append(f"{file}: {c.reason} ({c.detail}); image {iid}")
        elif c.sha256 != sha:
            run.drop("changed_since_import")
            run.messages.append(
                f"{file}: changed since import (sha256 {sha[:12]}... then, "
                f"{c.sha256[:12] if c.sha256 else '?'}... now); image {iid} keeps its labels "
                "from the old bytes"
            )
        else:
            run.rows_out += 1
    run.summary.append({"imported": len(rows), "unchanged": run.rows_out,
                        "changed_or_missing": len(rows) - run.rows_out})  # fmt: skip
    return run
