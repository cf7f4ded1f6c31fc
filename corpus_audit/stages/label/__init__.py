"""Stage ``label``: face filter + perceived-gender label for every image (METHODS 1.4).

For every row of ``images`` (training and generated alike) that has no ``face_filter`` row
yet, or that passed the face filter but has no label from the configured classifier, the
stage, batch by batch (``label.batch_size`` images):

1. decodes the file with :func:`corpus_audit.core.imagefile.decode` (``unreadable`` + detail
   when it fails; the engine's ``prepare`` decodes the next batches while the models run).
   Images are decoded at most :data:`DECODE_MAX_SIDE` pixels on their long side (JPEGs by the
   decoder itself), and the decoders share a budget of ``images.max_pixels`` full-size pixels,
   so one worker's decode peaks near 4 bytes x ``images.max_pixels`` for a non-JPEG and at
   ~64 MiB for a JPEG (see docs/reliability.md); the decodes of one process share the
   budget (:func:`shared_budget`). Face boxes are stored in the pixels of the
   whole image, whatever size it was decoded at;
2. runs the face detector (:mod:`corpus_audit.backends.faces`) and the one-face rule; writes
   ``face_filter`` (one row per image) and ``faces`` (every detected face, left to right);
3. runs the classifier (:mod:`corpus_audit.backends.classifiers`) on the images that passed, and
   writes ``labels``: ``p_female`` in [0, 1], the label at ``label.threshold``
   (``female`` / ``male`` / ``ambiguous``), the threshold and the classifier id;
4. with ``label.age`` / ``label.skin_tone`` on, writes ``perceived_age`` and ``skin_tone`` for
   the kept images, and a ``skin_tone`` row (image lightness only) for the images dropped for
   their faces (:mod:`corpus_audit.stages.label.attributes`); images filtered earlier that lack
   these rows are decoded again for them alone, without the detector or the classifier.

Each batch is written in one transaction, so a killed run loses at most the batch in flight
and a rerun continues where it stopped; nothing is written twice. Switching
``label.classifier`` later labels the kept images again under the new classifier id and
reuses the face filter results. Changing ``images.max_pixels`` later filters again the
images it concerns: those refused as too large that now fit, and those labelled before
that are now too large (``sql/label/pixel_limit.sql``).

One path whatever the engine (``stage_engine(study.config.engine, run)``): the batches are
the engine's work units; its ``prepare`` decodes a batch (:func:`decode_unit`: on the
``local`` engine in its ``engine.threads`` threads, ahead of the models; on Ray as CPU
tasks), a labeller (:func:`labeller_spec`: a
:class:`~corpus_audit.backends.engines.models.ModelSpec` of :class:`Labeller`, the detector
and classifier loaded once per worker, ``engine.gpus_per_worker`` GPUs each on Ray) runs
:func:`process_batch` on it, and the driver writes each batch's rows with
:func:`write_batch`, in batch order, one transaction each. The models are loaded by the
workers only (a model that cannot load fails the map before any batch is written); the
run's provenance is what the workers report with their results, and the engine's
``describe()``. On Ray the image paths must be readable by the workers (the study directory
and image sources on a file system every node mounts at the same path).
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.backends.attribute_worker import AttributeJob, AttributeModels
from corpus_audit.backends.classifiers import build_classifier, classifier_id, decide
from corpus_audit.backends.engines import model_actors
from corpus_audit.backends.engines.base import Progress
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.backends.faces import (
    Face,
    FaceResult,
    FaceRule,
    face_filter,
    face_model_setting,
    get_face_detector,
)
from corpus_audit.core.config import LabelSection, derived_from
from corpus_audit.core.imagefile import (
    DECODE_MAX_SIDE,
    DecodeBudget,
    Decoded,
    UnreadableImage,
    decode,
    large_pillow_blocks,
    study_image_path,
)
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, clear_tables, delete_keys, dicts, execute_sql
from corpus_audit.stages.label.attributes import (
    ATTRIBUTE_TABLES,
    DROPPED_REASONS,
    AttributeSettings,
    attribute_notes,
    attribute_summary,
    prepare_attributes,
    write_rows,
)


@dataclass
class Pending:
    """One image the stage still has to work on."""

    image_id: str
    path: str
    filtered: bool  # face_filter row exists (only the label is missing)
    kept_face: int | None
    # the kept face stored when it was filtered: x, y, w, h, score, image_width (None: none)
    stored_face: tuple | None = None
    # a label of the classifier is stored (the face filter runs again after a filter setting
    # changed; the label of an image kept again is reused)
    labelled: bool = False
    # lacks its perceived_age / skin_tone row (always False when that attribute is off)
    needs_age: bool = False
    needs_skin: bool = False
    reason: str | None = None  # the stored face filter reason (None: kept or not filtered)


@derived_from(LabelSection, "threshold", "min_face_fraction", "count_small_faces")
class FilterSettings:
    """The ``[label]`` settings :func:`process_batch` applies, derived from their
    declarations (``FilterSettings.from_config(section)`` reads a ``[label]`` section)."""


@dataclass
class BatchResult:
    """What one batch writes, and ``models``: the provenance of the worker's models
    (:meth:`Labeller.models`; empty when :func:`process_batch` built it)."""

    filter_rows: list[tuple]
    face_rows: list[tuple]
    label_rows: list[tuple]
    reasons: Counter
    models: dict[str, Any] = field(default_factory=dict)
    age_rows: list[tuple] = field(default_factory=list)  # perceived_age
    skin_rows: list[tuple] = field(default_factory=list)  # skin_tone


def pending_images(study: Study, cid: str, attrs: AttributeSettings | None = None) -> list[Pending]:
    """Images without a face-filter row, kept but without a label from ``cid``, or lacking
    the attribute rows ``attrs`` asks for (default: the study's ``[label]`` settings)."""
    attrs = attrs if attrs is not None else AttributeSettings.from_config(study.config.label)
    params = {"classifier": cid, **attrs.query_params()}
    rows = study.sql("label/pending", **params).fetchall()
    return [
        Pending(
            r[0],
            r[1],
            bool(r[2]),
            r[3],
            tuple(r[4:10]) if r[4] is not None else None,
            bool(r[10]),
            bool(r[11]),
            bool(r[12]),
            r[13],
        )
        for r in rows
    ]


def _chunks(items: Sequence[Pending], size: int) -> Iterator[Sequence[Pending]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def forget_pixel_limit_changes(study: Study) -> int:
    """Remove the face filter rows, faces and labels of the images ``sql/label/pixel_limit.sql``
    finds for the current ``images.max_pixels`` (one transaction); returns how many."""
    params = {"max_pixels": int(study.config.images.max_pixels)}
    ids = [r[0] for r in study.sql("label/pixel_limit", **params).fetchall()]
    if ids:
        with study.transaction() as con:
            for table in ("labels", "faces", "face_filter", *ATTRIBUTE_TABLES):
                delete_keys(con, table, "image_id", ids)
    return len(ids)


_BUDGETS: dict[int, DecodeBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def shared_budget(max_pixels: int) -> DecodeBudget:
    """This process's decode budget of ``max_pixels`` (>= 1) full-size pixels, shared by every
    decode that asks for it (the local engine's ``prepare`` threads decode under one budget,
    as one decoder pool would)."""
    with _BUDGETS_LOCK:
        budget = _BUDGETS.get(max_pixels)
        if budget is None:
            budget = _BUDGETS[max_pixels] = DecodeBudget(max_pixels)
        return budget


def _decode_batch(
    paths: Sequence[Path], budget: DecodeBudget
) -> list[tuple[Decoded | None, str | None]]:
    """Each image decoded (or the detail of why not), in order, one after the other."""
    out: list[tuple[Decoded | None, str | None]] = []
    for path in paths:
        try:
            image = decode(path, max_pixels=budget.pixels, max_side=DECODE_MAX_SIDE, budget=budget)
            out.append((image, None))
        except UnreadableImage as exc:
            out.append((None, exc.detail))
    return out


def _scaled(face: Face, factor: float) -> Face:
    """The face box with its coordinates multiplied by ``factor``."""
    if factor == 1.0:
        return face
    return Face(face.x * factor, face.y * factor, face.w * factor, face.h * factor, face.score)


def _stored_face(item: Pending, image: Decoded) -> Face | None:
    """The kept face of an image filtered earlier, in the pixels of ``image``'s array."""
    row = item.stored_face
    if item.kept_face is None or not row:
        return None
    face = Face(*map(float, row[:5]))
    stored_width = int(row[5] or image.width)
    return _scaled(face, image.array.shape[1] / stored_width)


def process_batch(
    cfg: FilterSettings,
    batch: Sequence[Pending],
    decoded: list[tuple[Decoded | None, str | None]],
    detector: Any,
    classifier: Any,
    cid: str,
    attrs: AttributeModels | None = None,
) -> BatchResult:
    """Face filter + classifier (+ the attributes, when ``attrs`` is given) for one decoded
    batch (no database writes; the one path of the local loop and the engine's workers)."""
    out = BatchResult([], [], [], Counter())
    to_classify: list[tuple[str, np.ndarray, Face | None]] = []
    jobs: list[AttributeJob] = []
    for item, (image, detail) in zip(batch, decoded, strict=True):
        if item.filtered:  # only the label or the attributes are missing
            if image is None:
                out.reasons["unreadable_now"] += 1
                continue
            face = _stored_face(item, image)
            if face is not None and not item.labelled:
                to_classify.append((item.image_id, image.array, face))
            _add_job(jobs, item, image.array, face, item.reason)
            continue
        if image is None:
            out.filter_rows.append(
                (item.image_id, detector.name, None, False, "unreadable", None, None, None, detail)
            )
            out.reasons["unreadable"] += 1
            continue
        kept = _filter_image(cfg, item.image_id, image, detector, out)
        face = kept[2] if kept is not None else None
        _add_job(jobs, item, image.array, face, None if kept else out.filter_rows[-1][4])
        if kept is not None and not item.labelled:
            to_classify.append(kept)
    # the attributes run in the worker's two helper threads while the classifier runs here
    pending_rows = attrs.submit(jobs) if attrs is not None and jobs else None
    _classify(out, to_classify, classifier, cid, cfg.threshold)
    if pending_rows is not None:
        out.age_rows, out.skin_rows = (f.result() for f in pending_rows)
    return out


def _classify(
    out: BatchResult,
    to_classify: list[tuple[str, np.ndarray, Face | None]],
    classifier: Any,
    cid: str,
    threshold: float,
) -> None:
    """The classifier's label rows of the kept images, added to ``out``."""
    if to_classify:
        probs = classifier.p_female([a for _, a, _ in to_classify], [f for _, _, f in to_classify])
        # the classifier's values are checked where they come back (CheckedClassifier:
        # finite, in [0, 1], one per image); NaN never reaches min / max here
        for (image_id, _, _), p in zip(to_classify, probs, strict=True):
            p = float(min(1.0, max(0.0, p)))
            out.label_rows.append((image_id, cid, p, decide(p, threshold), threshold))


def _add_job(
    jobs: list[AttributeJob],
    item: Pending,
    array: np.ndarray,
    face: Face | None,
    reason: str | None,
) -> None:
    """Queue the attribute rows ``item`` lacks: age and skin of a kept face, or the
    image-lightness skin row of an image dropped for its faces (:data:`DROPPED_REASONS`)."""
    if face is None:
        if item.needs_skin and reason in DROPPED_REASONS:
            jobs.append(AttributeJob(item.image_id, array, None, False, True, reason))
        return
    if item.needs_age or item.needs_skin:
        jobs.append(AttributeJob(item.image_id, array, face, item.needs_age, item.needs_skin))


def _filter_image(
    cfg: FilterSettings, image_id: str, image: Decoded, detector: Any, out: BatchResult
) -> tuple[str, np.ndarray, Face | None] | None:
    """Run the face filter on one decoded image: add its ``face_filter`` and ``faces`` rows
    (and a drop reason) to ``out``; returns what to classify when the image is kept."""
    array = image.array
    height, width = array.shape[:2]
    # the one-face rule works on fractions of the size: the same at any decoded size
    result: FaceResult = face_filter(detector.detect(array), width, height, FaceRule.of(cfg))
    out.filter_rows.append(
        (
            image_id,
            detector.name,
            len(result.faces),
            result.kept,
            result.reason,
            result.kept_face,
            image.width,
            image.height,
            None,
        )
    )
    for index, f in enumerate(result.faces):
        g = _scaled(f, 1.0 / image.scale)  # stored in the pixels of the whole image
        out.face_rows.append(
            (image_id, index, g.x, g.y, g.w, g.h, g.score, image.width, image.height)
        )
    if result.kept:
        return (image_id, array, result.face)
    out.reasons[result.reason or "dropped"] += 1
    return None


def write_batch(study: Study, result: BatchResult) -> None:
    """One transaction per batch: face_filter + faces + labels + perceived_age + skin_tone."""
    with study.transaction() as con:
        if result.filter_rows:
            con.executemany(
                "INSERT INTO face_filter (image_id, detector, n_faces, kept, reason, kept_face, "
                "image_width, image_height, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                result.filter_rows,
            )
        if result.face_rows:
            con.executemany(
                "INSERT INTO faces (image_id, face_index, x, y, w, h, score, image_width, "
                "image_height) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                result.face_rows,
            )
        if result.label_rows:
            con.executemany(
                "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
                "VALUES (?, ?, ?, ?, ?)",
                result.label_rows,
            )
        write_rows(con, result.age_rows, result.skin_rows)


@stage_body("label")
def label(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Face filter + perceived-gender labels for all images not yet labelled (resumable)."""
    cfg = study.config.label
    if study.count("images") == 0:
        return run.skip(f"no images yet ({_image_commands(study)})")
    cid = classifier_id(cfg)
    run.provenance["filter_settings"] = filter_settings(cfg)
    run.messages += forget_filter_changes(study, study.last_run("label"))
    refiltered = forget_pixel_limit_changes(study)
    if refiltered:
        run.messages.append(
            f"images.max_pixels changed: {refiltered} images are filtered again (refused as "
            "too large before and within the limit now, or over the limit now)"
        )
    relabelled = relabel_at_threshold(study, cid, float(cfg.threshold))
    if relabelled.total:
        run.messages.append(relabelled.message(cid, float(cfg.threshold)))
        if study.config.analysis.threshold:  # the analysis relabels at its own threshold
            run.messages.append(
                f"analysis.threshold = {study.config.analysis.threshold:g} relabels from "
                "p_female for the analysis: this label.threshold does not change analyze's "
                "counts (set analysis.threshold = 0 to use these labels)"
            )
    attrs = AttributeSettings.from_config(cfg)
    run.messages += prepare_attributes(study, run, attrs)
    pending = pending_images(study, cid, attrs)
    run.messages += attribute_notes(pending)
    run.rows_in = len(pending) + relabelled.total
    run.rows_out = relabelled.total
    if not pending:
        run.skipped = not relabelled.total
        run.summary = _summary(study, cid)
        if relabelled.total:
            run.provenance["threshold"] = cfg.threshold
        return run
    reasons, models = _label_batches(study, run, pending, cid, progress=progress)
    _record(study, run, cid, models, reasons)
    run.messages += attribute_summary(study, attrs)
    return run


# -- settings changed since the stored results ----------------------------------------------------

# The [label] settings the face filter results depend on: a change filters every image again.
FILTER_KEYS = (
    "face_detector",
    "face_model",
    "min_detection_confidence",
    "min_face_fraction",
    "count_small_faces",
)


def filter_settings(cfg: Any) -> dict[str, Any]:
    """The face filter's settings of ``cfg`` (a :class:`LabelSection`), as recorded in a run's
    provenance, plus ``crop_to_face`` (the classifier's input depends on the kept face)."""
    return {key: getattr(cfg, key) for key in (*FILTER_KEYS, "crop_to_face")}


def forget_filter_changes(study: Study, last: dict[str, Any] | None) -> list[str]:
    """When a face filter setting differs from the one ``last`` (the latest finished run)
    recorded, remove every ``face_filter`` and ``faces`` row (one transaction) so this run
    filters every image again; the labels of images kept again are reused unless
    ``crop_to_face`` is on or changed (the classifier saw the face crop), then they go too.
    Returns the notes to print (none when nothing changed or nothing was stored)."""
    before = (last or {}).get("provenance", {}).get("filter_settings")
    now = filter_settings(study.config.label)
    if not before or not study.count("face_filter"):
        return []
    changed = [k for k in now if k in before and before[k] != now[k]]
    if not changed:
        return []
    filter_changed = [k for k in changed if k in FILTER_KEYS]
    crops = now["crop_to_face"] or "crop_to_face" in changed
    tables = ["labels"] if crops else []
    if filter_changed:
        tables += ["faces", "face_filter", *ATTRIBUTE_TABLES]
    n = study.count("face_filter")
    with study.transaction() as con:
        clear_tables(con, *tables)
    said = ", ".join(f"label.{k} {before[k]!r} -> {now[k]!r}" for k in changed)
    if filter_changed:
        what = f"the face filter runs again on all {n} images (the face detector runs)"
        if not crops:
            what += "; labels of images kept again are reused"
        else:
            what += " and every kept image is classified again (face crops)"
    else:
        what = "every kept image is classified again (the classifier's input changed)"
    return [f"{said}: {what}"]


@dataclass(frozen=True)
class Relabelled:
    """Labels of one classifier set again at a new threshold: ``total`` rows whose threshold
    changed, ``changed`` of them with a different label."""

    total: int
    changed: int

    def message(self, cid: str, threshold: float) -> str:
        return (
            f"label.threshold changed: {self.total} labels of {cid} set again at threshold "
            f"{threshold} from the stored p_female (no model run); {self.changed} changed label"
        )


def relabel_at_threshold(study: Study, cid: str, threshold: float) -> Relabelled:
    """Set the stored labels of classifier ``cid`` made at another threshold again at
    ``threshold`` (in [0.5, 1]) from their ``p_female``, in one transaction: no model runs."""
    params = {"classifier": cid, "threshold": threshold}
    total, changed = study.sql("label/relabel_count", **params).fetchone()
    if total:
        with study.transaction() as con:
            execute_sql(con, "label/relabel", **params)
    return Relabelled(int(total), int(changed))


# -- the batches as engine work -------------------------------------------------------------------


@dataclass(frozen=True)
class LabelUnit:
    """One batch as a work unit: the pending images and their absolute paths."""

    batch: tuple[Pending, ...]
    paths: tuple[str, ...]


def decode_unit(unit: LabelUnit, *, max_pixels: int) -> tuple[LabelUnit, list]:
    """The engine's ``prepare``: the batch decoded, one image after the other, under this
    process's budget of ``max_pixels`` full-size pixels (:func:`shared_budget`)."""
    with large_pillow_blocks():
        decoded = _decode_batch([Path(p) for p in unit.paths], shared_budget(max_pixels))
    return unit, decoded


class Labeller:
    """The label worker's model (what :func:`labeller_spec` loads once per worker): the
    classifier, loaded at once (its id must be ``cid``), and the face detector, loaded on the
    first batch that needs it. ``label`` is the ``[label]`` section (a plain dataclass);
    ``device`` is resolved here (``auto``: the GPU the engine gave the worker, if any)."""

    def __init__(self, label: Any, device: str, seed: int, cid: str) -> None:
        self.label, self.cid = label, cid
        self.settings = FilterSettings.from_config(label)
        self.classifier = build_classifier(label, device=device, seed=seed)
        if self.classifier.id != cid:  # the id is computed twice; they must agree
            self.close()
            raise RuntimeError(f"classifier id mismatch: {self.classifier.id} != {cid}")
        self.detector: Any = None
        attrs = AttributeSettings.from_config(label)
        # the perceived age and skin tone models, loaded on the first batch that needs them
        self.attributes = (
            AttributeModels(attrs.min_pixels, age_precision=attrs.age_precision)
            if attrs.on
            else None
        )

    def __call__(self, prepared: tuple[LabelUnit, list]) -> BatchResult:
        unit, decoded = prepared
        if self.detector is None and any(not p.filtered for p in unit.batch):
            cfg = self.label
            self.detector = get_face_detector(
                cfg.face_detector,
                face_model=face_model_setting(cfg.face_model, cfg.model_dir),
                min_detection_confidence=cfg.min_detection_confidence,
            )
        result = process_batch(
            self.settings,
            unit.batch,
            decoded,
            self.detector,
            self.classifier,
            self.cid,
            self.attributes,
        )
        result.models = self.models()
        return result

    def models(self) -> dict[str, Any]:
        """Provenance of the loaded models: ``classifier``, and ``detector`` and
        ``detector_name`` (None while no detector was needed), ``age_model`` and
        ``skin_method`` (None while not needed)."""
        detector = self.detector
        attributes = self.attributes.provenance() if self.attributes is not None else {}
        return {
            "classifier": getattr(self.classifier, "provenance", {"classifier": self.cid}),
            "detector": getattr(detector, "provenance", None),
            "detector_name": detector.name if detector is not None else None,
            **attributes,
        }

    def close(self) -> None:
        """Close the detector and the classifier (the one place the models are closed)."""
        detector, self.detector = getattr(self, "detector", None), None
        if detector is not None:
            detector.close()
        attributes, self.attributes = getattr(self, "attributes", None), None
        if attributes is not None:
            attributes.close()
        close = getattr(self.classifier, "close", None)
        if close is not None:
            close()


def labeller_spec(label: Any, device: str, seed: int, cid: str) -> ModelSpec:
    """The label workers' recipe (picklable): a :class:`Labeller` per worker."""
    return ModelSpec(Labeller, (label, device, seed, cid))


def _label_batches(
    study: Study, run: StageRun, pending: Sequence[Pending], cid: str, *, progress: bool
) -> tuple[Counter, dict[str, Any]]:
    """Every batch decoded, filtered and classified on the study's engine and written here, in
    batch order, one transaction each. Returns the drop reasons and the models' provenance."""
    cfg = study.config.label
    eng = study.config.engine
    spec = labeller_spec(cfg, eng.device, int(study.config.study.seed), cid)
    units = [
        (
            i,
            LabelUnit(
                tuple(batch), tuple(str(study_image_path(study.root, p.path)) for p in batch)
            ),
        )
        for i, batch in enumerate(_chunks(pending, cfg.batch_size))
    ]
    prepare = functools.partial(decode_unit, max_pixels=int(study.config.images.max_pixels))
    reasons: Counter = Counter()
    models: dict[str, Any] = {}
    bar = Progress("label", unit="batch", enabled=progress)
    # the local engine decodes in this process: large Pillow blocks for all its threads
    with (
        large_pillow_blocks(),
        model_actors(eng, "label", spec, units, run=run, progress=bar, prepare=prepare) as results,
    ):
        for _, result in results:
            write_batch(study, result)
            reasons.update(result.reasons)
            run.rows_out += len(result.label_rows)
            for key, value in result.models.items():
                if value is not None:
                    models[key] = value
    return reasons, models


def _record(
    study: Study, run: StageRun, cid: str, models: dict[str, Any], reasons: Counter
) -> None:
    """Drop reasons, summary, provenance and notes of a run that labelled images; ``models``
    is what the workers reported (:meth:`Labeller.models`)."""
    cfg = study.config.label
    for reason, n in sorted(reasons.items()):
        run.drop(reason, n)
    detector = models.get("detector_name")
    other = study.con.execute(
        "SELECT DISTINCT detector FROM face_filter WHERE detector <> ?", [detector or ""]
    ).fetchall()
    if detector is not None and other:
        run.messages.append(
            "face_filter also holds results of "
            + ", ".join(r[0] for r in other)
            + " (kept; delete those rows to filter again with "
            + detector
            + ")"
        )
    run.summary = _summary(study, cid)
    run.provenance.update(
        {
            "classifier": models.get("classifier", {"classifier": cid}),
            "detector": models.get("detector"),
            "threshold": cfg.threshold,
            "min_face_fraction": cfg.min_face_fraction,
            "count_small_faces": cfg.count_small_faces,
            "batch_size": cfg.batch_size,
            "max_pixels": study.config.images.max_pixels,
            "decode_max_side": DECODE_MAX_SIDE,
        }
    )
    run.messages.append(
        f"labels of {cid} at threshold {cfg.threshold}; perceived binary gender is a "
        "limited construct (p_female is kept for other thresholds)"
    )


def _summary(study: Study, cid: str) -> list[dict[str, Any]]:
    """Per image source: images, kept by the face filter, and labels of ``cid`` by value."""
    rows = study.sql("label/summary", classifier=cid)
    return dicts(rows)


def _image_commands(study: Study) -> str:
    """What brings images into ``study``: the commands a skipped label run names."""
    if study_kind(study.config) == "images":
        return "import them with `import-images`, or run `generate`"
    return "run `images` and/or `generate`, or `import-images`, first"
