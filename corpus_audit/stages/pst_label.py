"""Stage ``pst_label``: the persons of every generated PST image, by position (METHODS 2).

Reads what ``label`` stored (``face_filter``: size and the one-face rule; ``faces``: every
detected face, left to right) and does not run a detector again:

- paired and power prompts: the two-face rule (:func:`corpus_audit.methods.pst.positions.pair_table`,
  ``label.min_face_fraction`` / ``label.count_small_faces``): exactly two large faces, left
  and right by box centre;
- single prompts: the one-face rule's outcome of ``label`` as it is.

Each kept image is decoded (at most :data:`corpus_audit.core.imagefile.DECODE_MAX_SIDE` on its long
side; stored boxes are scaled to it) and each person's crop goes through the classifier of
``[label]`` (:func:`corpus_audit.methods.pst.persons.classify_people`, threshold ``label.threshold``).
Writes ``pst_face_filter`` (one row per image, with its drop reason) and ``pst_people`` (one
row per person: side, role, stereotyped and perceived gender, confidence, crop), one
transaction per ``label.batch_size`` images: a killed run keeps its finished batches and a
rerun continues. Another ``label.classifier`` later classifies the kept persons again under
its id.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from corpus_audit.backends.classifiers import build_classifier, classifier_id
from corpus_audit.backends.engines import model_actors
from corpus_audit.backends.engines.base import Progress as EngineProgress
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.backends.faces import Face, FaceResult, FaceRule
from corpus_audit.core.imagefile import DECODE_MAX_SIDE, UnreadableImage, decode, study_image_path
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.stage_state import StageProgress
from corpus_audit.core.store import StageRun, Study, dicts
from corpus_audit.methods.lexicon.pst import PstPrompt
from corpus_audit.methods.pst.persons import PstImage, classify_people
from corpus_audit.methods.pst.positions import PairResult, pair_table
from corpus_audit.tables.pst_frames import insert_frame, stored_prompts

NAME = "pst_label"
FILTER_COLUMNS = (
    "image_id", "prompt_id", "kind", "n_faces", "n_large", "kept", "reason",
    "left_face", "right_face",
)  # fmt: skip


@stage_body(NAME)
def pst_label(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Label the persons of the PST images not labelled yet; see the module docstring."""
    cfg = study.config.label
    cid = classifier_id(cfg)
    todo = study.sql("pst_label/todo", cid=cid).df()
    waiting = study.count(
        "images i JOIN pst_prompts p ON p.prompt_id = i.prompt_id",
        "NOT EXISTS (SELECT 1 FROM face_filter f WHERE f.image_id = i.image_id)",
    )
    if waiting:
        run.messages.append(f"{waiting} PST images have no face filter yet: run `label`")
    run.rows_in = len(todo)
    if todo.empty:
        run.skipped = True
        run.summary = _summary(study, cid)
        return run
    _label_on_engine(study, run, todo, cid, progress)
    run.summary = _summary(study, cid)
    run.provenance.update(classifier=cid, threshold=cfg.threshold)
    return run


def face_rule_rows(batch: pd.DataFrame, faces: pd.DataFrame, cfg: Any) -> pd.DataFrame:
    """``pst_face_filter`` rows of ``batch`` (rows of ``pst_label/todo.sql``): the two-face
    rule for paired/power prompts, ``label``'s one-face rule for single prompts."""
    two = batch[batch["kind"] != "single"]
    pairs = pair_table(
        two[["image_id", "image_width", "image_height"]],
        faces,
        FaceRule.of(cfg),
    )
    pairs = pairs.merge(two[["image_id", "prompt_id", "kind"]], on="image_id")
    one = batch[batch["kind"] == "single"]
    singles = pd.DataFrame(
        {
            "image_id": one["image_id"],
            "prompt_id": one["prompt_id"],
            "kind": one["kind"],
            "n_faces": one["n_faces"],
            "n_large": None,
            "kept": one["one_face_kept"].astype(bool),
            "reason": one["one_face_reason"],
            "left_face": one["kept_face"],
            "right_face": None,
        }
    )
    return pd.concat([pairs[list(FILTER_COLUMNS)], singles], ignore_index=True)


@dataclass(frozen=True)
class PersonsUnit:
    """One batch's kept images, as a worker gets them (plain, picklable values): per image its
    id, file, prompt, the face rule's outcome (kind, left face, right face) and its stored
    boxes ((x, y, w, h, score) in face order, in the stored image's pixels)."""

    images: tuple[tuple[str, str, PstPrompt, tuple, tuple], ...]
    max_pixels: int
    threshold: float
    batch_size: int


def _load_classifier(cfg: Any, device: str, seed: int) -> Any:
    """The ``[label]`` classifier of a worker."""
    return build_classifier(cfg, device=device, seed=seed)


def classify_unit(classifier: Any, unit: PersonsUnit) -> tuple[pd.DataFrame, int]:
    """The person rows of one batch (each kept image decoded, its stored boxes scaled to the
    decoded size, each person classified) and how many images could not be read now."""
    items, unreadable = [], 0
    for image_id, path, prompt, rule, boxes in unit.images:
        try:
            image = decode(path, max_pixels=unit.max_pixels, max_side=DECODE_MAX_SIDE)
        except UnreadableImage:
            unreadable += 1
            continue
        result = _stored_result(
            rule, boxes, image.array.shape[1], image.array.shape[0], image.width
        )
        items.append(PstImage(image_id, image.array, prompt, result))
    people = classify_people(
        items, classifier, threshold=unit.threshold, batch_size=unit.batch_size
    )
    return people, unreadable


def _batch_unit(
    study: Study, batch: pd.DataFrame, prompts: dict
) -> tuple[pd.DataFrame, Counter, PersonsUnit]:
    """The face rule rows of one batch, their drop reasons and the unit of its kept images
    (database reads only, on the driver)."""
    cfg = study.config.label
    faces = study.con.execute(
        "SELECT * FROM faces WHERE list_contains(?, image_id) ORDER BY image_id, face_index",
        [list(batch["image_id"])],
    ).df()
    filters = face_rule_rows(batch, faces, cfg)
    reasons = Counter(r for r in filters["reason"] if isinstance(r, str))
    paths = dict(zip(batch["image_id"], batch["path"], strict=True))
    images = tuple(
        (
            row.image_id,
            str(study_image_path(study.root, paths[row.image_id])),
            prompts[row.prompt_id],
            (row.kind, row.left_face, row.right_face),
            _boxes(faces[faces["image_id"] == row.image_id]),
        )
        for row in filters[filters["kept"]].itertuples(index=False)
    )
    unit = PersonsUnit(images, int(study.config.images.max_pixels), cfg.threshold, cfg.batch_size)
    return filters, reasons, unit


def _label_on_engine(
    study: Study, run: StageRun, todo: pd.DataFrame, cid: str, progress: bool
) -> None:
    """Every batch of ``todo``: the face rule on the driver, the persons classified by the
    ``[label]`` classifier on the study's engine (loaded once per worker), each batch written
    in order, one transaction each."""
    cfg = study.config.label
    prompts = stored_prompts(study)
    size = cfg.batch_size
    batches = [
        _batch_unit(study, todo.iloc[start : start + size], prompts)
        for start in range(0, len(todo), size)
    ]
    spec = ModelSpec(
        _load_classifier,
        (cfg, study.config.engine.device, int(study.config.study.seed)),
        classify_unit,
    )
    units = [(i, unit) for i, (_f, _r, unit) in enumerate(batches)]
    bar = EngineProgress(NAME, "batch", enabled=progress)
    with model_actors(study.config.engine, "label", spec, units, run=run, progress=bar) as results:
        for i, (people, unreadable) in results:
            filters, reasons, _unit = batches[i]
            if unreadable:
                reasons["unreadable_now"] += unreadable
            write_batch(study, filters, people, cid)
            run.rows_out += len(people)
            for reason, count in reasons.items():
                run.drop(reason, count)


def _stored_result(
    rule: tuple, boxes: tuple, width: int, height: int, stored_width: int
) -> PairResult | FaceResult:
    """The kept image's face rule outcome (``rule``: kind, left face, right face) with the
    stored ``boxes`` scaled to the decoded array."""
    kind, left, right = rule
    factor = width / float(stored_width or width)
    faces = tuple(
        Face(x * factor, y * factor, w * factor, h * factor, s) for x, y, w, h, s in boxes
    )
    if kind == "single":
        return FaceResult(faces, width, height, True, None, int(left))
    return PairResult(faces, width, height, True, None, 2, int(left), int(right))


def _boxes(faces: pd.DataFrame) -> tuple[tuple[float, float, float, float, float], ...]:
    """One image's stored ``faces`` rows as (x, y, w, h, score), in face order."""
    ordered = faces.sort_values("face_index")
    return tuple(
        (float(b.x), float(b.y), float(b.w), float(b.h), float(b.score))
        for b in ordered.itertuples(index=False)
    )


def write_batch(study: Study, filters: pd.DataFrame, people: pd.DataFrame, cid: str) -> None:
    """One transaction: the batch's ``pst_face_filter`` rows and its persons from ``cid``."""
    ids = list(filters["image_id"])
    with study.transaction() as con:
        con.execute("DELETE FROM pst_face_filter WHERE list_contains(?, image_id)", [ids])
        con.execute(
            "DELETE FROM pst_people WHERE list_contains(?, image_id) AND classifier = ?",
            [ids, cid],
        )
        insert_frame(con, "pst_face_filter", filters)
        insert_frame(con, "pst_people", people)


def _summary(study: Study, cid: str) -> list[dict[str, Any]]:
    cur = study.sql("pst_label/summary", cid=cid)
    return dicts(cur)


def progress(study: Study) -> StageProgress:
    """Images of PST prompts with a ``pst_face_filter`` row, of those ``label`` filtered."""
    total = study.count(
        "images i JOIN pst_prompts p ON p.prompt_id = i.prompt_id "
        "JOIN face_filter f ON f.image_id = i.image_id"
    )
    return StageProgress(study.count("pst_face_filter"), total, "images")
