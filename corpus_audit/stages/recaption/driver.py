"""The resumable, batched recaption loop: items in, one finished batch at a time to a sink.

:func:`recaption_on_engine` reads :class:`~corpus_audit.backends.captioners.CaptionInput`
items, skips the keys in ``done`` (what an earlier run already wrote) and keys seen earlier in
the same input, groups the rest into batches of ``batch_size`` and runs them on an
:class:`~corpus_audit.backends.engines.base.Engine` as its work units, keyed by batch number:
for an image captioner the engine's ``prepare`` decodes each batch with the project's safe
decoder (:func:`decode_unit`: :func:`corpus_audit.core.imagefile.read_rgb`, decompression-bomb
guard, EXIF orientation, every mode to 8-bit RGB; on the ``local`` engine in its threads,
ahead of the model), a caption worker (a :class:`~corpus_audit.backends.engines.models.ModelSpec`
of :class:`CaptionModel`) captions it, and the driver calls ``sink(rows)`` once per batch with
its rows (:data:`RECAPTION_COLUMNS`), in batch order. A text-rewrite captioner
(``paraphrase:``) needs no decoding: its batches travel as the items the model reads.
:func:`recaption` is the same loop for a captioner already loaded here: the ``local`` engine
serves it in this process (the caller keeps and closes it).

Resumability is the caller's contract with the sink: **the sink writes a batch atomically
(one transaction) or raises**, and on the next run ``done`` holds every key the sink has
written. Then a killed run (``kill -9``) loses at most the batches in flight and a rerun
writes each key exactly once; nothing here keeps state between runs. A sink that raises stops
the run with that batch unwritten. A unit redone after a dead Ray actor replaces its lost
attempt: each batch reaches the sink once.

Items that cannot be captioned still give a row, with ``caption`` NULL and ``skip_reason``
``unreadable`` (the decoder's detail in ``detail``: corrupt, truncated, too many pixels, not
found) or ``no_text`` (a text rewrite of a null or empty caption), so a rerun does not retry
them; a caller that wants a retry deletes those rows.

Progress: a tqdm bar on stderr (``progress=True``) counting items (written or skipped), whose
total is ``len(items)`` when the input has a length.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from corpus_audit.backends.captioners import Captioner, CaptionInput
from corpus_audit.backends.engines import open_engine
from corpus_audit.backends.engines.base import Engine, Progress, Resources, progress_bar
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.core.imagefile import DEFAULT_MAX_PIXELS, UnreadableImage, read_rgb

# One row per item; the study's `recaptions` table holds them with a `variant` column.
RECAPTION_COLUMNS = (
    "image_id",  # the item's key, as given (int or str)
    "caption",  # the model's caption, white space collapsed; NULL when skipped
    "skip_reason",  # NULL | unreadable (image did not decode) | no_text (nothing to rewrite)
    "detail",  # the decoder's one-line reason for unreadable images, else ''
    "model_id",  # the captioner's model as configured (path or hub id; paraphraser spec)
    "settings_fingerprint",  # Captioner.fingerprint: 16 hex digits of what decides captions
)

Sink = Callable[[Any], None]  # called with one pandas DataFrame per batch


@dataclass
class RecaptionSummary:
    """Counts of one run. ``items`` = every item read; the rest partition it:
    ``already_done`` (key in ``done``), ``duplicates`` (key seen earlier in this input),
    ``captioned``, ``unreadable``, ``no_text``. ``batches`` sink calls, ``seconds`` wall time
    of the run, ``model_seconds`` time inside ``Captioner.caption``."""

    items: int = 0
    already_done: int = 0
    duplicates: int = 0
    captioned: int = 0
    unreadable: int = 0
    no_text: int = 0
    batches: int = 0
    seconds: float = 0.0
    model_seconds: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def written(self) -> int:
        """Rows handed to the sink (captioned + skipped)."""
        return self.captioned + self.unreadable + self.no_text

    @property
    def captions_per_second(self) -> float | None:
        """Captioned items per second of the whole run (decode + model + sink)."""
        return self.captioned / self.seconds if self.seconds > 0 else None


def pending_batches(
    items: Iterable[CaptionInput],
    done: Container[Any],
    batch_size: int,
    summary: RecaptionSummary,
    on_skip: Callable[[int], None],
) -> Iterator[list[CaptionInput]]:
    """Batches of items whose key is neither done nor seen before in this input."""
    seen: set[Any] = set()
    batch: list[CaptionInput] = []
    for item in items:
        summary.items += 1
        if not isinstance(item, CaptionInput):
            raise TypeError(f"recaption: items must be CaptionInput, got {type(item).__name__}")
        if item.key is None:
            raise ValueError("recaption: an item has no key (image_id is NULL)")
        if item.key in done:
            summary.already_done += 1
            on_skip(1)
            continue
        if item.key in seen:
            summary.duplicates += 1
            on_skip(1)
            continue
        seen.add(item.key)
        batch.append(item)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _decode(item: CaptionInput, max_pixels: int) -> tuple[CaptionInput, str | None]:
    """The item with a decoded image, or the decoder's detail when it cannot be decoded."""
    if isinstance(item.image, np.ndarray):
        return item, None
    if item.image is None:
        return item, "no image given"
    try:
        return replace(item, image=read_rgb(item.image, max_pixels=max_pixels)), None
    except UnreadableImage as exc:
        return item, exc.detail


def _no_text(item: CaptionInput) -> bool:
    return not isinstance(item.text, str) or not item.text.strip()


#: one item ready for the model: (item, skip_reason, detail); skip_reason None = caption it
Resolved = tuple[CaptionInput, str | None, str]


def resolve_texts(items: Sequence[CaptionInput]) -> list[Resolved]:
    """Text items as the model gets them: ``no_text`` for a null or blank caption."""
    return [(it, "no_text", "") if _no_text(it) else (it, None, "") for it in items]


def resolve_images(pairs: Sequence[tuple[CaptionInput, str | None]]) -> list[Resolved]:
    """Decoded items (:func:`_decode`'s pairs) as the model gets them: ``unreadable`` with
    the decoder's detail when the image did not decode."""
    return [(it, None, "") if why is None else (it, "unreadable", why) for it, why in pairs]


def decode_items(items: Sequence[CaptionInput], max_pixels: int) -> list[Resolved]:
    """Image items decoded one after the other (within ``max_pixels`` pixels each)."""
    return resolve_images([_decode(it, max_pixels) for it in items])


@dataclass(frozen=True)
class CaptionUnit:
    """One batch of image items as a work unit (paths, not pixels) and the decoder's pixel
    budget (>= 1 pixels per image)."""

    items: tuple[CaptionInput, ...]
    max_pixels: int


def decode_unit(unit: CaptionUnit) -> list[Resolved]:
    """The engine's ``prepare`` for an image captioner: the batch decoded."""
    return decode_items(unit.items, unit.max_pixels)


def caption_rows(
    captioner: Captioner, resolved: Sequence[Resolved]
) -> tuple[list[dict[str, Any]], float]:
    """The batch's rows (:data:`RECAPTION_COLUMNS`, in input order) and the seconds spent in
    ``captioner.caption``: the one place rows are built, for the local loop and the engine's
    caption workers alike."""
    usable = [it for it, reason, _ in resolved if reason is None]
    start = time.perf_counter()
    captions = captioner.caption(usable) if usable else []
    seconds = time.perf_counter() - start
    if len(captions) != len(usable):
        raise RuntimeError(
            f"recaption: the captioner returned {len(captions)} captions for {len(usable)} items"
        )
    by_position = iter(captions)
    rows = [
        {
            "image_id": item.key,
            "caption": next(by_position) if reason is None else None,
            "skip_reason": reason,
            "detail": detail,
            "model_id": captioner.model_id,
            "settings_fingerprint": captioner.fingerprint,
        }
        for item, reason, detail in resolved
    ]
    return rows, seconds


def count_rows(summary: RecaptionSummary, rows: Sequence[dict[str, Any]]) -> None:
    """Add one batch's rows to the summary's captioned / unreadable / no_text counts."""
    for row in rows:
        reason = row["skip_reason"]
        if reason == "unreadable":
            summary.unreadable += 1
        elif reason == "no_text":
            summary.no_text += 1
        else:
            summary.captioned += 1


@dataclass(frozen=True)
class CaptionedBatch:
    """What a caption worker returns per batch: the rows (:data:`RECAPTION_COLUMNS` dicts,
    in input order), the seconds spent in the model, and the device the worker ran on."""

    rows: list[dict[str, Any]]
    model_seconds: float
    device: str


class CaptionModel:
    """A loaded captioner serving resolved batches (``(item, skip_reason, detail)`` each):
    what a caption worker holds. ``device``: the configured one, recorded when the captioner
    does not say where it runs; ``owned``: closed with the worker (a captioner the caller
    lent to :func:`recaption` is not)."""

    def __init__(self, captioner: Captioner, device: str = "auto", owned: bool = True) -> None:
        self.captioner = captioner
        self.owned = owned
        self.device = _device(captioner, device)

    def __call__(self, resolved: Sequence[Resolved]) -> CaptionedBatch:
        rows, seconds = caption_rows(self.captioner, resolved)
        return CaptionedBatch(rows, seconds, self.device)

    def close(self) -> None:
        if self.owned:
            self.captioner.close()


def _device(captioner: Any, configured: str) -> str:
    """The device a loaded captioner runs on (an image model's, or the text rewrite's
    paraphraser's), else the configured one."""
    device = getattr(captioner, "device", None)
    if device is None:
        paraphraser = getattr(captioner, "paraphraser", None)
        device = getattr(paraphraser, "device", None)
    return str(device or configured)


def write_rows(sink: Sink, rows: list[dict[str, Any]], summary: RecaptionSummary) -> None:
    """Hand one batch's rows to the sink as a DataFrame (:data:`RECAPTION_COLUMNS`) and count
    them (and the batch) in ``summary``."""
    sink(pd.DataFrame(rows, columns=list(RECAPTION_COLUMNS)))
    count_rows(summary, rows)
    summary.batches += 1


def recaption(
    captioner: Captioner,
    items: Iterable[CaptionInput],
    *,
    sink: Sink,
    done: Container[Any] = frozenset(),
    batch_size: int | None = None,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    decode_threads: int = 2,
    progress: bool = False,
) -> RecaptionSummary:
    """Caption every item whose key is not in ``done`` with a captioner loaded here; one
    ``sink`` call per batch (the ``local`` engine's in-process worker serves ``captioner``,
    which the caller keeps open and closes).

    ``batch_size`` (>= 1) items per sink call, default the captioner's
    ``settings.batch_size`` (the model may split a batch further); ``max_pixels`` (>= 1) the
    decoder's pixel budget (``images.max_pixels``); ``decode_threads`` (>= 0; 0 counts as 1)
    the local engine's threads, which decode the next batches' images while the model
    captions the current one. ``sink`` receives a pandas DataFrame with
    :data:`RECAPTION_COLUMNS`, rows in input order. Returns the run's counts with
    ``settings = captioner.describe()``.
    """
    size = batch_size if batch_size is not None else captioner.settings.batch_size
    lent = ModelSpec(CaptionModel, (captioner, captioner.settings.device, False))
    with open_engine("local", threads=max(1, decode_threads)) as engine:
        return recaption_on_engine(
            engine,
            lent,
            items,
            kind=captioner.kind,
            sink=sink,
            batch_size=size,
            done=done,
            max_pixels=max_pixels,
            settings=captioner.describe(),
            progress=progress,
        )


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
    """Caption every item whose key is not in ``done`` on ``engine``'s caption workers; one
    ``sink`` call per batch, in batch order (see the module docstring).

    ``factory()`` builds one worker (a :class:`ModelSpec` of :class:`CaptionModel`;
    picklable for Ray). ``kind``: the captioner's kind (``image``: batches decoded by the
    engine's ``prepare`` within ``max_pixels`` >= 1 pixels; ``text``: none). ``batch_size``
    (>= 1) items per batch and sink call. ``resources`` of one worker (default one CPU),
    ``workers`` workers (0 = the engine's default). ``settings``: the driver's
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
    total = len(items) if isinstance(items, Sequence) else None
    devices: set[str] = set()
    with progress_bar(Progress("recaption", "img", total, progress)) as bar:
        batches = list(pending_batches(items, done, batch_size, summary, bar.update))
        if kind == "image":
            units: list[tuple[int, Any]] = [
                (i, CaptionUnit(tuple(batch), int(max_pixels))) for i, batch in enumerate(batches)
            ]
            prepare: Any = decode_unit
        else:
            units = [(i, resolve_texts(batch)) for i, batch in enumerate(batches)]
            prepare = None
        results = engine.map_actors(
            factory, units, resources=resources or Resources(), workers=workers, prepare=prepare
        )
        with contextlib.closing(results):
            for _, batch in results:
                summary.model_seconds += batch.model_seconds
                devices.add(batch.device)
                write_rows(sink, batch.rows, summary)
                bar.update(len(batch.rows))
    if devices:
        summary.settings["device"] = ", ".join(sorted(devices))
    summary.seconds = time.perf_counter() - started
    return summary
