"""The recaption batches as engine work: caption actors load the model once and serve batches.

:func:`recaption_on_engine` is :func:`corpus_audit.stages.recaption.driver.recaption` on an
:class:`~corpus_audit.backends.engines.base.Engine`: the same pending batches (the keys in
``done`` and repeated keys left out, ``batch_size`` items a batch, in input order) become the
engine's work units, keyed by batch number. For an image captioner a CPU task decodes each
batch (:func:`decode_unit`, the engine's ``prepare``: :func:`~corpus_audit.stages.recaption.driver.decode_items`,
the local loop's decoder under the same ``max_pixels``); a caption actor
(:class:`CaptionerSpec` -> :class:`CaptionWorker`, the captioner loaded once per actor) turns
the decoded batch into its rows with :func:`~corpus_audit.stages.recaption.driver.caption_rows`,
the function the local loop runs. A text-rewrite captioner (``paraphrase:``) needs no
decoding: its batches travel as the items the model reads.

The driver hands each batch's rows to ``sink`` in batch order (the engine yields results in
the order the units were given), so the sink's contract is the local loop's: one
transaction per batch, a rerun with the written keys in ``done`` continues where a killed run
stopped, and the table equals a local run's. A unit redone after a dead actor replaces its
lost attempt: each batch reaches the sink once.

The workers resolve ``CaptionSettings.device`` themselves (``auto``: the GPU Ray gave the
actor, if any) and refuse to caption when their captioner's fingerprint differs from the one
the driver checked the variant with (another dtype on another device would mix settings in
one variant): the caller plans ``dtype`` for the workers' device (:func:`worker_settings`).
The image paths must be readable by the workers (a file system every node mounts at the same
path).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from corpus_audit.backends.captioners import (
    CAPTIONERS,
    CaptionInput,
    CaptionSettings,
    load_captioner,
)
from corpus_audit.backends.engines.base import Engine, Progress, Resources
from corpus_audit.core.errors import ModelError
from corpus_audit.core.imagefile import DEFAULT_MAX_PIXELS
from corpus_audit.core.specs import split_spec
from corpus_audit.stages.recaption.driver import (
    RecaptionSummary,
    Resolved,
    Sink,
    caption_rows,
    decode_items,
    pending_batches,
    resolve_texts,
    write_rows,
)


def worker_settings(
    model: str, settings: CaptionSettings, gpus_per_worker: float
) -> CaptionSettings:
    """``settings`` as the caption workers of ``model`` (a ``recaption.model`` spec) use them.

    An image captioner's ``dtype = "auto"`` is named for the workers' device: ``float16`` when
    it is CUDA (``settings.device`` names it, or is ``auto`` with ``gpus_per_worker`` > 0 GPUs
    per actor), else ``float32``, so the driver, loading its captioner with these settings on
    its own device, gets the workers' fingerprint. Other settings (and the text rewrite,
    which has no dtype) are kept as they are.
    """
    backend, _ = split_spec(model.strip(), CAPTIONERS, "transformers", empty_model=True)
    if settings.dtype != "auto" or getattr(CAPTIONERS.get(backend), "kind", "") != "image":
        return settings
    device = settings.device
    on_cuda = device.startswith("cuda") or (device == "auto" and gpus_per_worker > 0)
    return replace(settings, dtype="float16" if on_cuda else "float32")


@dataclass(frozen=True)
class CaptionUnit:
    """One batch of image items as a work unit (paths, not pixels) and the decoder's pixel
    budget (>= 1 pixels per image)."""

    items: tuple[CaptionInput, ...]
    max_pixels: int


def decode_unit(unit: CaptionUnit) -> list[Resolved]:
    """The engine's ``prepare`` (a CPU task): the batch decoded as the local loop decodes it."""
    return decode_items(unit.items, unit.max_pixels)


@dataclass(frozen=True)
class CaptionedBatch:
    """What a caption worker returns per batch: the rows (:data:`RECAPTION_COLUMNS` dicts,
    in input order), the seconds spent in the model, and the device the worker ran on."""

    rows: list[dict[str, Any]]
    model_seconds: float
    device: str


@dataclass(frozen=True)
class CaptionerSpec:
    """The captioner's recipe (picklable): the ``recaption.model`` spec, its
    :class:`CaptionSettings` (device resolved in the worker: ``auto`` uses the GPU Ray gave
    the actor, if any) and the fingerprint the driver expects (16 hex digits).
    ``CaptionerSpec(...)()`` builds a :class:`CaptionWorker`."""

    model: str
    settings: CaptionSettings
    fingerprint: str

    def __call__(self) -> CaptionWorker:
        return CaptionWorker(self)


class CaptionWorker:
    """One loaded captioner serving resolved batches (``(item, skip_reason, detail)`` each)."""

    def __init__(self, spec: CaptionerSpec) -> None:
        self.captioner = load_captioner(spec.model, spec.settings)
        got = self.captioner.fingerprint
        if got != spec.fingerprint:
            self.captioner.close()
            raise ModelError(
                f"recaption: the worker's captioner has settings fingerprint {got}, the driver "
                f"checked the variant with {spec.fingerprint} (set recaption.dtype explicitly)"
            )
        self.device = _device(self.captioner, spec.settings.device)

    def __call__(self, resolved: Sequence[Resolved]) -> CaptionedBatch:
        rows, seconds = caption_rows(self.captioner, resolved)
        return CaptionedBatch(rows, seconds, self.device)

    def close(self) -> None:
        self.captioner.close()


def _device(captioner: Any, configured: str) -> str:
    """The device a loaded captioner runs on (an image model's, or the text rewrite's
    paraphraser's), else the configured one."""
    device = getattr(captioner, "device", None)
    if device is None:
        paraphraser = getattr(captioner, "paraphraser", None)
        device = getattr(paraphraser, "device", None)
    return str(device or configured)


def recaption_on_engine(
    engine: Engine,
    factory: Callable[[], Any],
    items: Iterable[CaptionInput],
    *,
    kind: str,
    sink: Sink,
    batch_size: int,
    done: Container[Any] = frozenset(),
    max_pixels: int = DEFAULT_MAX_PIXELS,
    resources: Resources | None = None,
    workers: int = 0,
    settings: dict[str, Any] | None = None,
    progress: bool = False,
) -> RecaptionSummary:
    """Caption every item whose key is not in ``done`` on ``engine``'s caption actors; one
    ``sink`` call per batch, in batch order (see the module docstring).

    ``factory()`` builds one worker (a :class:`CaptionerSpec`, picklable). ``kind``: the captioner's kind (``image``: batches decoded by a ``prepare`` task within
    ``max_pixels`` >= 1 pixels; ``text``: none). ``batch_size`` (>= 1) items per batch and
    sink call (the local loop's: the captioner's ``settings.batch_size``). ``resources`` of one actor (default one
    CPU), ``workers`` actors (0 = the engine's default). ``settings``: the driver's
    ``captioner.describe()``, returned as the summary's settings with ``device`` set to the
    devices the workers ran on. Returns the run's counts.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size: {batch_size} must be >= 1")
    if max_pixels < 1:
        raise ValueError(f"max_pixels: {max_pixels} must be >= 1")
    if kind not in ("image", "text"):
        raise ValueError(f"kind: {kind!r} is not image or text")
    summary = RecaptionSummary(settings=dict(settings or {}))
    started = time.perf_counter()
    batches = list(pending_batches(items, done, batch_size, summary, lambda _: None))
    if kind == "image":
        units: list[tuple[int, Any]] = [
            (i, CaptionUnit(tuple(batch), int(max_pixels))) for i, batch in enumerate(batches)
        ]
        prepare: Any = decode_unit
    else:
        units = [(i, resolve_texts(batch)) for i, batch in enumerate(batches)]
        prepare = None
    devices: set[str] = set()
    results = engine.map_actors(
        factory,
        units,
        resources=resources or Resources(),
        workers=workers,
        prepare=prepare,
        progress=Progress("recaption", unit="batch", enabled=progress),
    )
    for _, batch in results:
        summary.model_seconds += batch.model_seconds
        devices.add(batch.device)
        write_rows(sink, batch.rows, summary)
    if devices:
        summary.settings["device"] = ", ".join(sorted(devices))
    summary.seconds = time.perf_counter() - started
    return summary
