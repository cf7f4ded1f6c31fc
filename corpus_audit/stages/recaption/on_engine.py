"""The caption workers' recipes: what the engine's workers load for the ``recaption`` stage.

:func:`probe_spec` loads the captioner once on a worker before any work and answers its
facts (:class:`CaptionerFacts`: id, kind, fingerprint, description), so the driver checks the
variant without loading a model itself.

:func:`captioner_spec` is a :class:`~corpus_audit.backends.engines.models.ModelSpec` whose
load (:func:`load_caption_model`) loads the captioner of a ``recaption.model`` spec once per
worker (on the ``local`` engine in this process; on Ray in each actor) and wraps it in a
:class:`~corpus_audit.stages.recaption.driver.CaptionModel`; the batches run through
:func:`~corpus_audit.stages.recaption.driver.recaption_on_engine`, the one recaption loop.

The workers resolve ``CaptionSettings.device`` themselves (``auto``: the GPU the engine gave
the worker, if any) and refuse to caption when their captioner's fingerprint differs from the
one the driver checked the variant with (another dtype on another device would mix settings
in one variant): the caller plans ``dtype`` for the workers' device (:func:`worker_settings`).
On Ray the image paths must be readable by the workers (a file system every node mounts at
the same path).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from corpus_audit.backends import captioners
from corpus_audit.backends.captioners import CaptionSettings, captioner_kind
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.core.errors import ModelError
from corpus_audit.stages.recaption.driver import CaptionModel


def worker_settings(
    model: str, settings: CaptionSettings, gpus_per_worker: float
) -> CaptionSettings:
    """``settings`` as the caption workers of ``model`` (a ``recaption.model`` spec) use them.

    An image captioner's ``dtype = "auto"`` is named ``float16`` when the workers' device is
    known to be CUDA (``settings.device`` names it, or is ``auto`` with ``gpus_per_worker`` >
    0 GPUs per worker), so the driver, loading its captioner with these settings on its own
    device, gets the workers' fingerprint. Otherwise (and for the text rewrite, which has no
    dtype) the settings are kept as they are: ``auto`` then resolves on the workers' device as
    on the driver's when they share it (the local engine). Ray CPU actors of a driver on a GPU
    machine resolve ``auto`` otherwise than the driver: the workers then refuse with a
    one-line error (set ``recaption.dtype``).
    """
    if settings.dtype != "auto" or captioner_kind(model) != "image":
        return settings
    device = settings.device
    if device.startswith("cuda") or (device == "auto" and gpus_per_worker > 0):
        return replace(settings, dtype="float16")
    return settings


def load_caption_model(model: str, settings: CaptionSettings, fingerprint: str) -> CaptionModel:
    """The captioner of ``model`` (a ``recaption.model`` spec) loaded with ``settings``; a
    :class:`ModelError` when its settings fingerprint is not ``fingerprint`` (16 hex digits,
    the one the driver checked the variant with)."""
    captioner = captioners.load_captioner(model, settings)
    got = captioner.fingerprint
    if got != fingerprint:
        captioner.close()
        raise ModelError(
            f"recaption: the worker's captioner has settings fingerprint {got}, the driver "
            f"checked the variant with {fingerprint} (set recaption.dtype explicitly)"
        )
    return CaptionModel(captioner, settings.device)


@dataclass(frozen=True)
class CaptionerFacts:
    """What the driver needs of a captioner before any work: its model id, kind (``image``
    or ``text``), settings fingerprint (16 hex digits) and ``describe()``."""

    model_id: str
    kind: str
    fingerprint: str
    described: dict[str, Any]


def captioner_facts(captioner: Any, _payload: Any = None) -> CaptionerFacts:
    """The ``serve`` of the probe worker (:func:`probe_spec`): the loaded captioner's facts."""
    return CaptionerFacts(
        captioner.model_id, captioner.kind, captioner.fingerprint, captioner.describe()
    )


def probe_spec(model: str, settings: CaptionSettings) -> ModelSpec:
    """The probe's recipe (picklable): ``model`` loaded with ``settings`` on one worker of
    the engine, answering :func:`captioner_facts` (a model that cannot load fails before any
    work, and the variant is checked against its fingerprint)."""
    return ModelSpec(captioners.load_captioner, (model, settings), captioner_facts)


def captioner_spec(model: str, settings: CaptionSettings, fingerprint: str) -> ModelSpec:
    """The caption workers' recipe (picklable): :func:`load_caption_model` once per worker."""
    return ModelSpec(load_caption_model, (model, settings, fingerprint))
