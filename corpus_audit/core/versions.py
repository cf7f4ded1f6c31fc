"""Installed versions of the packages a result depends on (provenance)."""

from __future__ import annotations

from functools import cache
from importlib import metadata


def package_versions(*packages: str) -> dict[str, str]:
    """Installed versions of ``packages`` by distribution name; those not installed are
    left out (a backend that is not installed did not produce the result)."""
    found = {pkg: _installed_version(pkg) for pkg in packages}
    return {pkg: version for pkg, version in found.items() if version is not None}


@cache
def _installed_version(package: str) -> str | None:
    """``package``'s version, read from its metadata once per process (about 1.2 ms a read:
    every stage run records a dozen); None when it is not installed. The code a process runs
    is the one it imported, so a package upgraded under a running process keeps the version
    first read."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None
