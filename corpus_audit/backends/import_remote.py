"""``import-images`` of a source on an object store: a local mirror inside the study.

An imported image is referenced where it lies (``images.path``) and read again by ``label``
and ``import-images --verify``, which read local files. So a source given as a URL is
mirrored first into ``<study>/imports/<sha256 of the URL, 16 hex>/<its name>``, then imported
like the local source: same checks, same drop reasons, image paths relative to the study.

- a **manifest** (``s3://bucket/dalle3/manifest.csv``, a BAFIS ``metadata.json``...): the
  manifest, then every file it names (relative to the manifest's "folder" on the store, as
  for a local manifest), each copied once (a file already there with the store's size is
  kept); a file missing on the store is ``missing_file``;
- a **folder** (a prefix, ``s3://bucket/dalle3/``): listed once (recursively, with sizes);
  a folder holding ``metadata.json`` is a BAFIS folder (that file, copied again on every
  import, then the files it names, each copied once), else a folder per prompt
  (``<prompt>/<n>.<image suffix>``, folders starting with ``.`` skipped, as
  :func:`~corpus_audit.stages.import_images.readers.read_folder` does locally). Bounded: at most
  :data:`MAX_FOLDER_FILES` files and :data:`MAX_FOLDER_BYTES` bytes are mirrored (more is
  one line naming the folder, no image copied). A key that cannot be a local path
  under the mirror (an empty, ``.`` or ``..`` part, a backslash, a NUL) is refused, naming
  it. Files of an earlier mirror that the store no longer holds are removed from the mirror,
  so the import sees what the store holds now (as a local folder's import would).

Store errors are one line naming the URL (:mod:`corpus_audit.backends.storage`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any

from corpus_audit.backends import storage
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.core.errors import CorpusAuditError, ManifestError, StudyError, printable
from corpus_audit.core.fileio import refuse_links

MANIFEST_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".json")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tif", ".tiff")  # a folder's
BAFIS_METADATA = "metadata.json"  # a BAFIS folder's manifest
MAX_FOLDER_FILES = 20_000  # files one folder on a store may mirror
MAX_FOLDER_BYTES = 16 << 30  # bytes (16 GiB) one folder on a store may mirror
MAX_NAME_BYTES = 255  # a file or folder name on Linux, macOS and Windows file systems
COPY_THREADS = 8  # objects copied at once (each one GET stream)


def _fetch(url: str, dest: Path, size: int, options: StoreOptions, *, again: bool = False) -> None:
    """Copy the object ``url`` of ``size`` bytes to ``dest`` unless a file of that size is
    there already (``again``: copied anyway); written to ``<dest>.part`` first, then renamed.
    A store failure mid-copy is the store's one-line error naming ``url``."""
    if not again and dest.is_file() and dest.stat().st_size == size:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        with storage.open_input(url, stream=True, options=options) as src, tmp.open("wb") as out:
            shutil.copyfileobj(src, out, length=1 << 20)
    except CorpusAuditError:
        tmp.unlink(missing_ok=True)
        raise
    except Exception as exc:  # noqa: BLE001 - a read failing mid-stream, named by its URL
        tmp.unlink(missing_ok=True)
        raise storage.store_error(url, exc, options=options) from None
    tmp.replace(dest)


def _copy(url: str, dest: Path, options: StoreOptions) -> bool:
    """Copy one object to ``dest`` (kept when its size is the store's); False if missing
    (the import then records it as ``missing_file``); any other store failure is an error."""
    size = storage.size_or_none(url, options)
    if size is None:
        return False
    _fetch(url, dest, size, options)
    return True


def _mirror_dir(study: Any, url: str, name: str) -> Path:
    """``<study>/imports/<sha256 of url, 16 hex>/<name>`` (the source keeps its name); a
    StudyError when it, a folder above it or anything in it is a symbolic link (a study
    received from someone else must not make the import remove or write files elsewhere)."""
    if name in ("", ".", "..") or "\\" in name or "\x00" in name:
        raise ManifestError(f"{printable(url)}: a source on a store needs a plain last name")
    if len(os.fsencode(name)) > MAX_NAME_BYTES:
        raise ManifestError(
            f"{printable(url)[:160]}...: the last part of the URL is over {MAX_NAME_BYTES} "
            "bytes, too long for a local name"
        )
    path = study.path("imports", hashlib.sha256(url.encode()).hexdigest()[:16], name)
    return refuse_links(study.root, path, tree=True)


def mirror_source(study: Any, url: str, read_source: Any, model: str | None) -> Path:
    """The local mirror of the manifest or folder at ``url`` and of the files it names (see
    the module docstring); ``read_source`` parses the mirrored manifest or folder (the
    command's own reader)."""
    options = StoreOptions.from_config(study.config.storage)
    name = url.rstrip("/").rsplit("/", 1)[-1]
    try:
        if name.lower().endswith(MANIFEST_SUFFIXES) and not url.endswith("/"):
            return _mirror_manifest(study, url, name, read_source, model, options)
        return _mirror_folder(study, url.rstrip("/"), name, read_source, model, options)
    except (ManifestError, StudyError):
        raise
    except CorpusAuditError as exc:  # the store's one-line error naming the URL
        raise ManifestError(str(exc)) from None


def _mirror_manifest(
    study: Any, url: str, name: str, read_source: Any, model: str | None, options: StoreOptions
) -> Path:
    """The manifest at ``url``, then each file it names, into the study's mirror."""
    manifest = _mirror_dir(study, url, name)
    base = url.rstrip("/").rsplit("/", 1)[0]
    root = manifest.parent.resolve()
    if not _copy(url, manifest, options):
        raise ManifestError(f"{printable(url)}: no such manifest on the store")
    for entry in read_source(manifest, model).entries:
        rel = Path(entry.file).relative_to(root).as_posix()  # the reader kept it inside
        _copy(f"{base}/{rel}", root / rel, options)
    return manifest


def _listing(url: str, options: StoreOptions) -> dict[str, int]:
    """``{relative key: size in bytes}`` of every object under the folder ``url`` (folder
    markers, keys ending in ``/``, left out); ManifestError for a URL naming one object, a
    folder holding nothing, or a key that is no plain relative path."""
    fs, path = storage.filesystem(url, options)
    try:
        if fs.isfile(path):
            raise ManifestError(
                f"{printable(url)}: a source on a store is a manifest file "
                f"({', '.join(MANIFEST_SUFFIXES)}) or a folder"
            )
        fs.invalidate_cache(path)  # listed now, not from an earlier listing of this process
        found = fs.find(path, detail=True)
    except ManifestError:
        raise
    except Exception as exc:  # noqa: BLE001 - any store failure is one line naming the URL
        raise storage.store_error(url, exc, "cannot list", options) from None
    root = path.rstrip("/") + "/"
    out: dict[str, int] = {}
    for key, info in sorted(found.items()):
        if info.get("type", "file") != "file" or key.endswith("/"):
            continue
        rel = key[len(root) :] if key.startswith(root) else ""
        parts = rel.split("/")
        if not rel or any(p in ("", ".", "..") for p in parts) or "\\" in rel or "\x00" in rel:
            raise ManifestError(
                f"{printable(url)}/{printable(rel or key)}: an object key with an empty, '.' "
                "or '..' part or a backslash is not mirrored (rename it); nothing imported"
            )
        long = next((p for p in parts if len(os.fsencode(p)) > MAX_NAME_BYTES), None)
        if long is not None:
            raise ManifestError(
                f"{printable(url)}/{printable(rel)[:120]}...: an object key part of "
                f"{len(os.fsencode(long))} bytes cannot be a local file or folder name (at most "
                f"{MAX_NAME_BYTES}); rename it on the store; nothing imported"
            )
        out[rel] = int(info.get("size") or 0)
    if not out:
        raise ManifestError(f"{printable(url)}: no such folder on the store (no object under it)")
    return out


def _mirror_folder(
    study: Any, url: str, name: str, read_source: Any, model: str | None, options: StoreOptions
) -> Path:
    """The folder at ``url`` (BAFIS or a folder per prompt) into the study's mirror."""
    listing = _listing(url, options)
    folder = _mirror_dir(study, url, name)
    keep: set[Path] = set()
    if BAFIS_METADATA in listing:  # metadata.json first: it names the files
        meta = folder / BAFIS_METADATA
        _fetch(f"{url}/{BAFIS_METADATA}", meta, listing[BAFIS_METADATA], options, again=True)
        keep.add(meta)
        root = folder.resolve()
        entries = read_source(folder, model).entries  # kept inside the folder by the reader
        named = {Path(e.file).relative_to(root).as_posix() for e in entries}
        plan = {rel: listing[rel] for rel in sorted(named) if rel in listing}  # else missing_file
    else:  # <prompt>/<n>.<image suffix>, as read_folder reads a local folder
        plan = {
            rel: size
            for rel, size in listing.items()
            if rel.count("/") == 1
            and not rel.startswith(".")
            and PurePosixPath(rel).suffix.lower() in IMAGE_SUFFIXES
        }
    total = sum(plan.values())
    if len(plan) > MAX_FOLDER_FILES or total > MAX_FOLDER_BYTES:
        raise ManifestError(
            f"{printable(url)}: {len(plan)} files of {total} bytes to mirror, more than the "
            f"limit ({MAX_FOLDER_FILES} files, {MAX_FOLDER_BYTES} bytes); import part of it "
            "(a manifest, a sub-folder) or copy it to a local folder"
        )
    keep |= {folder / rel for rel in plan}
    if folder.is_dir():  # what an earlier mirror holds and the store does not any more
        for old in folder.rglob("*"):
            if (old.is_file() or old.is_symlink()) and old not in keep:
                old.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=COPY_THREADS) as pool:
        done = [
            pool.submit(_fetch, f"{url}/{rel}", folder / rel, size, options)
            for rel, size in plan.items()
        ]
        for future in done:
            future.result()  # the first store error, as one line naming its URL
    return folder
