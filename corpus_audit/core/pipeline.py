"""The stages in order, ``run`` (all of them), ``status`` and ``init``.

Each stage is a function ``stage(study: Study, *, progress: bool = True) -> StageRun`` in its
own module; this module only knows their names and order. Modules are imported when their
stage runs, so heavy libraries (torch, spaCy, MediaPipe) load only where needed.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.core.catalogue import RUN_ORDERS, STAGE_NAMES, STAGES
from corpus_audit.core.config import StudyConfig
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.registry import load
from corpus_audit.core.stage_state import stage_state
from corpus_audit.core.store import StageRun, Study, StudyError
from corpus_audit.core.study_lock import run_lock
from corpus_audit.core.urls import is_url, local_path


def stage_function(name: str) -> Callable[..., StageRun]:
    """The function that runs stage ``name``."""
    return load(STAGES.get(name).target)


def init_study(
    root: Path,
    corpus: list[str],
    *,
    overrides: dict[str, dict[str, Any]] | None = None,
    overwrite: bool = False,
) -> Study:
    """Create a study directory for ``corpus`` (paths/globs) with default settings.

    Corpus paths are stored absolute, so the study can be run from anywhere. A path or glob
    that matches nothing raises :class:`StudyError` naming it.
    """
    config = StudyConfig(root=Path(root))
    config.corpus.paths = absolute_paths(corpus)
    for section, values in (overrides or {}).items():
        target = getattr(config, section)
        for key, value in values.items():
            if value is not None:
                setattr(target, key, value)
    return Study.create(config, overwrite=overwrite)


def absolute_paths(corpus: list[str]) -> list[str]:
    """Corpus paths as a study stores them: absolute, a glob kept as a glob. A path or glob
    that matches nothing raises :class:`StudyError` naming it."""
    paths: list[str] = []
    for spec in corpus:
        if is_url(spec):  # a store's URL (s3://, hf://...) is kept as written
            paths.append(spec)
            continue
        p = Path(local_path(spec)).expanduser()
        if p.exists():
            paths.append(str(p.resolve()))
        elif glob.glob(str(p)):
            paths.append(str(p.absolute()))
        else:
            raise StudyError(f"{spec}: no such corpus file, directory or glob match")
    return paths


def run_all(study: Study, *, until: str | None = None, progress: bool = True) -> list[StageRun]:
    """Run every stage in ``RUN_ORDER`` (up to and including the last run of ``until``); each
    skips finished work. ``label`` runs before and after ``generate`` (see ``stages.py``)."""
    if until is not None and until not in STAGE_NAMES:
        raise StudyError(f"unknown stage '{until}' (stages: {', '.join(STAGE_NAMES)})")
    run_order = RUN_ORDERS[study_kind(study.config)]
    order = run_order
    if until is not None:
        if until not in run_order:
            raise StudyError(
                f"stage '{until}' is not run in a {study_kind(study.config)} study "
                f"(stages: {', '.join(dict.fromkeys(run_order))})"
            )
        order = run_order[: len(run_order) - run_order[::-1].index(until)]
    with run_lock(study.root):  # held across the stages: no `config set` between two
        return [stage_function(name)(study, progress=progress) for name in order]


@dataclass
class StageStatus:
    """One line of ``corpus-audit status``."""

    stage: str
    done: bool
    status: str
    rows_in: int | None
    rows_out: int | None
    dropped: dict[str, int]
    finished_at: Any
    note: str = ""  # config changed since the run; a skipped run's reason (its first message)


def _note(study: Study, run: dict[str, Any], fingerprints: dict[str, list[Any]]) -> str:
    """Why a run was skipped (its first message), and whether the config or the input tables
    it depends on have changed since (then `corpus-audit run` redoes the stage).
    ``fingerprints`` caches the current table fingerprints across the stages of one status."""
    notes = []
    prov = run["provenance"]
    recorded_inputs = prov.get("inputs") or {}
    for table in recorded_inputs:
        if table not in fingerprints:  # several stages read captions, mentions, ...: hash once
            fingerprints[table] = study.fingerprint(table)
    changed = [t for t, recorded in recorded_inputs.items() if fingerprints[t] != recorded]
    if changed:
        notes.append(f"inputs changed since this run ({', '.join(changed)}): rerun to update")
    sections = prov.get("config_sections")
    if sections is not None and run["config_hash"]:
        try:
            current = study.config.section_hash(*sections)
        except KeyError:  # a section that no longer exists
            current = None
        if current != run["config_hash"]:
            notes.append("config changed since this run (study.toml): rerun to update")
    if run["status"] == "skipped" and prov.get("messages"):
        notes.append(str(prov["messages"][0]))
    return "; ".join(notes)


def status(study: Study) -> list[StageStatus]:
    """Per stage: the latest finished run's counts, 'not run', or 'partial: d/n unit' for a
    stage whose latest run did not finish (see :mod:`corpus_audit.core.stage_state`)."""
    out = []
    fingerprints: dict[str, list[Any]] = {}
    kind_stages = set(RUN_ORDERS[study_kind(study.config)])
    for name in STAGE_NAMES:  # the study kind's stages, and any other that has run (recaption)
        state = stage_state(study, name)
        if name not in kind_stages and state.state == "not run":
            continue
        last = state.last
        if state.state == "partial":
            note = (
                f"the last run did not finish (started {str(study.unfinished(name))[:19]}); "
                f"finished batches are kept: run `corpus-audit {name}` to complete it"
            )
            out.append(StageStatus(name, False, state.label, None, None, {}, None, note))
        elif last is None:
            out.append(StageStatus(name, False, "not run", None, None, {}, None))
        else:
            out.append(
                StageStatus(
                    name,
                    True,
                    last["status"],
                    last["rows_in"],
                    last["rows_out"],
                    last["dropped"],
                    last["finished_at"],
                    _note(study, last, fingerprints),
                )
            )
    return out


def next_steps(study: Study) -> list[str]:
    """The note ``status`` prints for a study without a corpus (``init --kind images``): the
    command to run next (prompts, images to import or generate, label, analyze, report), and
    that ``generate`` is not needed when images were imported and no model is configured.
    Empty for the other kinds."""
    if study_kind(study.config) != "images":
        return []
    root = study.root
    if not study.count("prompts"):
        return [f"next: corpus-audit prompts {root}"]
    lines = []
    n_images = study.count("images", "source = 'generated'")
    models = study.config.generate.models
    if not n_images:
        if models:
            return [f"next: corpus-audit generate {root}"]
        return [
            f"next: import the model's images (corpus-audit import-images {root} SOURCE --model "
            f"NAME), or set generate.models and run corpus-audit generate {root}"
        ]
    if not models and stage_state(study, "generate").state == "not run":
        lines.append("generate: not needed (images imported; generate.models is empty)")
    unlabelled = study.count(
        "images", "source = 'generated' AND image_id NOT IN (SELECT image_id FROM face_filter)"
    )
    if unlabelled:
        lines.append(f"next: corpus-audit label {root} ({unlabelled} image(s) without a label)")
        return lines
    for name in ("analyze", "report"):
        if stage_state(study, name).state in ("not run", "partial"):
            lines.append(f"next: corpus-audit {name} {root}")
            return lines
    return lines
