"""The Hugging Face Hub's datasets by name: the one resolver of ``hf://`` URLs.

``hf://datasets/<org>/<name>[@<revision>][/<path or glob>]`` (``models/`` and ``spaces/``
too). The revision may be a branch, a tag, a commit, ``refs%2Fconvert%2Fparquet`` (URL-
quoted, as ``HfFileSystem`` writes it) or its alias ``~parquet``: the Hub's parquet export
of a dataset stored in another format, laid out ``<config>/<split>/NNNN.parquet`` (or
``<config>/<split>-NNNNN-of-NNNNN.parquet``).

- :func:`resolve` is what a corpus URL becomes: with ``HF_HUB_OFFLINE`` set, the local path
  in the Hub's cache (``HF_HUB_CACHE``, else ``$HF_HOME/hub``; huggingface_hub's own layout
  ``datasets--<org>--<name>/snapshots/<commit>/...`` with ``refs/<revision>``); online, the
  URL itself (read by ``HfFileSystem`` through :mod:`corpus_audit.backends.storage`).
- :func:`data_files` lists a dataset's data files by name, with an optional ``config`` and
  ``split``: the repository's own files of the revision, or, when it holds none of the wanted
  kind (a dataset stored as scripts, arrow or images), those of the parquet export.

Offline, a dataset, a revision or a file missing from the cache is one CorpusError naming
the URL and what is missing (a snapshot's link whose blob is gone names that file).
"""

from __future__ import annotations

import fnmatch
import glob as globlib
import os
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from corpus_audit.backends import storage
from corpus_audit.backends.storage import redact
from corpus_audit.core.errors import CorpusError, printable

PARQUET_EXPORT = "refs/convert/parquet"  # the Hub's parquet export of every dataset
_ALIASES = {"~parquet": PARQUET_EXPORT}
_HUB_TYPES = {"datasets": "dataset", "spaces": "space", "models": "model"}
_TYPE_PREFIX = {v: k for k, v in _HUB_TYPES.items()}


class NotCached(CorpusError):
    """A repository (at a revision) that the local Hub cache does not hold, offline."""


class NoRevision(CorpusError):
    """A revision the Hub does not have (online), e.g. a dataset without a parquet export."""


@dataclass(frozen=True)
class HubRef:
    """A parsed ``hf://`` URL: repository type and id, revision ("" = the default branch)
    and the path inside the repository ("" = all of it; may be a glob)."""

    repo_type: str
    repo_id: str
    revision: str
    path: str

    def url(self, revision: str | None = None, path: str | None = None) -> str:
        """The ``hf://`` URL of this repository at ``revision``, ``path`` (default: its own)."""
        rev = self.revision if revision is None else revision
        rel = self.path if path is None else path
        head = f"hf://{_TYPE_PREFIX[self.repo_type]}/{self.repo_id}"
        if rev:
            head += "@" + quote(rev, safe="")
        return f"{head}/{rel}" if rel else head


def parse(url: str) -> HubRef:
    """The parts of an ``hf://`` URL; CorpusError for one without ``<org>/<name>``."""
    parts = str(url).split("://", 1)[1].strip("/").split("/")
    repo_type = "model"
    if parts and parts[0] in _HUB_TYPES:
        repo_type = _HUB_TYPES[parts.pop(0)]
    if len(parts) < 2 or not parts[0] or not parts[1].partition("@")[0]:
        raise CorpusError(f"{printable(url)}: not hf://datasets/<org>/<name>[/<path>]")
    name, _, revision = parts[1].partition("@")
    revision = unquote(revision)
    revision = _ALIASES.get(revision, revision)
    return HubRef(repo_type, f"{parts[0]}/{name}", revision, "/".join(parts[2:]))


def offline() -> bool:
    """Whether the Hugging Face Hub must not be asked (``HF_HUB_OFFLINE`` set true)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def cache_dir() -> str | None:
    """The Hub's cache folder from the environment now (``HF_HUB_CACHE``, else
    ``$HF_HOME/hub``); None = huggingface_hub's default."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    return None


def snapshot(ref: HubRef, url: str, revision: str | None = None) -> str:
    """The cached snapshot folder of ``ref`` at ``revision`` (default: its own), found by
    huggingface_hub itself (``snapshot_download(local_files_only=True)``); CorpusError
    naming the URL when the repository or the revision is not cached."""
    rev = ref.revision if revision is None else revision
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise CorpusError(
            f"{printable(url)}: reading hf:// needs huggingface_hub (pip install "
            "'corpus_audit[hf]')"
        ) from None
    try:
        return str(
            snapshot_download(
                ref.repo_id,
                repo_type=ref.repo_type,
                revision=rev or None,
                cache_dir=cache_dir(),
                local_files_only=True,
            )
        )
    except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError, IncompleteSnapshotError
        at = f" (revision {rev})" if rev else ""
        if type(exc).__name__ == "IncompleteSnapshotError":  # names the missing files
            detail = " ".join(redact(str(exc)).split()).split(" Outgoing traffic")[0][:400]
            raise CorpusError(f"{printable(url)}: {detail}") from None
        raise NotCached(
            f"{printable(url)}: {ref.repo_id}{at} is not in the local Hub cache and "
            f"HF_HUB_OFFLINE is set ({type(exc).__name__}); download it once online or set "
            "HF_HUB_OFFLINE=0 to read it from the Hub"
        ) from None


def _check_present(url: str, folder: str, local: str) -> None:
    """CorpusError naming the file when ``local`` is a snapshot link whose blob is gone."""
    if os.path.islink(local) and not os.path.exists(local):
        rel = os.path.relpath(local, folder)
        raise CorpusError(
            f"{printable(url)}: {printable(rel)} is missing from the local Hub cache (its "
            f"snapshot link points to {printable(os.readlink(local))}, which is not there) "
            "and HF_HUB_OFFLINE is set"
        )


def resolve(url: str) -> str:
    """What a corpus URL reads: offline, the local path (a file, a folder or a glob) in the
    Hub's cache; online, ``url`` with the revision alias written out. CorpusError naming the
    URL when, offline, the repository or the file is not cached."""
    ref = parse(url)
    if not offline():
        return ref.url()
    folder = snapshot(ref, url)
    local = os.path.join(folder, ref.path) if ref.path else folder
    if any(c in ref.path for c in "*?["):
        found = sorted(globlib.glob(local, recursive=True))
    else:
        found = [local] if os.path.lexists(local) else []
    if not found:
        raise CorpusError(
            f"{printable(url)}: not in the local Hub cache ({printable(folder)}) and "
            "HF_HUB_OFFLINE is set"
        )
    for f in found:
        _check_present(url, folder, f)
    return local


# -- a dataset's files by name ------------------------------------------------------------------
def _in_split(rel: str, split: str) -> bool:
    """Whether the repository file ``rel`` belongs to ``split``: a folder of its path is
    named so (``<config>/train/0000.parquet``, ``train/x.parquet``), or its name starts with
    the split and a separator (``data/train-00000-of-00002.parquet``, ``train.parquet``)."""
    parts = rel.split("/")
    if split in parts[:-1]:
        return True
    return re.match(re.escape(split) + r"(?:[-_.]|$)", parts[-1]) is not None


def _in_config(rel: str, config: str, configs: set[str]) -> bool:
    """Whether ``rel`` belongs to ``config``: its first folder is the config; a dataset whose
    files are not grouped by config (``data/...``) has only ``default``."""
    first = rel.split("/", 1)[0] if "/" in rel else ""
    return first == config or (config == "default" and "default" not in configs)


def _select(
    url: str, rels: list[str], split: str, config: str, where: str
) -> tuple[list[str], str]:
    """The files of ``rels`` (paths in the repository) of ``config`` and ``split``; the
    reason when none is left (naming the configs and splits there are)."""
    configs = {r.split("/", 1)[0] for r in rels if "/" in r}
    out = [r for r in rels if not config or _in_config(r, config, configs)]
    if config and not out:
        return [], f"no config {config!r} in {where} (folders: {', '.join(sorted(configs))})"
    picked = [r for r in out if not split or _in_split(r, split)]
    if split and not picked:
        return [], f"no split {split!r} in {where} (files: {', '.join(out[:6])})"
    return picked, ""


def _cached_files(ref: HubRef, url: str, revision: str, exts: tuple[str, ...]) -> list[str]:
    """Paths (in the repository) of the cached snapshot's files ending in ``exts``."""
    folder = snapshot(ref, url, revision)
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), folder).replace(os.sep, "/")
            if name.lower().endswith(exts) and not any(
                p.startswith((".", "_")) for p in rel.split("/")
            ):
                out.append(rel)
    return sorted(out)


def _listed_files(ref: HubRef, revision: str, exts: tuple[str, ...]) -> list[str]:
    """Paths (in the repository) of the files ending in ``exts``, listed by the Hub."""
    root = ref.url(revision, "")
    try:
        found = storage.list_files(root)
    except CorpusError as exc:
        if storage.HUB_NO_REVISION in str(exc):
            raise NoRevision(str(exc)) from None
        raise
    cut = len(root) + 1
    return sorted(u[cut:] for u in found if u.lower().endswith(exts))


def data_files(
    url: str, split: str = "", config: str = "", exts: tuple[str, ...] = (".parquet",)
) -> list[str]:
    """The data files of the dataset ``url`` names (``hf://datasets/<org>/<name>[@rev]
    [/<file, folder or glob>]``) whose names end in ``exts``, of ``config`` / ``split`` ("" = all), sorted:
    local paths in the Hub's cache offline, ``hf://`` URLs online. When the revision holds
    no such file (and no revision was asked for), the parquet export's files
    (:data:`PARQUET_EXPORT`). CorpusError naming what is missing."""
    ref = parse(url)
    revisions = [ref.revision] if ref.revision else ["", PARQUET_EXPORT]
    reasons: list[str] = []
    uncached: list[str] = []
    for rev in revisions:
        where = f"{ref.repo_id}@{rev or 'main'}"
        try:
            if offline():
                rels = _cached_files(ref, url, rev, exts)
            else:
                rels = _listed_files(ref, rev, exts)
        except NotCached:
            if len(revisions) == 1:
                raise
            uncached.append(rev or "main")
            continue
        except NoRevision:
            if len(revisions) == 1:
                raise
            reasons.append(f"no parquet export ({rev})")
            continue
        if ref.path:  # a file, a folder or a glob inside the repository
            pat = ref.path.rstrip("/")
            if any(c in pat for c in "*?["):
                rels = [r for r in rels if fnmatch.fnmatchcase(r, pat)]
            else:
                rels = [r for r in rels if r == pat or r.startswith(pat + "/")]
        if not rels:
            reasons.append(f"no {'/'.join(exts)} files in {where}")
            continue
        picked, reason = _select(url, rels, split, config, where)
        if not picked:
            raise CorpusError(f"{printable(url)}: {reason}")
        if offline():
            folder = snapshot(ref, url, rev)
            paths = [os.path.join(folder, r) for r in picked]
            for p in paths:
                _check_present(url, folder, p)
            return paths
        return [ref.url(rev, r) for r in picked]
    if uncached and not reasons:
        raise NotCached(
            f"{printable(url)}: {ref.repo_id} is not in the local Hub cache (revisions "
            f"{' and '.join(uncached)}) and HF_HUB_OFFLINE is set; download it once online or "
            "set HF_HUB_OFFLINE=0 to read it from the Hub"
        )
    if uncached:
        reasons.append(f"{' and '.join(uncached)} not in the local Hub cache")
    raise CorpusError(f"{printable(url)}: {'; '.join(reasons)}")
