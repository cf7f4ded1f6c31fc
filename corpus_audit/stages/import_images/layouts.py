"""The layouts a SOURCE of ``import-images`` may have, a registry: name -> :class:`Layout`.

A layout says which paths it reads (:attr:`Layout.claims`: the file to read for a path, or
None) and reads them (:attr:`Layout.read`). :func:`read_source` asks the registered layouts in
registration order and reads the path with the first that claims it, so a new layout is one
:func:`register` (a :class:`Layout`, or a lazy ``"module:attribute"`` string naming one). The
built-in order is the detection order: a folder holding ``metadata.json`` is BAFIS before it
is a folder per prompt; a file is told by its name (``metadata.json`` or ``.json``: BAFIS,
``.jsonl``/``.ndjson``: JSONL, ``.csv``/``.tsv``: CSV).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from corpus_audit.backends.import_remote import BAFIS_METADATA
from corpus_audit.core.errors import ManifestError, printable
from corpus_audit.core.registry import Registry
from corpus_audit.stages.import_images.manifest import Source
from corpus_audit.stages.import_images.readers import read_bafis, read_csv, read_folder, read_jsonl


@dataclass(frozen=True)
class Layout:
    """One layout: ``claims(path)`` the file or folder to read for an existing ``path`` (a
    resolved file or folder), or None when the path is not of this layout; ``read(that,
    model)`` the :class:`Source` (``model``: ``--model``, or None)."""

    name: str
    claims: Callable[[Path], Path | None]
    read: Callable[[Path, str | None], Source]


def _bafis(p: Path) -> Path | None:
    """A folder holding ``metadata.json``, or that file (or any ``.json`` but ``.jsonl``)."""
    if p.is_dir():
        return p / BAFIS_METADATA if (p / BAFIS_METADATA).is_file() else None
    name = p.name.lower()
    if name == BAFIS_METADATA or name.endswith(".json") and not name.endswith(".jsonl"):
        return p
    return None


def _suffixes(*suffixes: str) -> Callable[[Path], Path | None]:
    """A file whose name ends with one of ``suffixes`` (lower case)."""
    return lambda p: p if p.is_file() and p.name.lower().endswith(suffixes) else None


#: name -> Layout (or a lazy "module:attribute" naming one), in detection order
LAYOUTS: Registry[Layout] = Registry("import layout")


def register(layout: Layout) -> Layout:
    """Add ``layout`` to the registry (asked after the layouts registered before it)."""
    LAYOUTS.register(layout.name, layout)
    return layout


register(Layout("bafis", _bafis, read_bafis))
register(Layout("folder", lambda p: p if p.is_dir() else None, read_folder))
register(Layout("jsonl", _suffixes(".jsonl", ".ndjson"), read_jsonl))
register(Layout("csv", _suffixes(".csv", ".tsv"), read_csv))


def read_source(path: Path | str, model: str | None = None) -> Source:
    """Read one SOURCE with the first registered layout that claims it (module docstring)."""
    p = Path(path).expanduser().resolve()
    if not p.is_dir() and not p.is_file():
        raise ManifestError(f"{printable(p)}: no such manifest file or folder")
    for name in LAYOUTS.names():
        layout = LAYOUTS.get(name)  # a lazy entry is imported now
        target = layout.claims(p)
        if target is not None:
            return layout.read(target, model)
    raise ManifestError(
        f"{p}: unknown manifest type (give a .csv, .tsv, .jsonl, a BAFIS metadata.json, or a "
        "folder of <prompt>/<n>.png)"
    )
