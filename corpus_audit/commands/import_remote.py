"""``import-images`` of a manifest on an object store: a local mirror inside the study.

An imported image is referenced where it lies (``images.path``) and read again by ``label``
and ``import-images --verify``, which read local files. So a manifest given as a URL
(``s3://bucket/dalle3/manifest.csv``, a BAFIS ``metadata.json``...) is mirrored first into
``<study>/imports/<sha256 of the URL, 16 hex>/``: the manifest, then every file it names
(relative to the manifest's "folder" on the store, as for a local manifest), each copied
once (a file already there with the store's size is kept). The import then reads the mirror
like a local manifest: same checks, same drop reasons (a file missing on the store is
``missing_file``), image paths relative to the study. Store errors on the manifest itself are one
line naming the URL (:mod:`corpus_audit.backends.storage`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from corpus_audit.backends import storage
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.errors import CorpusAuditError, ManifestError, printable

MANIFEST_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".json")


def _copy(url: str, dest: Path, options: StoreOptions) -> bool:
    """Copy one object to ``dest`` (kept when its size is the store's); False if missing
    (the import then records it as ``missing_file``); any other store failure is an error."""
    size = storage.size_or_none(url, options)
    if size is None:
        return False
    if dest.is_file() and dest.stat().st_size == size:
        return True
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    with storage.open_input(url, stream=True, options=options) as src, tmp.open("wb") as out:
        shutil.copyfileobj(src, out, length=1 << 20)
    tmp.replace(dest)
    return True


def mirror_source(study: Any, url: str, read_source: Any, model: str | None) -> Path:
    """The local mirror of the manifest at ``url`` and of the files it names (see the module
    docstring); ``read_source`` parses the mirrored manifest (the command's own reader)."""
    options = StoreOptions.from_config(study.config.storage)
    name = url.rstrip("/").rsplit("/", 1)[-1]
    if not name.lower().endswith(MANIFEST_SUFFIXES):
        raise ManifestError(
            f"{printable(url)}: a source on a store must be a manifest file "
            f"({', '.join(MANIFEST_SUFFIXES)}); folders are imported from local paths only"
        )
    folder = study.path("imports", hashlib.sha256(url.encode()).hexdigest()[:16], name).parent
    manifest = folder / name
    base = url.rstrip("/").rsplit("/", 1)[0]
    root = folder.resolve()
    try:
        if not _copy(url, manifest, options):
            raise ManifestError(f"{printable(url)}: no such manifest on the store")
        for entry in read_source(manifest, model).entries:
            rel = Path(entry.file).relative_to(root).as_posix()  # the reader kept it inside
            _copy(f"{base}/{rel}", root / rel, options)
    except ManifestError:
        raise
    except CorpusAuditError as exc:  # the store's one-line error naming the URL
        raise ManifestError(str(exc)) from None
    return manifest
