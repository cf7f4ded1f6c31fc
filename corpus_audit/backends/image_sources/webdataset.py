"""``kind = "webdataset"``: a ``.tar`` shard, a folder of shards or a glob.

Members are grouped by key (webdataset convention: the path up to the first dot of the
basename); a group's first image member is the record, its ``.json`` gives caption_id / url /
key. Shards are read in stream mode: nothing is extracted to disk, and members with absolute or
``..`` paths are skipped as ``unsafe_name``.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_audit.backends import storage
from corpus_audit.backends.image_sources.base import (
    IMAGE_EXTS,
    MAX_MEMBER_BYTES,
    PlainSource,
    Record,
    Skip,
    SourceContext,
    SourceOptions,
    Unit,
    load_meta,
    matching_files,
    safe_member_name,
    short_error,
    with_meta,
)
from corpus_audit.core.errors import CorpusAuditError

SHARD_PATTERNS = ("*.tar", "*.tar.gz", "*.tgz")


def split_member(name: str) -> tuple[str, str]:
    """webdataset convention: key = path up to the first dot of the basename; ext = the rest."""
    parent, _, base = name.rpartition("/")
    stem, dot, rest = base.partition(".")
    key = f"{parent}/{stem}" if parent else stem
    return key, (dot + rest).lower()


def _group_record(path: Path, key: str, group: dict[str, Any]) -> Iterator[Record | Skip]:
    """The record of one key's members (``{ext: (bytes, member name)}``)."""
    images = [(ext, data, name) for ext, (data, name) in group.items() if ext in IMAGE_EXTS]
    meta: dict[str, Any] = {}
    if ".json" in group:
        try:
            meta = load_meta(group[".json"][0])
        except ValueError as exc:  # bad JSON or bad UTF-8
            name = str(path).rstrip("/").rsplit("/", 1)[-1]
            yield Skip(f"{name}:{group['.json'][1]}", "bad_metadata", str(exc)[:200])
    if not images:
        return
    ext, data, name = images[0]
    yield with_meta(Record(f"{path}:{name}", ext, data=data, key=key.rsplit("/", 1)[-1]), meta)


def _member_skip(path: Path, member: tarfile.TarInfo) -> Skip | None:
    """Why a member is not read (unsafe name, not a file, too large); None to read it.
    Folder members with safe names are passed over before this is asked."""
    name = member.name
    if safe_member_name(name) is None:
        return Skip(f"{path}:{name}", "unsafe_name", "absolute or '..' member path")
    if not member.isfile():
        return Skip(f"{path}:{name}", "not_a_file", f"tar member type {member.type!r}")
    if member.size > MAX_MEMBER_BYTES:
        return Skip(f"{path}:{name}", "too_large", f"{member.size} bytes")
    return None


def _open_tar(path: Path | str) -> tarfile.TarFile:
    """A tar in stream mode: a local file, or a store's URL read in 8 MiB range requests."""
    if isinstance(path, str):
        return tarfile.open(fileobj=storage.open_input(path, stream=True), mode="r|*")
    return tarfile.open(path, mode="r|*")


def iter_tar(path: Path | str) -> Iterator[Record | Skip]:
    """Records of one webdataset shard, read in stream mode; nothing is extracted to disk."""
    group_key: str | None = None
    group: dict[str, Any] = {}
    try:
        with _open_tar(path) as tar:
            for member in tar:
                if member.isdir() and safe_member_name(member.name) is not None:
                    continue
                skip = _member_skip(path, member)
                if skip is not None:
                    yield skip
                    continue
                key, ext = split_member(member.name)
                if key != group_key:
                    if group_key is not None:
                        yield from _group_record(path, group_key, group)
                    group_key, group = key, {}
                if ext in IMAGE_EXTS or ext in {".json", ".txt"}:
                    fh = tar.extractfile(member)
                    group[ext] = (fh.read() if fh is not None else b"", member.name)
            if group_key is not None:
                yield from _group_record(path, group_key, group)
    except (tarfile.TarError, OSError, EOFError, CorpusAuditError) as exc:
        yield Skip(str(path), "unreadable_shard", short_error(exc))


class WebDatasetSource(PlainSource):
    kind = "webdataset"
    options = SourceOptions

    def units(self, ctx: SourceContext, options: SourceOptions) -> list[Unit]:
        return [shard_unit(p) for p in matching_files(ctx, options, SHARD_PATTERNS)]


def shard_unit(path: Path | str) -> Unit:
    return Unit(path, lambda: iter_tar(path))
