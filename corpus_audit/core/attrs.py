"""An object's attributes as a dict under their own names: the part of a ``describe()``
(provenance) or query-parameter dict that repeats ``"name": self.name``."""

from __future__ import annotations

from typing import Any


def attrs_dict(obj: Any, *names: str) -> dict[str, Any]:
    """``{name: getattr(obj, name)}`` for each of ``names``, in the order given (the order a
    stored provenance lists them in)."""
    return {name: getattr(obj, name) for name in names}
