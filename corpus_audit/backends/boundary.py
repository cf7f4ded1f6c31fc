"""What a backend returns, checked where it comes back, before anything is stored or cached.

A backend is code the study does not control: a plugin an installed distribution declares
(:mod:`corpus_audit.core.registry`), or a built-in model. Every value it hands back crosses
one of the checks here first: its type, shape and count, finite numbers in their range. A
value outside the contract is a :class:`BackendOutputError`, one line naming the backend (for
a plugin: its name, distribution, version and entry-point group, :meth:`Plugin.describe`)
and what it returned, so the stage stops before the batch is written (exit 2 in the CLI).

An exception a plugin raises while it runs (:func:`call`) becomes the same kind of line
naming it; a built-in backend's own errors pass through as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from corpus_audit.core.errors import BackendOutputError, CorpusAuditError, shorten
from corpus_audit.core.registry import Registry

R = TypeVar("R")

PROBABILITY_TOLERANCE = 1e-6  # rounding of a float32 softmax; clipped to [0, 1] after
NORM_TOLERANCE = 1e-3  # |norm - 1| of an embedding row taken as unit length
ZERO_NORM = 1e-6  # a row shorter than this has no direction: refused
MAX_ID_CHARS = 200  # an id a backend gives for the rows it writes (labels.classifier, ...)


def backend_name(registry: Registry[Any], name: str) -> str:
    """How messages name the entry ``name`` of ``registry``: ``classifier plugin 'x'
    (dist 1.0, entry point group corpus_audit.classifiers)`` or ``classifier 'clip'``."""
    plugin = registry.plugin(name)
    if plugin is not None:
        return plugin.describe()
    return f"{registry.kind} {shorten(name)!r}"


def is_plugin(registry: Registry[Any], name: str) -> bool:
    """Whether ``name`` is served by a plugin (not a built-in entry)."""
    return registry.plugin(name) is not None


def shown(value: Any) -> str:
    """A short description of ``value`` for a message (never its whole text)."""
    if value is None or isinstance(value, (bool, int, float, np.generic)):
        return shorten(repr(value.item() if isinstance(value, np.generic) else value), 40)
    if isinstance(value, str):
        return shorten(repr(value), 60)
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} ({value.dtype})"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {shorten(type(value).__name__, 40)}"


def call(who: str, plugin: bool, what: str, fn: Callable[..., R], *args: Any, **kw: Any) -> R:
    """``fn(*args, **kw)``; for a plugin, an exception it raises (not a user error of ours,
    not running out of memory) becomes one :class:`BackendOutputError` naming it."""
    if not plugin:
        return fn(*args, **kw)
    try:
        return fn(*args, **kw)
    except (CorpusAuditError, MemoryError):
        raise
    except Exception as exc:
        detail = shorten(" ".join(str(exc).split()) or "(no message)", 200)
        raise BackendOutputError(
            f"{who}: {what} raised {type(exc).__name__}: {detail}; nothing of this batch was stored"
        ) from exc


def _numbers(value: Any, who: str, what: str) -> np.ndarray:
    """``value`` as a numeric array; refused when it holds anything but numbers."""
    if value is None:
        raise BackendOutputError(f"{who}: {what} returned None")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged lists
        raise BackendOutputError(f"{who}: {what} returned {shown(value)} ({exc})") from None
    if raw.dtype.kind not in "iuf":
        raise BackendOutputError(
            f"{who}: {what} returned {shown(value)} of {raw.dtype} values, not numbers"
        )
    return raw.astype(np.float64)


def check_probabilities(value: Any, n: int, who: str, what: str = "p_female") -> np.ndarray:
    """``value`` as ``n`` float64 probabilities in [0, 1] (within
    :data:`PROBABILITY_TOLERANCE`, then clipped); :class:`BackendOutputError` for anything
    else: not numbers, another shape or count, NaN, an infinity, a value out of range."""
    arr = _numbers(value, who, what)
    if arr.shape != (n,):
        raise BackendOutputError(
            f"{who}: {what} returned {shown(value)} for {n} images (expected {n} probabilities); "
            "nothing of this batch was stored"
        )
    bad = ~np.isfinite(arr) | (arr < -PROBABILITY_TOLERANCE) | (arr > 1 + PROBABILITY_TOLERANCE)
    if bad.any():
        first = int(np.argmax(bad))
        more = int(bad.sum()) - 1
        raise BackendOutputError(
            f"{who}: {what} returned {arr[first]!r} for image {first + 1} of {n}"
            + (f" (and {more} more out of range)" if more else "")
            + "; a probability is a finite number in [0, 1]; nothing of this batch was stored"
        )
    return np.clip(arr, 0.0, 1.0)


def check_vectors(
    value: Any, n: int, who: str, dim: int | None = None, what: str = "encode"
) -> tuple[np.ndarray, int]:
    """``value`` as ``(n, dim)`` float32 unit rows, and how many rows were normalised here
    (a row whose length is off 1 by more than :data:`NORM_TOLERANCE`). Refused: not
    numbers, another shape, NaN or infinite values, a row of (near) zero length."""
    arr = _numbers(value, who, what)
    expected = f"({n}, {dim})" if dim else f"({n}, dim)"
    if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 1 or (dim and arr.shape[1] != dim):
        raise BackendOutputError(
            f"{who}: {what} returned {shown(value)} for {n} texts (expected {expected}); "
            "nothing was stored or cached"
        )
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        first = int(np.argmin(finite))
        raise BackendOutputError(
            f"{who}: {what} returned a vector with NaN or infinite values for text {first + 1} "
            f"of {n} ({int((~finite).sum())} such); nothing was stored or cached"
        )
    norms = np.sqrt(np.einsum("ij,ij->i", arr, arr))
    zero = norms < ZERO_NORM
    if zero.any():
        raise BackendOutputError(
            f"{who}: {what} returned a zero vector for text {int(np.argmax(zero)) + 1} of {n} "
            f"({int(zero.sum())} such); a vector of length 0 has no direction; nothing was "
            "stored or cached"
        )
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        arr = arr / norms[:, None]
    return np.ascontiguousarray(arr, dtype=np.float32), int(off.sum())


def check_id(value: Any, who: str, what: str) -> str:
    """An id a backend gives its rows (a non-empty one-line str of at most
    :data:`MAX_ID_CHARS` characters)."""
    if not isinstance(value, str) or not value.strip():
        raise BackendOutputError(f"{who}: {what} returned {shown(value)}, not a non-empty text")
    if len(value) > MAX_ID_CHARS or not value.isprintable():
        raise BackendOutputError(
            f"{who}: {what} returned {shown(value)}: an id is one line of at most "
            f"{MAX_ID_CHARS} characters"
        )
    return value


def check_count(items: Any, n: int, who: str, what: str, unit: str) -> list[Any]:
    """``items`` as a list of exactly ``n`` (one per ``unit`` asked for)."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        try:
            items = list(items)
        except TypeError:
            raise BackendOutputError(f"{who}: {what} returned {shown(items)}, not a list") from None
    items = list(items)
    if len(items) != n:
        raise BackendOutputError(
            f"{who}: {what} returned {len(items)} items for {n} {unit}; nothing of this batch "
            "was stored"
        )
    return items


def check_completion(value: Any, who: str, what: str = "stream") -> Any:
    """One completion of a text generator: ``text`` a str, ``finish_reason`` a str, token
    counts None or whole numbers >= 0, ``seed`` None or a whole number."""
    text = getattr(value, "text", None)
    if not isinstance(text, str):
        raise BackendOutputError(
            f"{who}: {what} returned {shown(value)} as a completion (its text is "
            f"{shown(text)}, not a str); nothing of this batch was stored"
        )
    if not isinstance(getattr(value, "finish_reason", None), str):
        raise BackendOutputError(
            f"{who}: {what} returned a finish_reason of "
            f"{shown(getattr(value, 'finish_reason', None))}, not a str; nothing of this batch "
            "was stored"
        )
    for field in ("completion_tokens", "prompt_tokens", "seed"):
        count = getattr(value, field, None)
        if count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            raise BackendOutputError(
                f"{who}: {what} returned {field} = {shown(count)}, not a whole number; "
                "nothing of this batch was stored"
            )
        if field != "seed" and count < 0:
            raise BackendOutputError(
                f"{who}: {what} returned {field} = {int(count)}, a negative count; nothing of "
                "this batch was stored"
            )
    return value


def check_image(value: Any, who: str, index: int, n: int, what: str = "generate") -> Any:
    """One generated image: ``pixels`` an ``(H, W, 3)`` uint8 array (H, W >= 1), ``nsfw``
    True, False or None."""
    pixels = getattr(value, "pixels", None)
    if (
        not isinstance(pixels, np.ndarray)
        or pixels.dtype != np.uint8
        or pixels.ndim != 3
        or pixels.shape[2] != 3
        or min(pixels.shape[:2]) < 1
    ):
        raise BackendOutputError(
            f"{who}: {what} returned {shown(pixels)} as the pixels of image {index + 1} of {n} "
            "(expected an (H, W, 3) uint8 array); nothing of this batch was stored"
        )
    if getattr(value, "nsfw", None) not in (True, False, None):
        raise BackendOutputError(
            f"{who}: {what} returned nsfw = {shown(value.nsfw)} for image {index + 1} of {n} "
            "(True, False or None); nothing of this batch was stored"
        )
    return value


def check_counts(value: Any, n: int, who: str, what: str) -> list[int]:
    """``n`` whole numbers >= 0 (token counts of ``n`` texts)."""
    items = check_count(value, n, who, what, "texts")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)) or item < 0:
            raise BackendOutputError(
                f"{who}: {what} returned {shown(item)} as a token count (a whole number >= 0)"
            )
    return [int(i) for i in items]
