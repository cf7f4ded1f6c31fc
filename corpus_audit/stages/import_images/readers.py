"""The readers of the four layouts (pure functions of the files): a CSV/TSV manifest, a JSONL
manifest, the BAFIS dataset's ``metadata.json`` and a folder per prompt. Each returns a
:class:`~corpus_audit.stages.import_images.manifest.Source`; :mod:`.layouts` registers them."""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import re
from collections.abc import Iterable
from pathlib import Path

from corpus_audit.backends.import_remote import IMAGE_SUFFIXES
from corpus_audit.core.errors import ManifestError
from corpus_audit.stages.import_images.manifest import (
    Entry,
    Source,
    _entry,
    _inside,
    _int,
    _parse_json,
    _str_or_none,
    _text,
)


def unterminated_quote(text: str, delimiter: str) -> int | None:
    """The line (1-based) where a quoted field that is never closed starts, or None.

    :mod:`csv`'s reader (default dialect, ``strict`` off) takes such a field to the end of the
    file without a word, which then shows as a baffling error on a later line. The field is
    always in the file's last record, so the reader finds where that record starts (in C) and
    :func:`_open_quote` follows only that record, character by character.
    """
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    start = last = 1
    try:
        for _ in reader:
            last, start = start, reader.line_num + 1
    except csv.Error:
        return None  # another fault: the reading itself reports it
    lines = itertools.islice(io.StringIO(text, newline=""), last - 1, None)
    return _open_quote(lines, last, delimiter)


def _open_quote(lines: Iterable[str], first: int, delimiter: str) -> int | None:
    """The line of a quoted field left open at the end of ``lines`` (numbered from ``first``,
    starting at the start of a record), or None. As :mod:`csv` reads: a field is quoted when
    its first character is ``"``; inside it ``""`` is a quote and line breaks are text; a
    ``"`` not followed by another closes it (a character after that is text)."""
    quoted_at: int | None = None  # the line of the open quoted field
    state = "start"  # start of a field | in an unquoted "field" | "quoted" | "quote" seen
    for number, line in enumerate(lines, start=first):
        for ch in line:
            if state == "start":
                if ch == '"':
                    state, quoted_at = "quoted", number
                elif ch not in (delimiter, "\n", "\r"):
                    state = "field"
            elif state == "field":  # a quote in an unquoted field is text
                if ch in (delimiter, "\n", "\r"):
                    state = "start"
            elif state == "quoted":
                if ch == '"':
                    state = "quote"
            elif ch == '"':  # "" inside a quoted field
                state = "quoted"
            else:
                quoted_at = None
                state = "start" if ch in (delimiter, "\n", "\r") else "field"
        if state == "field":
            state = "start"  # csv ends the record at the end of the line
    return quoted_at if state == "quoted" else None


def read_csv(path: Path, model: str | None = None) -> Source:
    """A CSV/TSV manifest (header row; comma or tab by the suffix). A quoted field without
    its closing quote is an error naming the line where it starts."""
    text, sha = _text(path)
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    opened = unterminated_quote(text, delimiter)
    if opened is not None:
        raise ManifestError(
            f"{path}:{opened}: unterminated quote: the quoted field that starts on this line "
            'has no closing " (add it, or write a quote inside a field as "")'
        )
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    if not reader.fieldnames:
        raise ManifestError(f"{path}:1: empty manifest (no header row)")
    entries = []
    try:
        for record in reader:
            if None in record:
                raise ManifestError(f"{path}:{reader.line_num}: more fields than the header has")
            if not any((v or "").strip() for v in record.values()):
                continue  # a blank line
            entries.append(_entry(path, reader.line_num, record, model))
    except csv.Error as exc:
        raise ManifestError(f"{path}:{reader.line_num}: bad CSV: {exc}") from None
    return Source(path, "csv", sha, entries)


def read_jsonl(path: Path, model: str | None = None) -> Source:
    """A JSONL manifest: one JSON object per line (blank lines skipped)."""
    text, sha = _text(path)
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        record = _parse_json(path, number, line)
        if not isinstance(record, dict):
            raise ManifestError(
                f"{path}:{number}: expected a JSON object, got {type(record).__name__}"
            )
        entries.append(_entry(path, number, record, model))
    return Source(path, "jsonl", sha, entries)


_BAFIS_KEY = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*:\s*\{', re.M)
_BAFIS_GROUP = re.compile(r"^(?P<family>[a-z0-9]+)_occupations_(?P<variant>\w+)$")


def read_bafis(path: Path, model: str | None = None) -> Source:
    """The BAFIS dataset's ``metadata.json``: ``{key: {occupation, model, prompt_group,
    language, prompt}}``, the image of ``key`` being ``<key>.png`` beside it."""
    text, sha = _text(path)
    data = _parse_json(path, 1, text)
    if not isinstance(data, dict):
        raise ManifestError(
            f"{path}:1: expected a JSON object of entries (the BAFIS metadata.json)"
        )
    lines = {m.group(1): text.count("\n", 0, m.start()) + 1 for m in _BAFIS_KEY.finditer(text)}
    entries = []
    for key, meta in data.items():
        line = lines.get(key)
        where = f"{path}:{line}" if line else f'{path}: entry "{key}"'
        if not isinstance(meta, dict):
            raise ManifestError(f"{where}: entry {key!r} is not an object")
        group = str(meta.get("prompt_group") or "")
        hints = {
            "occupation": str(meta.get("occupation") or ""),
            "language": str(meta.get("language") or ""),
        }
        m = _BAFIS_GROUP.match(group)
        if m:
            hints.update(family=m.group("family"), variant=m.group("variant"))
        entry_model = model or _str_or_none(meta.get("model"))
        if not entry_model:
            raise ManifestError(f"{where}: entry {key!r} has no 'model' (or give --model NAME)")
        prompt = _str_or_none(meta.get("prompt"))
        if prompt is None and not m:
            raise ManifestError(f"{where}: entry {key!r} has no 'prompt' and no known prompt_group")
        name = str(meta.get("file") or f"{key}.png")
        entries.append(
            Entry(
                source=path,
                where=where,
                line=line,
                file=_inside(path.parent, name, where),
                model=entry_model,
                prompt=prompt,
                index=None,
                metadata={"bafis_key": key, **{k: v for k, v in meta.items() if k != "prompt"}},
                hints={k: v for k, v in hints.items() if v},
            )
        )
    return Source(path, "bafis", sha, entries)


def read_folder(root: Path, model: str | None = None) -> Source:
    """``<root>/<prompt text>/<n>.<ext>``: one folder per prompt, named by its text."""
    if not model:
        raise ManifestError(
            f"{root}: a folder of <prompt>/<n>.png names no model: give --model NAME"
        )
    entries = []
    listing = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = sorted(
            (f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES),
            key=lambda f: (not f.stem.isdigit(), int(f.stem) if f.stem.isdigit() else 0, f.name),
        )
        for order, f in enumerate(files):
            rel = f"{folder.name}/{f.name}"
            listing.append(rel)
            where = f"{root}/{rel}"
            index = _int(f.stem, "index", where) if f.stem.isdigit() else order
            entries.append(
                Entry(
                    source=root,
                    where=where,
                    line=None,
                    file=_inside(root, rel, where),  # a symlink out of the folder is refused
                    model=model,
                    prompt=folder.name,
                    index=index,
                    metadata={"folder": folder.name},
                )
            )
    if not entries:
        raise ManifestError(f"{root}: no <prompt>/<n>.png image files in this folder")
    sha = hashlib.sha256("\n".join(listing).encode()).hexdigest()
    return Source(root, "folder", sha, entries)
