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
install.

No process-wide state: every function takes the options explicitly (``options=``), or from
the URL itself when it is a :class:`StoreUrl` (:func:`bind`: a URL carrying its study's
``[storage]`` options, as a scan unit or an image shard hands it to a worker), else the
defaults. Two studies with different endpoints in one process never see each other's
settings. Workers (threads, Ray tasks) open their own objects: nothing is read through the
driver.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from corpus_audit.core.config import StorageSection, derived_from
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


@derived_from(StorageSection, "endpoint_url", "region", "anonymous", "retries")
class StoreOptions:
    """Settings of the stores (``[storage]``, derived from their declarations); no
    credentials. ``retries`` >= 0 attempts after a throttled or failing request.
    ``StoreOptions.from_config(section)`` reads a ``[storage]`` section."""


class StoreUrl(str):
    """A store's URL together with the :class:`StoreOptions` to open it with. It compares,
    hashes, prints and pickles (with its options) as the plain URL does; a string built from
    it (an f-string, a concatenation) is a plain ``str`` again, so derived URLs are bound
    with :func:`bind` where they are made."""

    options: StoreOptions
    known: tuple[tuple[str, Any], ...] | None  # the listing's size and content markers

    def __new__(
        cls,
        url: str,
        options: StoreOptions,
        known: tuple[tuple[str, Any], ...] | None = None,
    ) -> StoreUrl:
        self = super().__new__(cls, url)
        self.options = options
        self.known = known
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoreUrl, (str(self), self.options, self.known))


def bind(
    url: str, options: StoreOptions | None, known: tuple[tuple[str, Any], ...] | None = None
) -> str:
    """``url`` carrying ``options`` (a :class:`StoreUrl`), and ``known``, what a listing
    said of the object (:func:`known_of`: size and content markers, so that planning asks
    the store nothing more); ``url`` unchanged for None options."""
    if options is None:
        return url
    return StoreUrl(str(url), options, known if known is not None else known_of(url))


def known_of(url: str) -> tuple[tuple[str, Any], ...] | None:
    """What ``url`` carries of its listing (:class:`StoreUrl` ``known``), or None."""
    return getattr(url, "known", None)


def _known(info: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A listing entry's size and content markers (what :func:`identity` returns), as a
    hashable, picklable tuple."""
    out: list[tuple[str, Any]] = [("size", info.get("size"))]
    for key in _IDENTITY_KEYS:
        value = info.get(key)
        if value in (None, ""):
            continue
        if key == "created" and isinstance(value, (int, float)):  # memory://'s listing
            import datetime

            value = datetime.datetime.fromtimestamp(value, datetime.UTC)  # as its info says
        out.append((key, str(value)))
    return tuple(out)


def options_of(url: str, options: StoreOptions | None = None) -> StoreOptions:
    """The options to open ``url`` with: ``options`` if given, else those ``url`` carries
    (:class:`StoreUrl`), else the defaults (AWS, signed requests, 5 retries)."""
    if options is not None:
        return options
    carried = getattr(url, "options", None)
    return carried if isinstance(carried, StoreOptions) else StoreOptions()


def redact(text: str) -> str:
    """``text`` with the value of every credential variable of the environment blanked."""
    for name in _SECRET_ENV:
        value = os.environ.get(name, "")
        if len(value) >= 4:
            text = text.replace(value, "***")
    return text


def _unreachable(exc: BaseException) -> BaseException | None:
    """The connection failure in ``exc``'s chain (refused, no route, DNS, botocore's
    ``EndpointConnectionError``, aiohttp's ``ClientConnectorError``), else None; fsspec's HTTP
    file system turns a refused connection into ``FileNotFoundError`` *from* it."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ConnectionError) or "Connect" in type(cur).__name__:
            return cur
        cur = cur.__cause__ or cur.__context__
    return None


def _gcs_forbidden(exc: BaseException) -> bool:
    """gcsfs's answer to a 403: a plain ``OSError("Forbidden: <path>\\n<message>")``."""
    return type(exc) is OSError and str(exc).startswith("Forbidden: ")


HUB_NO_REVISION = "no such revision of the repository"  # the Hub's RevisionNotFound


def _hub_problem(exc: BaseException) -> str | None:
    """What huggingface_hub's failure in ``exc``'s chain means (``HfFileSystem`` raises
    ``FileNotFoundError`` *from* the Hub's error for a missing repository or revision, and
    the Hub's error itself for a file it refuses); None when it is none of these. A private
    repository reads as a missing one to a client without its token, as the Hub answers."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        kinds = {c.__name__ for c in type(cur).__mro__}
        status = getattr(getattr(cur, "response", None), "status_code", None)
        if "GatedRepoError" in kinds:
            return "access denied: a gated repository, accept its conditions and set HF_TOKEN"
        if "RepositoryNotFoundError" in kinds:
            return "no such repository on the Hub, or a private one: set HF_TOKEN"
        if "RevisionNotFoundError" in kinds:
            return HUB_NO_REVISION
        if "EntryNotFoundError" in kinds:
            return "no such file in the repository"
        if "HfHubHTTPError" in kinds and status in (401, 403):
            return "access denied, check HF_TOKEN and the repository's permissions"
        cur = cur.__cause__ or cur.__context__
    if isinstance(exc, FileNotFoundError):
        return "no such file in the repository"
    return None


def _host_of(url: str, options: StoreOptions | None) -> str:
    """Where a request for ``url`` goes: the S3 / GCS endpoint, the Hub's (``HF_ENDPOINT``,
    as huggingface_hub read it), else the URL's scheme and host."""
    if scheme(url) in ("s3", "s3a", "gs", "gcs") and options is not None and options.endpoint_url:
        return options.endpoint_url
    if scheme(url) == "hf":
        try:
            from huggingface_hub import constants
        except ImportError:
            return "https://huggingface.co"
        return str(constants.ENDPOINT)
    head, _, rest = str(url).partition("://")
    return f"{head}://{rest.split('/', 1)[0]}"


def _no_ranges(exc: BaseException) -> bool:
    """fsspec's HTTP file system on a server that ignores ``Range`` (``python -m
    http.server``): a ``ValueError`` saying so."""
    return isinstance(exc, ValueError) and "support range requests" in str(exc)


def _changed(exc: BaseException) -> bool:
    """An object replaced while it was read: s3fs's 412 on its ``If-Match`` ETag
    (``PreconditionFailed``), fsspec's ``FileExpired``, or a GCS generation mismatch."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        text = f"{type(cur).__name__}: {cur}"
        if "FileExpired" in text or "PreconditionFailed" in text:
            return True
        if "Precondition Failed" in text or "conditionNotMet" in text:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def store_error(
    url: str, exc: BaseException, doing: str = "cannot read", options: StoreOptions | None = None
) -> CorpusError:
    """One line naming ``url`` and what the store answered (missing, denied, unreachable:
    ``cannot connect to <endpoint or host>``)."""
    if isinstance(exc, CorpusError):
        return exc
    down = _unreachable(exc)
    if down is not None:
        detail = " ".join(redact(f"{type(down).__name__}: {down}").split())[:200]
        where = _host_of(url, options_of(url, options))
        return CorpusError(f"{printable(url)}: cannot connect to {printable(where)} ({detail})")
    if _no_ranges(exc):
        return CorpusError(
            f"{printable(url)}: {doing} (the server does not answer HTTP range requests, "
            "which reading a part of a file needs; serve it from a server that does (an "
            "object store, a CDN, nginx) or download it and give the local path)"
        )
    if _changed(exc):
        return CorpusError(
            f"{printable(url)}: changed since the run started (the object was replaced on "
            "the store while it was read); run the command again"
        )
    hub = _hub_problem(exc) if scheme(url) == "hf" else None
    if hub is not None:
        return CorpusError(f"{printable(url)}: {doing} ({hub})")
    if isinstance(exc, FileNotFoundError):
        problem = "no such object or bucket"
    elif isinstance(exc, PermissionError) or _gcs_forbidden(exc):
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
        kwargs = {"token": "anon"} if options.anonymous else {}
        if options.endpoint_url:  # a GCS-compatible server (an emulator), not Google's
            kwargs["endpoint_url"] = options.endpoint_url
        return kwargs
    return {}


def _gcs_json_only(options: StoreOptions) -> bool:
    """Whether ``gs://`` goes to a GCS-compatible server other than Google's (the study's
    ``endpoint_url`` or gcsfs's own ``STORAGE_EMULATOR_HOST``): then gcsfs's plain JSON-API
    file system is used. Its default one first asks the endpoint, over gRPC with TLS, for
    each bucket's layout (zonal / hierarchical), which such a server does not answer: a 60 s
    timeout per bucket and operation before falling back."""
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
    return bool(options.endpoint_url) or emulator not in ("", "default")


def _quiet_library_logger(name: str) -> None:
    """Give the library logger ``name`` a ``NullHandler`` (once), as a library should have:
    gcsfs logs every request it gives up on with ``logger.exception``, which in a process
    that configured no logging (the CLI) Python's last-resort handler prints to stderr as a
    traceback beside the one-line error. Records still reach handlers the application set
    up (they propagate)."""
    import logging

    logger = logging.getLogger(name)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())


@functools.lru_cache(maxsize=32)
def _filesystem(protocol: str, options: StoreOptions, json_only: bool = False) -> Any:
    import fsspec

    kwargs = _store_kwargs(protocol, options)
    if protocol == "gcs":
        _quiet_library_logger("gcsfs")
    if protocol == "gcs" and json_only:
        from gcsfs.core import GCSFileSystem

        return GCSFileSystem(**kwargs)
    fs = fsspec.filesystem(protocol, **kwargs)
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
        opts = options_of(url, options)
        fs = _filesystem(protocol, opts, protocol == "gcs" and _gcs_json_only(opts))
    except ImportError:
        hint = f"pip install 'corpus_audit[{extra}]'" if extra else f"pip install {package}"
        raise CorpusError(f"{printable(url)}: reading {s}:// needs {package} ({hint})") from None
    except (ValueError, TypeError, OSError) as exc:
        raise store_error(url, exc, "cannot open the store", options) from None
    path = url.split("://", 1)[1]
    if protocol in ("http", "https"):
        path = url
    elif protocol == "memory":
        path = "/" + path.lstrip("/")
    return fs, path


def _unstrip(
    url: str,
    path: str,
    options: StoreOptions | None,
    info: dict[str, Any] | None = None,
) -> str:
    """The URL of ``path`` (a listing's name) in the store of ``url``, carrying ``options``
    and, from the listing entry ``info``, the object's size and content markers."""
    known = _known(info) if info and info.get("type", "file") == "file" else None
    if scheme(url) in ("http", "https"):
        return StoreUrl(path, options, known) if options is not None else path
    full = f"{url.split('://', 1)[0]}://{path.lstrip('/')}"
    return StoreUrl(full, options, known) if options is not None else full


def expand(url: str, options: StoreOptions | None = None) -> list[tuple[str, bool]]:
    """``[(URL, is_directory)]`` that ``url`` names: itself, or the matches of a glob
    (``*``, ``?``, ``[``; ``**`` recursive), sorted; CorpusError when nothing matches. The
    URLs carry the options (:class:`StoreUrl`)."""
    options = options_of(url, options)
    fs, path = filesystem(url, options)
    try:
        if any(ch in path for ch in "*?["):
            found = fs.glob(path, detail=True)  # one listing: sizes, types, ETags
            if not found:
                raise CorpusError(f"{printable(url)}: the glob matches no object")
            return [
                (_unstrip(url, n, options, found[n]), found[n].get("type") == "directory")
                for n in sorted(found)
            ]
        info = fs.info(path)
    except CorpusError:
        raise
    except Exception as exc:  # noqa: BLE001 - any store failure is reported naming the URL
        raise store_error(url, exc, "cannot list", options) from None
    return [(bind(str(url), options), info.get("type") == "directory")]


def list_files(url: str, options: StoreOptions | None = None) -> list[str]:
    """Every object under the "directory" ``url`` (recursive), sorted, as URLs carrying the
    options; names whose part below ``url`` starts with ``.`` or ``_`` are skipped (like
    local corpus folders)."""
    options = options_of(url, options)
    fs, path = filesystem(url, options)
    try:
        found = fs.find(path, detail=True)  # one listing with sizes and ETags, no HEADs
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc, "cannot list", options) from None
    root = path.rstrip("/") + "/"
    out = []
    for n in sorted(found):
        rel = n[len(root) :] if n.startswith(root) else n.rsplit("/", 1)[-1]
        if not any(p.startswith((".", "_")) for p in rel.split("/")):
            out.append(_unstrip(url, n, options, found[n]))
    return out


def matching(url: str, patterns: tuple[str, ...], options: StoreOptions | None = None) -> list[str]:
    """The objects a URL, a glob on URLs or a prefix names whose file name matches one of
    ``patterns`` (``*.tar``), sorted, carrying the options; [] when none."""
    import fnmatch

    out: list[str] = []
    for found, is_dir in expand(url, options):
        for member in list_files(found) if is_dir else [found]:
            name = member.rstrip("/").rsplit("/", 1)[-1]
            if is_dir and not any(fnmatch.fnmatch(name, p) for p in patterns):
                continue
            out.append(member)
    return out


def identity(url: str, options: StoreOptions | None = None) -> dict[str, Any]:
    """What a remote file's fingerprint holds: its size and the store's content markers
    (ETag, version id, generation, ...), never a modification time alone. A URL that a
    listing gave (:func:`list_files`, a glob) carries them: no request is made."""
    known = known_of(url)
    if known is not None:
        return dict(known)
    fs, path = filesystem(url, options)
    try:
        fs.invalidate_cache(path)
        info = fs.info(path)
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc, options=options) from None
    out: dict[str, Any] = {"size": info.get("size")}
    for key in _IDENTITY_KEYS:
        if info.get(key) not in (None, ""):
            out[key] = str(info[key])
    return out


def size_or_none(url: str, options: StoreOptions | None = None) -> int | None:
    """The object's size in bytes; None when there is no such object (any other failure,
    access denied or an unreachable store included, is the store's one-line CorpusError)."""
    fs, path = filesystem(url, options)
    try:
        return int(fs.info(path).get("size") or 0)
    except FileNotFoundError as exc:
        if _unreachable(exc) is not None:
            raise store_error(url, exc, options=options) from None
        return None
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc, options=options) from None


def size(url: str, options: StoreOptions | None = None) -> int:
    """The object's size in bytes."""
    return int(identity(url, options)["size"] or 0)


STREAM_BLOCK_BYTES = 8 * 1024 * 1024  # one range request per 8 MiB when streaming


def open_input(
    url: str,
    *,
    compression: str | None = None,
    stream: bool = False,
    options: StoreOptions | None = None,
) -> Any:
    """A binary file object reading ``url`` by range requests: with no read-ahead (each read
    asks for exactly its bytes: parquet footers and column chunks), or with ``stream`` in
    blocks of :data:`STREAM_BLOCK_BYTES` (tar shards, CSV: many small sequential reads);
    ``compression="infer"`` decompresses by the name (.gz, .zst). ``options``: as in
    :func:`options_of`."""
    fs, path = filesystem(url, options)
    cache = (
        {"cache_type": "readahead", "block_size": STREAM_BLOCK_BYTES}
        if stream
        else {"cache_type": "none"}
    )
    known = dict(known_of(url) or ())
    try:
        if known.get("size") is not None and fs.protocol in ("memory", ("memory",)):
            return _memory_file(fs, path, compression)  # fsspec's open scans the whole store
        if known.get("size") is not None and scheme(url) in ("s3", "s3a", "gs", "gcs"):
            fh = fs.open(path, "rb", compression=compression, size=int(known["size"]), **cache)
            etag = known.get("ETag")
            if etag and isinstance(getattr(fh, "read_kw", None), dict):  # s3fs: as without size
                fh.read_kw = {**fh.read_kw, "IfMatch": etag}  # a replaced object: 412
            return fh
        return fs.open(path, "rb", compression=compression, **cache)
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc, options=options) from None


def _memory_file(fs: Any, path: str, compression: str | None) -> Any:
    """An object of fsspec's ``memory://`` store opened without its ``open``, which checks
    every parent folder against every key of the store (quadratic over a listing)."""
    import io

    try:
        data = fs.store[path].getvalue()
    except KeyError:
        raise FileNotFoundError(path) from None
    raw: Any = io.BytesIO(data)
    if compression:
        from fsspec.compression import compr
        from fsspec.utils import infer_compression

        codec = infer_compression(path) if compression == "infer" else compression
        if codec is not None:
            raw = compr[codec](raw, mode="rb")
    return raw


def is_store_problem(exc: BaseException) -> bool:
    """Whether ``exc`` (possibly as pyarrow re-raised it) is the store's, not the file's: a
    server without range requests, or an object replaced while it was read."""
    return _no_ranges(exc) or _changed(exc)
