"""The label worker's perceived-attribute models: age and skin rows of a batch.

:class:`AttributeModels` holds, per label worker, the perceived-age estimator
(:class:`~corpus_audit.backends.attributes.AgeGenderAgeEstimator`) and the dlib landmarks
(:mod:`corpus_audit.backends.landmarks`), each loaded on first use, and two helper threads:
:meth:`AttributeModels.submit` computes a batch's ``perceived_age`` rows (the age model on
the kept faces, binned by :mod:`corpus_audit.methods.age_bins`) and its ``skin_tone`` rows
(:func:`corpus_audit.methods.skin_tone.measure_skin` on a kept face; the ``unmeasurable`` row
with the image's mean L* for an image the face filter dropped) while the worker's gender
classifier runs. ONNX Runtime, dlib and most of numpy release the GIL. Row tuples follow the
column order of sql/schema/009_label.sql.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from corpus_audit.backends.attributes import AgeGenderAgeEstimator
from corpus_audit.backends.landmarks import default_landmarker
from corpus_audit.methods.age_bins import estimate
from corpus_audit.methods.faces import Face
from corpus_audit.methods.skin_tone import METHOD as SKIN_METHOD
from corpus_audit.methods.skin_tone import SkinMeasurement, measure_skin, unmeasured_image


@dataclass
class AttributeJob:
    """One image the attribute step works on: ``face`` None for an image the filter dropped
    (``reason`` says why); ``age`` / ``skin``: which rows it lacks."""

    image_id: str
    array: np.ndarray
    face: Face | None
    age: bool
    skin: bool
    reason: str | None = None


class AttributeModels:
    """The attribute models of one label worker, loaded on first use."""

    def __init__(
        self, min_pixels: int, skin_method: str = SKIN_METHOD, age_precision: str = "int8"
    ) -> None:
        self.min_pixels, self.skin_method = min_pixels, skin_method
        self.age_precision = age_precision
        self._age: Any = None
        self._landmarks: Any = None
        self._pool: ThreadPoolExecutor | None = None

    def age_estimator(self) -> Any:
        if self._age is None:
            self._age = AgeGenderAgeEstimator(self.age_precision)
        return self._age

    def landmarker(self) -> Any:
        if self._landmarks is None:
            self._landmarks = default_landmarker()
        return self._landmarks

    def submit(self, jobs: list[AttributeJob]) -> tuple[Future, Future]:
        """Start the rows of ``jobs`` in this worker's two helper threads (age and skin at
        once, beside the caller's gender classifier): futures of the age rows and the skin
        rows. The kept faces' dlib landmarks are found once, in the first helper thread,
        and serve both the age chip and the skin region. ONNX Runtime, dlib and most of numpy
        release the GIL."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(2, thread_name_prefix="label-attributes")
        points = self._pool.submit(face_points, self, jobs)
        return (
            self._pool.submit(lambda: age_rows(self, jobs, points.result())),
            self._pool.submit(lambda: skin_rows(self, jobs, points.result())),
        )

    def provenance(self) -> dict[str, Any]:
        """The models that ran (None while none was needed)."""
        return {
            "age_model": getattr(self._age, "provenance", None),
            "skin_method": self.skin_method if self._landmarks is not None else None,
        }

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        age, self._age = self._age, None
        if age is not None:
            age.close()


def face_points(models: AttributeModels, jobs: list[AttributeJob]) -> dict[str, np.ndarray | None]:
    """dlib's 5 landmarks of every kept face a job needs a row for, by image id."""
    return {
        j.image_id: models.landmarker().landmarks(j.array, j.face)
        for j in jobs
        if j.face is not None and (j.age or j.skin)
    }


def age_rows(
    models: AttributeModels,
    jobs: list[AttributeJob],
    points: dict[str, np.ndarray | None] | None = None,
) -> list[tuple]:
    """``perceived_age`` rows of the jobs that lack one (kept faces only), batched;
    ``points``: the faces' landmarks found already (:func:`face_points`)."""
    todo = [j for j in jobs if j.age and j.face is not None]
    if not todo:
        return []
    est = models.age_estimator()
    found = points or {}
    probs = est.age_probs(
        [j.array for j in todo], [j.face for j in todo], [found.get(j.image_id) for j in todo]
    )
    rows = []
    for job, p in zip(todo, probs, strict=True):
        e = estimate(p, est.weights)
        rows.append(
            (job.image_id, est.id, e.expected_age, e.age_bin, e.age_group, e.minor)
            + (e.p_bins, e.probs)
        )
    return rows


def _skin_row(image_id: str, m: SkinMeasurement) -> tuple:
    return (
        image_id, m.method, m.status, m.reason, m.n_pixels, m.l_star, m.a_star,
        m.b_star, m.hue_deg, m.ita_deg, m.flags, m.image_l_star,
    )  # fmt: skip


def skin_rows(
    models: AttributeModels,
    jobs: list[AttributeJob],
    points: dict[str, np.ndarray | None] | None = None,
) -> list[tuple]:
    """``skin_tone`` rows of the jobs that lack one: measured on a kept face, or the
    ``unmeasurable`` row with the image's mean L* for an image the filter dropped;
    ``points``: the faces' landmarks found already (:func:`face_points`)."""
    rows = []
    for job in jobs:
        if not job.skin:
            continue
        if job.face is None:  # dropped by the face filter: the image's lightness and flags
            rows.append(
                _skin_row(
                    job.image_id,
                    unmeasured_image(job.array, job.reason or "", method=models.skin_method),
                )
            )
            continue
        if points is not None and job.image_id in points:
            found = points[job.image_id]
        else:
            found = models.landmarker().landmarks(job.array, job.face)
        m = measure_skin(
            job.array, job.face, found, min_pixels=models.min_pixels, method=models.skin_method
        )
        rows.append(_skin_row(job.image_id, m))
    return rows
