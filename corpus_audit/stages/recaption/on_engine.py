"""The caption workers' recipe: what the engine's workers load for the ``recaption`` stage.

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

from dataclasses import replace

from corpus_audit.backends import captioners
from corpus_audit.backends.captioners import CAPTIONERS, CaptionSettings
from corpus_audit.backends.engines.models import ModelSpec
from corpus_audit.core.errors import ModelError
from corpus_audit.core.specs import split_spec
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
    backend, _ = split_spec(model.strip(), CAPTIONERS, "transformers", empty_model=True)
    if settings.dtype != "auto" or getattr(CAPTIONERS.get(backend), "kind", "") != "image":
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


def captioner_spec(model: str, settings: CaptionSettings, fingerprint: str) -> ModelSpec:
    """The caption workers' recipe (picklable): :func:`load_caption_model` once per worker."""
    return ModelSpec(load_caption_model, (model, settings, fingerprint))
