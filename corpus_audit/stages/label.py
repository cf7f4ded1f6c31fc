"""Stage ``label``: face filter + perceived-gender label for every image (METHODS 1.4).

For every row of ``images`` (training and generated alike) that has no ``face_filter`` row
yet, or that passed the face filter but has no label from the configured classifier, the
stage, batch by batch (``label.batch_size`` images):

1. decodes the file with :func:`corpus_audit.core.imagefile.decode` (``unreadable`` + detail
   when it fails; ``label.decode_workers`` threads decode the next batch while the models run).
   Images are decoded at most :data:`DECODE_MAX_SIDE` pixels on their long side (JPEGs by the
   decoder itself), and the decoders share a budget of ``images.max_pixels`` full-size pixels,
   so one worker's decode peaks near 4 bytes x ``images.max_pixels`` for a non-JPEG and at
   ~64 MiB for a JPEG (see docs/reliability.md). Face boxes are stored in the pixels of the
   whole image, whatever size it was decoded at;
2. runs the face detector (:mod:`corpus_audit.backends.faces`) and the one-face rule; writes
   ``face_filter`` (one row per image) and ``faces`` (every detected face, left to right);
3. runs the classifier (:mod:`corpus_audit.backends.classifiers`) on the images that passed, and
   writes ``labels``: ``p_female`` in [0, 1], the label at ``label.threshold``
   (``female`` / ``male`` / ``ambiguous``), the threshold and the classifier id.

Each batch is written in one transaction, so a killed run loses at most the batch in flight
and a rerun continues where it stopped; nothing is written twice. Switching
``label.classifier`` later labels the kept images again under the new classifier id and
reuses the face filter results. Changing ``images.max_pixels`` later filters again the
images it concerns: those refused as too large that now fit, and those labelled before
that are now too large (:data:`PIXEL_LIMIT_SQL`).

With ``engine.engine = "ray"`` the batches are the engine's work units: a CPU task decodes a
batch (:func:`decode_unit`, the engine's ``prepare``) and a labeller actor
(:class:`LabelerSpec` -> :class:`LabelWorker`: detector + classifier loaded once,
``engine.gpus_per_worker`` GPUs each) runs :func:`process_batch` on it, the function the
local loop runs; the driver writes each batch's rows with :func:`write_batch`, in batch order,
one transaction each. The image paths must be readable by the workers (the study directory
and image sources on a file system every node mounts at the same path).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.backends.classifiers import build_classifier, classifier_id, decide
from corpus_audit.backends.faces import Face, FaceResult, face_filter, get_face_detector
from corpus_audit.core.imagefile import (
    DecodeBudget,
    Decoded,
    UnreadableImage,
    decode,
    large_pillow_blocks,
)
from corpus_audit.core.store import StageRun, Study, dicts

# Long side, in pixels, images are decoded at for the face detector and the classifiers: the
# detector sees 192 px and the classifiers ~224 px, and a face kept by the 10 % rule is still
# >= 136 px at this size, while an 88-megapixel JPEG decodes in ~50 MB instead of ~1.2 GB.
# Images up to this size are decoded exactly as before.
DECODE_MAX_SIDE = 2048

PENDING_SQL = """
SELECT i.image_id, i.path, f.image_id IS NOT NULL AS filtered, f.kept_face,
       fa.x, fa.y, fa.w, fa.h, fa.score, fa.image_width
FROM images i
LEFT JOIN face_filter f USING (image_id)
LEFT JOIN labels l ON l.image_id = i.image_id AND l.classifier = ?
LEFT JOIN faces fa ON fa.image_id = i.image_id AND fa.face_index = f.kept_face
WHERE f.image_id IS NULL OR (f.kept AND l.image_id IS NULL)
ORDER BY i.image_id
"""


@dataclass
class Pending:
    """One image the stage still has to work on."""

    image_id: str
    path: str
    filtered: bool  # face_filter row exists (only the label is missing)
    kept_face: int | None
    # the kept face stored when it was filtered: x, y, w, h, score, image_width (None: none)
    stored_face: tuple | None = None


@dataclass(frozen=True)
class FilterSettings:
    """The ``[label]`` settings :func:`process_batch` applies, as plain values."""

    threshold: float
    min_face_fraction: float
    count_small_faces: bool

    @classmethod
    def from_config(cls, cfg: Any) -> FilterSettings:
        return cls(cfg.threshold, cfg.min_face_fraction, cfg.count_small_faces)


# Images whose face filter result depends on images.max_pixels and no longer matches it:
# refused as too large (their pixel count is in the detail text) but within the limit now, or
# filtered before but over the limit now. Their rows go and they are filtered again.
PIXEL_LIMIT_SQL = """
SELECT image_id FROM face_filter
WHERE (reason = 'unreadable'
       AND TRY_CAST(regexp_extract(detail, '= ([0-9]+) > max_pixels', 1) AS BIGINT) <= $max_pixels)
   OR (image_width::BIGINT * image_height::BIGINT > $max_pixels)
"""


@dataclass
class BatchResult:
    """What one batch writes."""

    filter_rows: list[tuple]
    face_rows: list[tuple]
    label_rows: list[tuple]
    reasons: Counter


def resolve_image_path(study: Study, path: str) -> Path:
    """``images.path`` as a file path (relative paths are inside the study directory)."""
    from corpus_audit.core.imagefile import study_image_path

    return study_image_path(study.root, path)


def pending_images(study: Study, cid: str) -> list[Pending]:
    """Images without a face-filter row, or kept but without a label from ``cid``."""
    rows = study.con.execute(PENDING_SQL, [cid]).fetchall()
    return [
        Pending(r[0], r[1], bool(r[2]), r[3], tuple(r[4:10]) if r[4] is not None else None)
        for r in rows
    ]


def _chunks(items: Sequence[Pending], size: int) -> Iterator[Sequence[Pending]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def forget_pixel_limit_changes(study: Study) -> int:
    """Remove the face filter rows, faces and labels of the images :data:`PIXEL_LIMIT_SQL`
    finds for the current ``images.max_pixels`` (one transaction); returns how many."""
    params = {"max_pixels": int(study.config.images.max_pixels)}
    ids = [r[0] for r in study.con.execute(PIXEL_LIMIT_SQL, params).fetchall()]
    if ids:
        with study.transaction() as con:
            for table in ("labels", "faces", "face_filter"):
                con.execute(
                    f"DELETE FROM {table} WHERE image_id IN (SELECT unnest(?))",
                    [ids],
                )
    return len(ids)


def _decode_batch(
    paths: Sequence[Path],
    budget: DecodeBudget,
    pool: ThreadPoolExecutor | None,
) -> list[tuple[Decoded | None, str | None]]:
    """Each image decoded (or the detail of why not), in order."""
    max_pixels = budget.pixels

    def one(path: Path) -> tuple[Decoded | None, str | None]:
        try:
            return decode(
                path, max_pixels=max_pixels, max_side=DECODE_MAX_SIDE, budget=budget
            ), None
        except UnreadableImage as exc:
            return None, exc.detail

    return list(pool.map(one, paths)) if pool is not None else [one(p) for p in paths]


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
) -> BatchResult:
    """Face filter + classifier for one decoded batch (no database writes; the one path of
    the local loop and the engine's workers)."""
    out = BatchResult([], [], [], Counter())
    to_classify: list[tuple[str, np.ndarray, Face | None]] = []
    for item, (image, detail) in zip(batch, decoded, strict=True):
        if item.filtered:  # only the label is missing
            if image is None:
                out.reasons["unreadable_now"] += 1
                continue
            face = _stored_face(item, image)
            to_classify.append((item.image_id, image.array, face))
            continue
        if image is None:
            out.filter_rows.append(
                (item.image_id, detector.name, None, False, "unreadable", None, None, None, detail)
            )
            out.reasons["unreadable"] += 1
            continue
        kept = _filter_image(cfg, item.image_id, image, detector, out)
        if kept is not None:
            to_classify.append(kept)
    if to_classify:
        probs = classifier.p_female([a for _, a, _ in to_classify], [f for _, _, f in to_classify])
        for (image_id, _, _), p in zip(to_classify, probs, strict=True):
            p = float(min(1.0, max(0.0, p)))
            out.label_rows.append((image_id, cid, p, decide(p, cfg.threshold), cfg.threshold))
    return out


def _filter_image(
    cfg: FilterSettings, image_id: str, image: Decoded, detector: Any, out: BatchResult
) -> tuple[str, np.ndarray, Face | None] | None:
    """Run the face filter on one decoded image: add its ``face_filter`` and ``faces`` rows
    (and a drop reason) to ``out``; returns what to classify when the image is kept."""
    array = image.array
    height, width = array.shape[:2]
    # the one-face rule works on fractions of the size: the same at any decoded size
    result: FaceResult = face_filter(
        detector.detect(array),
        width,
        height,
        min_face_fraction=cfg.min_face_fraction,
        count_small_faces=cfg.count_small_faces,
    )
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
    """One transaction per batch: face_filter + faces + labels."""
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


def label(study: Study, *, progress: bool = True) -> StageRun:
    """Face filter + perceived-gender labels for all images not yet labelled (resumable)."""
    cfg = study.config.label
    with study.stage("label") as run:
        if study.count("images") == 0:
            return run.skip("no images yet (run `images` and/or `generate` first)")
        cid = classifier_id(cfg)
        refiltered = forget_pixel_limit_changes(study)
        if refiltered:
            run.messages.append(
                f"images.max_pixels changed: {refiltered} images are filtered again (refused as "
                "too large before and within the limit now, or over the limit now)"
            )
        pending = pending_images(study, cid)
        run.rows_in = len(pending)
        if not pending:
            run.skipped = True
            run.summary = _summary(study, cid)
            return run
        classifier, detector = _open_models(study, cid, pending)
        label_batches = (
            _label_pending if study.config.engine.engine == "local" else _label_on_engine
        )
        reasons = label_batches(study, run, pending, detector, classifier, cid, progress=progress)
        _record(study, run, cid, classifier, detector, reasons)
    return run


def _open_models(study: Study, cid: str, pending: Sequence[Pending]) -> tuple[Any, Any]:
    """The classifier (first: a model that cannot load fails before anything else starts) and,
    when some image still needs the face filter, the face detector (else None)."""
    cfg = study.config.label
    classifier = build_classifier(
        cfg, device=study.config.engine.device, seed=study.config.study.seed
    )
    if classifier.id != cid:  # the id is computed twice; they must agree
        raise RuntimeError(f"classifier id mismatch: {classifier.id} != {cid}")
    detector = None
    if any(not p.filtered for p in pending):
        try:
            detector = get_face_detector(
                cfg.face_detector,
                face_model=cfg.face_model,
                min_detection_confidence=cfg.min_detection_confidence,
            )
        except BaseException:
            getattr(classifier, "close", lambda: None)()
            raise
    return classifier, detector


def _label_pending(
    study: Study,
    run: StageRun,
    pending: Sequence[Pending],
    detector: Any,
    classifier: Any,
    cid: str,
    *,
    progress: bool,
) -> Counter:
    """Decode (the next batch while this one is processed), filter, classify and write each
    batch in its own transaction; closes the models at the end. Returns the drop reasons."""
    from tqdm.auto import tqdm

    cfg = study.config.label
    pool = ThreadPoolExecutor(cfg.decode_workers) if cfg.decode_workers > 1 else None
    prefetch = ThreadPoolExecutor(1)
    bar = tqdm(total=len(pending), desc="label", unit="img", disable=not progress)
    reasons: Counter = Counter()
    memory = contextlib.ExitStack()  # closed in the finally below
    memory.enter_context(large_pillow_blocks())
    try:
        budget = DecodeBudget(study.config.images.max_pixels)
        batches = list(_chunks(pending, cfg.batch_size))
        settings = FilterSettings.from_config(cfg)

        def paths(batch: Sequence[Pending]) -> list[Path]:
            return [resolve_image_path(study, p.path) for p in batch]

        future: Future | None = (
            prefetch.submit(_decode_batch, paths(batches[0]), budget, pool) if batches else None
        )
        for i, batch in enumerate(batches):
            assert future is not None
            decoded = future.result()
            future = (
                prefetch.submit(_decode_batch, paths(batches[i + 1]), budget, pool)
                if i + 1 < len(batches)
                else None
            )
            result = process_batch(settings, batch, decoded, detector, classifier, cid)
            write_batch(study, result)
            reasons.update(result.reasons)
            run.rows_out += len(result.label_rows)
            bar.update(len(batch))
    finally:
        bar.close()
        prefetch.shutdown(wait=True, cancel_futures=True)
        memory.close()
        if pool is not None:
            pool.shutdown(wait=True)
        if detector is not None:
            detector.close()
        close = getattr(classifier, "close", None)
        if close is not None:
            close()
    return reasons


# -- the batches as engine work -------------------------------------------------------------------


@dataclass(frozen=True)
class LabelUnit:
    """One batch as a work unit: the pending images and their absolute paths."""

    batch: tuple[Pending, ...]
    paths: tuple[str, ...]


def decode_unit(unit: LabelUnit, *, max_pixels: int) -> tuple[LabelUnit, list]:
    """The engine's ``prepare`` (a CPU task): the batch decoded, as the local loop decodes it
    (one decode at a time under a budget of ``max_pixels``)."""
    with large_pillow_blocks():
        decoded = _decode_batch([Path(p) for p in unit.paths], DecodeBudget(max_pixels), None)
    return unit, decoded


@dataclass(frozen=True)
class LabelerSpec:
    """The labeller's recipe (picklable): the ``[label]`` section, the device (resolved in
    the worker: ``auto`` uses the GPU Ray gave the actor, if any), the seed, the classifier
    id the driver expects. ``LabelerSpec(...)()`` builds a :class:`LabelWorker`."""

    label: Any  # LabelSection (a plain dataclass)
    device: str
    seed: int
    cid: str

    def __call__(self) -> LabelWorker:
        return LabelWorker(self)


class LabelWorker:
    """Face detector (loaded on the first batch that needs it) and classifier, loaded once."""

    def __init__(self, spec: LabelerSpec) -> None:
        self.spec = spec
        self.settings = FilterSettings.from_config(spec.label)
        self.classifier = build_classifier(spec.label, device=spec.device, seed=spec.seed)
        if self.classifier.id != spec.cid:
            raise RuntimeError(f"classifier id mismatch: {self.classifier.id} != {spec.cid}")
        self.detector: Any = None

    def __call__(self, prepared: tuple[LabelUnit, list]) -> BatchResult:
        unit, decoded = prepared
        if self.detector is None and any(not p.filtered for p in unit.batch):
            cfg = self.spec.label
            self.detector = get_face_detector(
                cfg.face_detector,
                face_model=cfg.face_model,
                min_detection_confidence=cfg.min_detection_confidence,
            )
        return process_batch(
            self.settings, unit.batch, decoded, self.detector, self.classifier, self.spec.cid
        )

    def close(self) -> None:
        if self.detector is not None:
            self.detector.close()
        close = getattr(self.classifier, "close", None)
        if close is not None:
            close()


def _label_on_engine(
    study: Study,
    run: StageRun,
    pending: Sequence[Pending],
    detector: Any,
    classifier: Any,
    cid: str,
    *,
    progress: bool,
) -> Counter:
    """The batches decoded by CPU tasks and labelled by the engine's labeller actors; each
    batch written here, in batch order, in its own transaction. The driver's models (loaded
    by :func:`_open_models` so a model that cannot load fails before any work) are closed."""
    from corpus_audit.backends.engines import engine_from_config
    from corpus_audit.backends.engines.base import Progress as EngineProgress
    from corpus_audit.backends.engines.base import Resources

    if detector is not None:
        detector.close()
    getattr(classifier, "close", lambda: None)()
    cfg = study.config.label
    eng = study.config.engine
    spec = LabelerSpec(cfg, eng.device, int(study.config.study.seed), cid)
    units = [
        (
            i,
            LabelUnit(tuple(batch), tuple(str(resolve_image_path(study, p.path)) for p in batch)),
        )
        for i, batch in enumerate(_chunks(pending, cfg.batch_size))
    ]
    prepare = functools.partial(decode_unit, max_pixels=int(study.config.images.max_pixels))
    reasons: Counter = Counter()
    with engine_from_config(eng) as engine:
        run.provenance["engine"] = engine.describe()
        results = engine.map_actors(
            spec,
            units,
            resources=Resources(num_cpus=1, num_gpus=eng.gpus_per_worker),
            workers=eng.workers_for("label"),
            prepare=prepare,
            progress=EngineProgress("label", unit="batch", enabled=progress),
        )
        for _, result in results:
            write_batch(study, result)
            reasons.update(result.reasons)
            run.rows_out += len(result.label_rows)
    return reasons


def _record(
    study: Study, run: StageRun, cid: str, classifier: Any, detector: Any, reasons: Counter
) -> None:
    """Drop reasons, summary, provenance and notes of a run that labelled images."""
    cfg = study.config.label
    for reason, n in sorted(reasons.items()):
        run.drop(reason, n)
    other = study.con.execute(
        "SELECT DISTINCT detector FROM face_filter WHERE detector <> ?",
        [detector.name if detector else ""],
    ).fetchall()
    if detector is not None and other:
        run.messages.append(
            "face_filter also holds results of "
            + ", ".join(r[0] for r in other)
            + " (kept; delete those rows to filter again with "
            + detector.name
            + ")"
        )
    run.summary = _summary(study, cid)
    run.provenance.update(
        {
            "classifier": getattr(classifier, "provenance", {"classifier": cid}),
            "detector": getattr(detector, "provenance", None),
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
