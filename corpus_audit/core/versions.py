"""Installed versions of the packages a result depends on (provenance)."""

from __future__ import annotations

from importlib import metadata


def package_versions(*packages: str) -> dict[str, str]:
    """Installed versions of ``packages`` by distribution name; those not installed are
    left out (a backend that is not installed did not produce the result)."""
    out = {}
    for pkg in packages:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out
