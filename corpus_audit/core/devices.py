"""Which torch device a stage runs on (``engine.device``), decided in one place."""

from __future__ import annotations

import contextlib
import gc
from typing import Any

from corpus_audit.core.errors import ModelError


def resolve_device(device: str = "auto") -> str:
    """The torch device a model runs on, from ``engine.device``.

    ``auto`` -> ``cuda`` when torch sees a GPU, else ``mps`` (Apple silicon) when available,
    else ``cpu``; without torch installed, ``auto`` is ``cpu``. Any other value is returned as
    given, except that ``cuda``/``cuda:N`` without a CUDA GPU and ``mps`` without MPS are a
    :class:`~corpus_audit.core.errors.ModelError` naming ``engine.device`` (instead of a torch
    error deep inside the first batch).

    This is the one resolution every model backend uses (generators, embedders, classifiers,
    paraphrasers, captioners). Before, the embedders resolved ``auto`` to ``cuda`` or ``cpu``
    only; MPS is taken here because every backend's models run on it and ``engine.device``
    accepts ``mps`` for all of them, so ``auto`` now means the same device for every stage.
    """
    if device != "auto":
        _check_available(device)
        return device
    try:
        import torch
    except ImportError:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def _check_available(device: str) -> None:
    if not (device.startswith("cuda") or device == "mps"):
        return
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"engine.device: {device!r} asked for, but torch sees no CUDA GPU")
    mps = getattr(torch.backends, "mps", None)
    if device == "mps" and not (mps is not None and mps.is_available()):
        raise ModelError("engine.device: 'mps' asked for, but torch sees no MPS device")


def release_memory() -> None:
    """Collect garbage and, when torch sees a GPU, return its cached memory (after a model is
    dropped). Without torch it only collects."""
    gc.collect()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        with contextlib.suppress(RuntimeError):
            torch.cuda.empty_cache()


class HeldModel:
    """What a backend holding one local model in ``self.model`` shares: ``close()`` drops the
    model and frees the accelerator's cached memory (:func:`release_memory`)."""

    model: Any

    def close(self) -> None:
        """Release the model (idempotent)."""
        self.model = None
        release_memory()
