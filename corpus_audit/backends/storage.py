"""The one place a URL becomes a file system: ``s3://``, ``gs://``, ``hf://``, ``https://``,
``memory://`` (fsspec), ``file://`` and plain paths.

- :func:`filesystem` maps a URL to ``(fsspec file system, path inside it)``; the file system
  is built from :class:`StoreOptions` (the ``[storage]`` section: endpoint, region, anonymous
  access, retries) and nothing else: credentials come from each store's own environment
  variables and config files (``AWS_ACCESS_KEY_ID`` / ``~/.aws``, ``GOOGLE_APPLICATION_
  CREDENTIALS`` / gcloud, ``HF_TOKEN`` / ``huggingface-cli login``), never from the study.
- :func:`expand` lists a URL or a glob on one (sorted); :func:`identity` is what a remote
  file's fingerprint holds: URL, size and the store's ETag / version / generation (not
  mtime), so a changed object makes a stage stale like a changed local file.
- :func:`open_input` opens an object for reading by range requests (no read-ahead cache:
  pyarrow asks for the footer and the column chunks it needs, and only those bytes move).
- Every failure becomes one :class:`~corpus_audit.core.errors.CorpusError` naming the URL and
  the problem (:func:`store_error`: no such object, access denied, unreachable, ...), with
  any credential value of the environment blanked out of the message.

The store packages are optional extras: ``s3`` (s3fs), ``gcs`` (gcsfs), ``hf``
(huggingface_hub); a URL whose package is missing is a CorpusError saying which extra to
install. Workers (threads, Ray tasks) call :func:`configure` with the options that travel
with each corpus file, then open their own objects: nothing is read through the driver.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

from corpus_audit.core.errors import CorpusError, printable
from corpus_audit.core.urls import scheme

# scheme -> (fsspec protocol, the package it needs, the extra that installs it)
SCHEMES: dict[str, tuple[str, str, str]] = {
    "s3": ("s3", "s3fs", "s3"),
    "s3a": ("s3", "s3fs", "s3"),
    "gs": ("gcs", "gcsfs", "gcs"),
    "gcs": ("gcs", "gcsfs", "gcs"),
    "hf": ("hf", "huggingface_hub", "hf"),
    "http": ("http", "aiohttp", ""),
    "https": ("https", "aiohttp", ""),
    "memory": ("memory", "fsspec", ""),
}
# what a store's listing says about an object's content, by store (s3, gcs, hf, memory)
_IDENTITY_KEYS = (
    "ETag",
    "etag",
    "VersionId",
    "version_id",
    "generation",
    "md5Hash",
    "crc32c",
    "blob_id",
    "lfs",
    "last_commit",
    "created",
)
# environment variables whose values never appear in a message
_SECRET_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "GOOGLE_OAUTH_ACCESS_TOKEN",
)


@dataclass(frozen=True)
class StoreOptions:
    """Settings of the stores (``[storage]``); no credentials. ``retries`` >= 0 attempts
    after a throttled or failing request."""

    endpoint_url: str = ""
    region: str = ""
    anonymous: bool = False
    retries: int = 5

    @classmethod
    def from_config(cls, section: Any) -> StoreOptions:
        """From a :class:`~corpus_audit.core.config.StorageSection` (or anything with its keys)."""
        return cls(
            section.endpoint_url, section.region, bool(section.anonymous), int(section.retries)
        )


_OPTIONS = StoreOptions()


def configure(options: StoreOptions | None) -> None:
    """Use ``options`` for the file systems this process builds from now on (a worker calls it
    with the options its unit carries; the same for every file of one study)."""
    global _OPTIONS
    if options is not None:
        _OPTIONS = options


def redact(text: str) -> str:
    """``text`` with the value of every credential variable of the environment blanked."""
    for name in _SECRET_ENV:
        value = os.environ.get(name, "")
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def store_error(url: str, exc: BaseException, doing: str = "cannot read") -> CorpusError:
    """One line naming ``url`` and what the store answered (missing, denied, unreachable)."""
    if isinstance(exc, CorpusError):
        return exc
    if isinstance(exc, FileNotFoundError):
        problem = "no such object or bucket"
    elif isinstance(exc, PermissionError):
        problem = "access denied (check the store's credentials and permissions)"
    else:
        problem = f"{type(exc).__name__}: {exc}"
    detail = " ".join(redact(str(problem)).split())[:300]
    return CorpusError(f"{printable(url)}: {doing} ({detail})")


def _store_kwargs(protocol: str, options: StoreOptions) -> dict[str, Any]:
    if protocol == "s3":
        kwargs: dict[str, Any] = {
            "anon": options.anonymous,
            # botocore's standard retry mode: 503 SlowDown, 500s, throttling and timeouts are
            # retried with exponential backoff and jitter, at most ``retries`` times
            "config_kwargs": {
                "retries": {"max_attempts": options.retries + 1, "mode": "standard"},
                "connect_timeout": 10,
                "read_timeout": 60,
            },
        }
        if options.endpoint_url:
            kwargs["endpoint_url"] = options.endpoint_url
        if options.region:
            kwargs["client_kwargs"] = {"region_name": options.region}
        return kwargs
    if protocol == "gcs":
        return {"token": "anon"} if options.anonymous else {}
    return {}


@functools.lru_cache(maxsize=32)
def _filesystem(protocol: str, options: StoreOptions) -> Any:
    import fsspec

    fs = fsspec.filesystem(protocol, **_store_kwargs(protocol, options))
    if protocol == "s3":
        fs.retries = max(1, options.retries)  # s3fs's own loop over botocore's (bounded)
    return fs


def filesystem(url: str, options: StoreOptions | None = None) -> tuple[Any, str]:
    """``(fsspec file system, path in it)`` for ``url``; CorpusError for an unknown scheme or
    a store whose package is not installed (naming the extra)."""
    s = scheme(url)
    if s not in SCHEMES:
        raise CorpusError(
            f"{printable(url)}: unknown store '{s}://' (known: "
            f"{', '.join(sorted(f'{k}://' for k in SCHEMES))}, file:// and plain paths)"
        )
    protocol, package, extra = SCHEMES[s]
    try:
        fs = _filesystem(protocol, options or _OPTIONS)
    except ImportError:
        hint = f"pip install 'corpus_audit[{extra}]'" if extra else f"pip install {package}"
        raise CorpusError(f"{printable(url)}: reading {s}:// needs {package} ({hint})") from None
    except (ValueError, TypeError, OSError) as exc:
        raise store_error(url, exc, "cannot open the store") from None
    path = url.split("://", 1)[1]
    if protocol in ("http", "https"):
        path = url
    elif protocol == "memory":
        path = "/" + path.lstrip("/")
    return fs, path


def _unstrip(url: str, path: str) -> str:
    """The URL of ``path`` (a listing's name) in the store of ``url``."""
    if scheme(url) in ("http", "https"):
        return path
    return f"{url.split('://', 1)[0]}://{path.lstrip('/')}"


def expand(url: str) -> list[tuple[str, bool]]:
    """``[(URL, is_directory)]`` that ``url`` names: itself, or the matches of a glob
    (``*``, ``?``, ``[``; ``**`` recursive), sorted; CorpusError when nothing matches."""
    fs, path = filesystem(url)
    try:
        if any(ch in path for ch in "*?["):
            names = sorted(fs.glob(path))
            if not names:
                raise CorpusError(f"{printable(url)}: the glob matches no object")
            return [(_unstrip(url, n), fs.isdir(n)) for n in names]
        info = fs.info(path)
    except CorpusError:
        raise
    except Exception as exc:  # noqa: BLE001 - any store failure is reported naming the URL
        raise store_error(url, exc, "cannot list") from None
    return [(url, info.get("type") == "directory")]


def list_files(url: str) -> list[str]:
    """Every object under the "directory" ``url`` (recursive), sorted, as URLs; names whose
    part below ``url`` starts with ``.`` or ``_`` are skipped (like local corpus folders)."""
    fs, path = filesystem(url)
    try:
        names = sorted(fs.find(path))
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc, "cannot list") from None
    root = path.rstrip("/") + "/"
    out = []
    for n in names:
        rel = n[len(root) :] if n.startswith(root) else n.rsplit("/", 1)[-1]
        if not any(p.startswith((".", "_")) for p in rel.split("/")):
            out.append(_unstrip(url, n))
    return out


def matching(url: str, patterns: tuple[str, ...]) -> list[str]:
    """The objects a URL, a glob on URLs or a prefix names whose file name matches one of
    ``patterns`` (``*.tar``), sorted; [] when none."""
    import fnmatch

    out: list[str] = []
    for found, is_dir in expand(url):
        for member in list_files(found) if is_dir else [found]:
            name = member.rstrip("/").rsplit("/", 1)[-1]
            if is_dir and not any(fnmatch.fnmatch(name, p) for p in patterns):
                continue
            out.append(member)
    return out


_HUB_TYPES = {"datasets": "dataset", "spaces": "space", "models": "model"}


def hub_offline() -> bool:
    """Whether the Hugging Face Hub must not be asked (``HF_HUB_OFFLINE`` set true)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def hub_cache_path(url: str) -> str:
    """The local path in the Hub's cache (``HF_HUB_CACHE``) that an ``hf://`` URL names
    (``hf://datasets/<org>/<name>[@<revision>]/<path or glob>``), for offline runs; a
    CorpusError naming the URL when the repository or the file is not cached."""
    import glob as globlib

    parts = url.split("://", 1)[1].strip("/").split("/")
    repo_type = "model"
    if parts and parts[0] in _HUB_TYPES:
        repo_type = _HUB_TYPES[parts.pop(0)]
    if len(parts) < 2:
        raise CorpusError(f"{printable(url)}: not hf://datasets/<org>/<name>/<path>")
    name, _, revision = parts[1].partition("@")
    repo_id, rest = f"{parts[0]}/{name}", "/".join(parts[2:])
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            repo_id,
            repo_type=repo_type,
            revision=revision or None,
            cache_dir=os.environ.get("HF_HUB_CACHE") or None,
            local_files_only=True,
        )
    except ImportError:
        raise CorpusError(
            f"{printable(url)}: reading hf:// needs huggingface_hub (pip install "
            "'corpus_audit[hf]')"
        ) from None
    except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError and kin
        raise CorpusError(
            f"{printable(url)}: {repo_id} is not in the local Hub cache and HF_HUB_OFFLINE is "
            f"set ({type(exc).__name__}); download it once online or unset HF_HUB_OFFLINE"
        ) from None
    local = os.path.join(folder, rest) if rest else folder
    if not (
        globlib.glob(local, recursive=True)
        if any(c in rest for c in "*?[")
        else os.path.exists(local)
    ):
        raise CorpusError(
            f"{printable(url)}: not in the local Hub cache ({printable(folder)}) and "
            "HF_HUB_OFFLINE is set"
        )
    return local


def identity(url: str) -> dict[str, Any]:
    """What a remote file's fingerprint holds: its size and the store's content markers
    (ETag, version id, generation, ...), never a modification time alone."""
    fs, path = filesystem(url)
    try:
        fs.invalidate_cache(path)
        info = fs.info(path)
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None
    out: dict[str, Any] = {"size": info.get("size")}
    for key in _IDENTITY_KEYS:
        if info.get(key) not in (None, ""):
            out[key] = str(info[key])
    return out


def size_or_none(url: str) -> int | None:
    """The object's size in bytes; None when there is no such object (any other failure,
    access denied included, is the store's one-line CorpusError)."""
    fs, path = filesystem(url)
    try:
        return int(fs.info(path).get("size") or 0)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None


def size(url: str) -> int:
    """The object's size in bytes."""
    return int(identity(url)["size"] or 0)


STREAM_BLOCK_BYTES = 8 * 1024 * 1024  # one range request per 8 MiB when streaming


def open_input(url: str, *, compression: str | None = None, stream: bool = False) -> Any:
    """A binary file object reading ``url`` by range requests: with no read-ahead (each read
    asks for exactly its bytes: parquet footers and column chunks), or with ``stream`` in
    blocks of :data:`STREAM_BLOCK_BYTES` (tar shards, CSV: many small sequential reads);
    ``compression="infer"`` decompresses by the name (.gz, .zst)."""
    fs, path = filesystem(url)
    cache = (
        {"cache_type": "readahead", "block_size": STREAM_BLOCK_BYTES}
        if stream
        else {"cache_type": "none"}
    )
    try:
        return fs.open(path, "rb", compression=compression, **cache)
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None
