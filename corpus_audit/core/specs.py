"""Model specs of the form ``"backend:model"`` (``generate.models``, ``generate.paraphraser``,
``recaption`` captioners)."""

from __future__ import annotations

from collections.abc import Container


def split_spec(
    spec: str, backends: Container[str], default: str, *, empty_model: bool = False
) -> tuple[str, str]:
    """``"backend:model"`` -> ``(backend, model)`` when ``backend`` is one of ``backends`` and
    ``model`` is not empty; anything else is ``(default, spec)`` (a hub id or a local path,
    which may itself contain a colon, as in ``C:\\models\\sd``). With ``empty_model``,
    ``"backend:"`` is ``(backend, "")`` (for callers that report a missing model)."""
    head, sep, rest = spec.partition(":")
    if sep and head in backends and (rest or empty_model):
        return head, rest
    return default, spec
