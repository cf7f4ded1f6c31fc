"""Which torch device a stage runs on (``engine.device``), decided in one place."""

from __future__ import annotations


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``mps`` when available, else ``cpu``;
    any other value is returned as given. Without torch installed, ``auto`` is ``cpu``."""
    if device != "auto":
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


def release_memory() -> None:
    """Collect garbage and, when torch sees a GPU, return its cached memory (after a model is
    dropped). Without torch it only collects."""
    import contextlib
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        with contextlib.suppress(RuntimeError):
            torch.cuda.empty_cache()
