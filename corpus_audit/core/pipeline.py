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

from corpus_audit.core.catalogue import RUN_ORDERS, STAGE_NAMES, STAGES, command
from corpus_audit.core.config import StudyConfig
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.extras import require_stages
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.registry import load
from corpus_audit.core.stage_state import stage_state
from corpus_audit.core.store import StageRun, Study, StudyError, changed_settings
from corpus_audit.core.study_lock import run_lock
from corpus_audit.core.urls import credential_keys, credentials_refused, is_url, local_path


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
    secret = credential_keys({"corpus": {"paths": list(corpus)}})
    if secret:  # refused before any request, and never quoted
        raise ConfigError(credentials_refused(secret, "corpus"))
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
    skips finished work. ``label`` runs before and after ``generate`` (see ``core/catalogue.py``)."""
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
    require_stages(order)  # a missing library: one line before anything is written
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
            notes.append(config_note(study, run["stage"], prov, list(sections)))
    if run["status"] == "skipped" and prov.get("messages"):
        notes.append(str(prov["messages"][0]))
    return "; ".join(notes)


def config_note(study: Study, stage: str, prov: dict[str, Any], sections: list[str]) -> str:
    """``config changed since this run (study.toml: label.threshold): rerun to update``: the
    settings that differ from those the run recorded (older runs recorded none: then only
    ``study.toml``), and for a setting the stage declares cannot change its results, why."""
    try:
        values = study.config.setting_values(*sections)
    except KeyError:
        values = {}
    changed = changed_settings({"provenance": prov}, values)
    where = f"study.toml: {', '.join(changed)}" if changed else "study.toml"
    note = f"config changed since this run ({where}): rerun to update"
    reasons = [
        f"{key}: {reason}"
        for key in changed
        if stage in STAGES and (reason := STAGES.get(stage).unaffected_reason(key)) is not None
    ]
    if reasons and len(reasons) == len(changed):
        note += " (results unchanged: " + "; ".join(reasons) + ")"
    return note


def status(study: Study) -> list[StageStatus]:
    """Per stage: the latest finished run's counts, 'not run', or 'partial: d/n unit' for a
    stage whose latest run did not finish (see :mod:`corpus_audit.core.stage_state`)."""
    out = []
    fingerprints: dict[str, list[Any]] = {}
    kind_stages = set(RUN_ORDERS[study_kind(study.config)])
    # the study kind's stages, and any other that has run (recaption, import_images, battles_*)
    for name in STAGES.names():
        row = stage_status(study, name, fingerprints)
        if name not in kind_stages and row.status == "not run":
            continue
        out.append(row)
    return out


def _attributes_note(study: Study) -> str:
    """Why ``label`` has work left although it ran: kept images lacking perceived age or skin
    tone rows (a study labelled before they existed, or with label.age / label.skin_tone off
    then), or '' when none."""
    cfg = study.config.label
    if not (cfg.age or cfg.skin_tone) or not study.table_exists("perceived_age"):
        return ""
    age, skin = study.sql("label/attributes_missing", age=cfg.age, skin=cfg.skin_tone).fetchone()
    if not age and not skin:
        return ""
    return (
        f"{max(age, skin)} kept images lack perceived age ({age}) or skin tone ({skin}) rows: "
        "rerun to measure them (their gender labels are kept)"
    )


def stage_status(
    study: Study, name: str, fingerprints: dict[str, list[Any]] | None = None
) -> StageStatus:
    """One line of :func:`status`. When the latest run was a skip, the counts are those of
    the latest run that did the work, and the note says the rerun skipped and why.
    ``fingerprints`` caches the table fingerprints across the stages of one status."""
    state = stage_state(study, name)
    last = state.last
    if state.state == "partial":
        note = (
            f"the last run did not finish (started {str(study.unfinished(name))[:19]}); "
            f"finished batches are kept: run `corpus-audit {command(name)}` to complete it"
        )
        return StageStatus(name, False, state.label, None, None, {}, None, note)
    if last is None:
        return StageStatus(name, False, "not run", None, None, {}, None)
    note = _note(study, last, {} if fingerprints is None else fingerprints)
    if name == "label":
        note = "; ".join(n for n in (note, _attributes_note(study)) if n)
    shown = last
    if last["status"] == "skipped":  # keep the counts of the run that did the work
        done = study.last_done_run(name)
        if done is not None:
            shown = done
            note = f"rerun {str(last['finished_at'])[:19]} skipped" + (f": {note}" if note else "")
    return StageStatus(
        name,
        True,
        shown["status"],
        shown["rows_in"],
        shown["rows_out"],
        shown["dropped"],
        shown["finished_at"],
        note,
    )


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
