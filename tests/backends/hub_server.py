"""A loopback test double of the Hugging Face Hub's HTTP API, for the tests of ``hf://`` read
ONLINE through huggingface_hub's ``HfFileSystem`` (the real Hub cannot be reached here).

It serves dataset repositories committed from local folders (:meth:`HubDouble.commit`: each
call is a new commit of that revision, its files' blob ids and sha256 following their bytes)
on 127.0.0.1 at a free port, answering the requests huggingface_hub 2.4's ``HfFileSystem``
makes, as the Hub answers them:

- ``GET /api/datasets/<org>/<name>[/revision/<rev>]``: the repository's info (``sha``: the
  revision's commit, ``siblings``, ``gated``);
- ``GET /api/datasets/<org>/<name>/tree/<rev>[/<path>]?recursive=&expand=``: a listing
  (files with ``oid`` = git blob sha1, ``size``, ``lfs`` = ``{oid: sha256, size,
  pointerSize}``; folders with a tree ``oid``), paginated by ``page_size`` entries with a
  ``Link: <...>; rel="next"`` header (cursor-based, as the Hub's);
- ``GET``/``HEAD /datasets/<org>/<name>/resolve/<rev>/<path>``: a file kept in git (``.md``,
  ``.json``, ...) answered there; an LFS file (the rest) answered ``302 Found`` to its
  storage, ``/blobs/<sha256>`` here (on the Hub a CDN or Xet's CAS bridge), with the Hub's
  ``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag`` and ``X-Linked-Size``; the bytes honour
  ``Range: bytes=a-b`` (206, ``Content-Range``; 416 past the end), with ``Accept-Ranges:
  bytes`` and ``Content-Length``;
- ``GET /api/agent-harnesses``: the registry huggingface_hub fetches once (empty here).

Not served: ``POST .../paths-info/<rev>`` (``HfFileSystem.info`` asks it only with
``refresh`` or expanded info, which these reads never need) and everything else; such a
request is answered 404 and listed in :attr:`HubDouble.unknown`, which the tests check.

Revisions in a URL are quoted (``refs%2Fconvert%2Fparquet``, the parquet export), as
huggingface_hub writes them. Errors carry the Hub's ``X-Error-Code`` / ``X-Error-Message``:
a missing repository 404 ``RepoNotFound``, a missing revision 404 ``RevisionNotFound``, a
missing file 404 ``EntryNotFound``, a file of a gated repository (:attr:`HubDouble.gated`)
401 ``GatedRepo`` (what an unauthenticated client gets; its listing stays public, as on the
Hub), anything of a private repository (:attr:`HubDouble.private`) 401 ``RepoNotFound``. A
commit stays readable by its id after its branch moves on. Nothing is stored with Xet: listings hold no ``xetHash`` (so ``HfFileSystem`` never
hands a file to the ``hf_xet`` client) and the storage is plain HTTP. Every request is
recorded (:class:`Seen`). Started and stopped by the test (a context manager); it never talks to another address.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from s3_server import HOST, free_port

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_NOT_LFS = (".md", ".gitattributes", ".py", ".txt", ".json")  # kept in git, not LFS


@dataclass(frozen=True)
class Request:
    """One request the double answered: method, path (with the query), the ``Range`` header,
    the status and the bytes of body sent."""

    method: str
    path: str
    range: str
    status: int
    sent: int


@dataclass
class Seen:
    """Every request answered, in order (thread-safe)."""

    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def blob_reads(self, data: bytes) -> list[Request]:
        """The requests that read the LFS file holding ``data`` (its ``/blobs/<sha256>``)."""
        path = f"/blobs/{hashlib.sha256(data).hexdigest()}"
        with self.lock:
            return [r for r in self.requests if r.path == path]


@dataclass(frozen=True)
class Commit:
    """A revision's state: its commit id and files (path in the repository -> bytes)."""

    sha: str
    files: dict[str, bytes]
    date: str


def _blob_id(data: bytes) -> str:
    """git's id of a blob: sha1 of ``blob <size>\\0<data>``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - git's id


def _file_entry(path: str, data: bytes) -> dict:
    entry: dict = {"type": "file", "oid": _blob_id(data), "size": len(data), "path": path}
    if not path.endswith(_NOT_LFS):
        entry["lfs"] = {
            "oid": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "pointerSize": 134,
        }
    return entry


class HubDouble:
    """The Hub's API for the repositories committed to it, at ``url`` (``HF_ENDPOINT``);
    ``page_size``: entries per page of a tree listing (the Hub's: 1000, 50 expanded)."""

    def __init__(self, page_size: int = 1000) -> None:
        self.page_size = page_size
        self.repos: dict[str, dict[str, Commit]] = {}  # "datasets/org/name" -> rev -> commit
        self.history: dict[str, list[Commit]] = {}  # every commit, by repository
        self.blobs: dict[str, bytes] = {}  # sha256 -> bytes of the LFS files resolved
        self.gated: set[str] = set()  # "org/name" of gated dataset repositories
        self.private: set[str] = set()  # "org/name" of private ones (no token is ever sent)
        self.seen = Seen()
        self.unknown: list[str] = []  # requests for routes the double does not serve
        self.lock = threading.Lock()
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.server = ThreadingHTTPServer((HOST, self.port), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # -- content ---------------------------------------------------------------------------------
    def commit(self, repo_id: str, folder: Path, revision: str = "main") -> str:
        """Commit every file under ``folder`` (its paths relative to it) as the new state of
        the dataset ``repo_id``'s ``revision``; returns the commit id."""
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        key = f"datasets/{repo_id}"
        with self.lock:
            parent = self.repos.get(key, {}).get(revision)
            digest = hashlib.sha1((parent.sha if parent else "").encode())  # noqa: S324 - an id
            for rel, data in files.items():
                digest.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\0".encode())
            now = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
            sha = digest.hexdigest()
            self.repos.setdefault(key, {})[revision] = Commit(sha, files, now)
            self.history.setdefault(key, []).append(self.repos[key][revision])
        return sha

    def _lookup(self, key: str, revision: str) -> tuple[Commit | None, tuple[int, str, str]]:
        """The commit of ``revision`` (a branch or any commit's id), else the Hub's error:
        a private repository is, to a client without its token, 401 ``RepoNotFound``."""
        if key.split("/", 1)[1] in self.private:
            return None, (401, "RepoNotFound", "Invalid username or password.")
        with self.lock:
            revisions = self.repos.get(key)
            if revisions is None:
                return None, (404, "RepoNotFound", "Repository not found")
            commit = revisions.get(revision) or next(
                (c for c in self.history[key] if c.sha == revision), None
            )
        if commit is None:
            return None, (404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return commit, (200, "", "")

    # -- answers ---------------------------------------------------------------------------------
    def _info(self, key: str, commit: Commit) -> dict:
        org, name = key.split("/")[1:]
        return {
            "_id": hashlib.md5(key.encode()).hexdigest()[:24],  # noqa: S324 - an id
            "id": f"{org}/{name}",
            "author": org,
            "sha": commit.sha,
            "lastModified": commit.date,
            "createdAt": commit.date,
            "private": False,
            "gated": "auto" if f"{org}/{name}" in self.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [{"rfilename": p} for p in sorted(commit.files)],
        }

    def _entries(self, commit: Commit, path: str, recursive: bool, expand: bool) -> list | None:
        """A tree listing of the folder ``path`` ("" = the root): folders first, then files,
        each sorted; None when ``path`` is no folder."""
        prefix = f"{path}/" if path else ""
        below = {p: d for p, d in commit.files.items() if p.startswith(prefix)}
        if path and not below:
            return None
        folders: dict[str, list[str]] = {}
        for rel in below:
            parts = rel[len(prefix) :].split("/")
            for depth in range(1, len(parts)):
                folders.setdefault(prefix + "/".join(parts[:depth]), []).append(rel)
        files = [p for p in below if recursive or "/" not in p[len(prefix) :]]
        dirs = [d for d in folders if recursive or "/" not in d[len(prefix) :]]
        out = []
        for d in sorted(dirs):
            tree = hashlib.sha1("\0".join(sorted(folders[d])).encode())  # noqa: S324 - an id
            out.append({"type": "directory", "oid": tree.hexdigest(), "size": 0, "path": d})
        out += [_file_entry(p, commit.files[p]) for p in sorted(files)]
        if expand:
            last = {"id": commit.sha, "title": "Upload", "date": commit.date}
            out = [{**e, "lastCommit": last} for e in out]
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the Hub (every answer is sized)
            timeout = 30  # an idle connection is dropped (bounded)

            def log_message(self, *args: object) -> None:  # quiet
                return

            def _send(
                self, status: int, body: bytes, headers: dict[str, str], send_body: bool = True
            ) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if send_body and self.command != "HEAD":
                    self.wfile.write(body)
                sent = len(body) if self.command != "HEAD" else 0
                outer.seen.add(
                    Request(self.command, self.path, self.headers.get("Range", ""), status, sent)
                )

            def _json(self, status: int, value: object, headers: dict | None = None) -> None:
                body = json.dumps(value).encode()
                self._send(status, body, {"Content-Type": "application/json", **(headers or {})})

            def _error(self, status: int, code: str, message: str) -> None:
                headers = {"X-Error-Code": code, "X-Error-Message": message} if code else {}
                self._json(status, {"error": message}, headers)

            def _route(self) -> None:
                split = urlsplit(self.path)
                parts = split.path.strip("/").split("/")
                query = parse_qs(split.query)
                if parts[0] == "api" and len(parts) >= 4 and parts[1] == "datasets":
                    key = "/".join(parts[1:4])
                    self._api(key, parts[4:], split.path, query)
                elif len(parts) == 2 and parts[0] == "blobs":  # where LFS files redirect
                    self._blob(parts[1])
                elif parts == ["api", "agent-harnesses"]:  # huggingface_hub's registry (empty)
                    self._json(200, {"standardEnvVars": [], "harnesses": {}})
                elif len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
                    key = "/".join(parts[:3])
                    self._resolve(key, unquote(parts[4]), unquote("/".join(parts[5:])))
                else:
                    outer.unknown.append(f"{self.command} {self.path}")
                    self._error(404, "", "Not Found")

            def _api(self, key: str, rest: list[str], raw: str, query: dict) -> None:
                action = rest[0] if rest else ""
                revision = unquote(rest[1]) if len(rest) > 1 else "main"
                commit, (status, code, message) = outer._lookup(key, revision)
                if commit is None:
                    self._error(status, code, message)
                elif action in ("", "revision") and len(rest) <= 2:
                    self._json(200, outer._info(key, commit))
                elif action == "tree":
                    self._tree(commit, unquote("/".join(rest[2:])), raw, query)
                else:
                    outer.unknown.append(f"{self.command} {self.path}")
                    self._error(404, "", "Not Found")

            def _tree(self, commit: Commit, path: str, raw: str, query: dict) -> None:
                recursive = query.get("recursive", ["false"])[0].lower() == "true"
                expand = query.get("expand", ["false"])[0].lower() == "true"
                entries = outer._entries(commit, path, recursive, expand)
                if entries is None:
                    self._error(404, "EntryNotFound", f'{path} does not exist on "main"')
                    return
                size = min(outer.page_size, 50) if expand else outer.page_size
                start = int(query.get("cursor", ["0"])[0])
                page = entries[start : start + size]
                headers = {}
                if start + size < len(entries):
                    flags = f"recursive={str(recursive).lower()}&expand={str(expand).lower()}"
                    nxt = f"{outer.url}{raw}?{flags}&cursor={start + size}"
                    headers["Link"] = f'<{nxt}>; rel="next"'
                self._json(200, page, headers)

            def _resolve(self, key: str, revision: str, rel: str) -> None:
                commit, (status, code, message) = outer._lookup(key, revision)
                if commit is None:
                    self._error(status, code, message)
                    return
                repo_id = key.split("/", 1)[1]
                if repo_id in outer.gated:
                    self._error(
                        401,
                        "GatedRepo",
                        f"Access to dataset {repo_id} is restricted. You must have access to it "
                        "and be authenticated to access it. Please log in.",
                    )
                    return
                data = commit.files.get(rel)
                if data is None:
                    self._error(404, "EntryNotFound", "Entry not found")
                    return
                entry = _file_entry(rel, data)
                headers = {"X-Repo-Commit": commit.sha}
                if "lfs" not in entry:  # a file kept in git: its bytes, here
                    self._bytes(data, {**headers, "ETag": f'"{entry["oid"]}"'})
                    return
                # an LFS file: the Hub answers 302 to its storage (a CDN, Xet's CAS bridge)
                sha = entry["lfs"]["oid"]
                with outer.lock:
                    outer.blobs[sha] = data
                headers["X-Linked-Etag"] = f'"{sha}"'
                headers["X-Linked-Size"] = str(len(data))
                headers["ETag"] = f'"{sha}"'
                headers["Location"] = f"{outer.url}/blobs/{sha}"
                self._send(302, b"", headers)

            def _blob(self, sha: str) -> None:
                with outer.lock:
                    data = outer.blobs.get(sha)
                if data is None:
                    self._error(404, "", "NoSuchKey")
                    return
                self._bytes(data, {"ETag": f'"{sha}"'})

            def _bytes(self, data: bytes, headers: dict[str, str]) -> None:
                """``data``, or the part ``Range`` asks for (206; 416 past the end)."""
                headers = {
                    "Accept-Ranges": "bytes",
                    "Content-Type": "application/octet-stream",
                    **headers,
                }
                m = _RANGE.match(self.headers.get("Range", ""))
                if m and (m.group(1) or m.group(2)):
                    if m.group(1):
                        start = int(m.group(1))
                        end = min(int(m.group(2)), len(data) - 1) if m.group(2) else len(data) - 1
                    else:  # the last N bytes
                        start, end = max(0, len(data) - int(m.group(2))), len(data) - 1
                    if start >= len(data) or start > end:
                        headers["Content-Range"] = f"bytes */{len(data)}"
                        self._send(416, b"", headers)
                        return
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    self._send(206, data[start : end + 1], headers)
                    return
                self._send(200, data, headers)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._route()

            def do_HEAD(self) -> None:  # noqa: N802
                self._route()

            def do_POST(self) -> None:  # noqa: N802 - none is served: recorded as unknown
                self._route()

        return Handler

    def __enter__(self) -> HubDouble:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
