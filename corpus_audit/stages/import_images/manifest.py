"""What a source names, as read: :class:`Entry` and :class:`Source`, and the checks every layout's
reader shares (UTF-8 text and its SHA-256, a path kept inside the manifest's folder, integer
fields, one manifest record as an entry, JSON parsed with the line of an error)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import ManifestError, printable

KNOWN_COLUMNS = ("file", "prompt_id", "prompt", "model", "seed", "index")


@dataclass(frozen=True)
class Entry:
    """One image a source names, as read (before matching it to the study)."""

    source: Path  # the manifest, metadata.json or folder
    where: str  # "line 7", 'entry "17"' or the file's path in the folder: for messages
    line: int | None
    file: Path  # absolute
    model: str | None
    prompt_id: str | None = None
    prompt: str | None = None
    seed: int | None = None
    index: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, str] = field(
        default_factory=dict
    )  # BAFIS: family, variant, language, occupation


@dataclass
class Source:
    """One SOURCE argument, read."""

    path: Path
    layout: str
    sha256: str
    entries: list[Entry]


def normalise(text: str) -> str:
    """Whitespace normalisation for matching prompt texts: runs of whitespace -> one space."""
    return " ".join(str(text).split())


def _text(path: Path) -> tuple[str, str]:
    """The file's text and the SHA-256 of its bytes; not UTF-8 is an error naming the line."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ManifestError(
            f"{path}:{line}: not UTF-8 text (byte {exc.start} is {data[exc.start]:#04x}); save "
            "the manifest as UTF-8"
        ) from None
    return text, hashlib.sha256(data).hexdigest()


def _inside(folder: Path, rel: str, where: str) -> Path:
    """``rel`` resolved against ``folder``; a path leaving it, a NUL in it or a symlink loop
    is an error (``where`` names it)."""
    if not rel or not str(rel).strip():
        raise ManifestError(f"{where}: empty 'file'")
    if "\x00" in str(rel):
        raise ManifestError(f"{where}: file {printable(str(rel))!r} contains a NUL character")
    given = Path(str(rel).strip())
    if given.is_absolute() or ".." in given.parts:
        raise ManifestError(
            f"{where}: file {str(rel)!r} leaves the manifest's folder (give a path relative "
            "to it, without '..')"
        )
    try:
        full = (folder / given).resolve()
    except (RuntimeError, OSError, ValueError) as exc:  # RuntimeError: a symlink loop
        raise ManifestError(
            f"{where}: file {printable(str(rel))!r} cannot be resolved ({printable(str(exc))})"
        ) from None
    if not full.is_relative_to(_resolved(folder)):  # a symlink out of the folder
        raise ManifestError(f"{where}: file {str(rel)!r} resolves outside the manifest's folder")
    return full


@functools.lru_cache(maxsize=64)
def _resolved(folder: Path) -> Path:
    return folder.resolve()


#: the largest ``index`` (stored as int32) and ``seed`` (int64) an import accepts
MAX_VALUES = {"index": 2**31 - 1, "seed": 2**63 - 1}


def _int(value: Any, key: str, where: str) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ManifestError(f"{where}: {key} must be an integer, got {value!r}")
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise ManifestError(f"{where}: {key} must be an integer, got {value!r}") from None
    if number < 0:
        raise ManifestError(f"{where}: {key} must be >= 0, got {number}")
    if number > MAX_VALUES.get(key, 2**63 - 1):
        raise ManifestError(
            f"{where}: {key} must be <= {MAX_VALUES.get(key, 2**63 - 1):,}, got {number}"
        )
    return number


def _entry(path: Path, line: int, record: dict[str, Any], model: str | None) -> Entry:
    """One manifest record (CSV row or JSONL object) as an :class:`Entry`."""
    where = f"{path}:{line}"
    record = {str(k).strip(): v for k, v in record.items() if k is not None}
    file = record.get("file")
    if file is None or not str(file).strip():
        raise ManifestError(f"{where}: no 'file' (columns: file, prompt_id or prompt, model)")
    prompt_id = _str_or_none(record.get("prompt_id"))
    prompt = _str_or_none(record.get("prompt"))
    if prompt_id is None and prompt is None:
        raise ManifestError(f"{where}: give 'prompt_id' or 'prompt'")
    row_model = model or _str_or_none(record.get("model"))
    if not row_model:
        raise ManifestError(f"{where}: no 'model' (add the column, or give --model NAME)")
    return Entry(
        source=path,
        where=where,
        line=line,
        file=_inside(path.parent, str(file), where),
        model=row_model,
        prompt_id=prompt_id,
        prompt=prompt,
        seed=_int(record.get("seed"), "seed", where),
        index=_int(record.get("index"), "index", where),
        metadata={k: v for k, v in record.items() if k not in KNOWN_COLUMNS},
    )


def _str_or_none(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _parse_json(path: Path, first_line: int, text: str) -> Any:
    """``text`` (starting at line ``first_line`` of ``path``) parsed as JSON; invalid JSON is a
    :class:`ManifestError` naming the file and the line of the error (or saying it is nested
    too deeply to parse)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = first_line + exc.lineno - 1
        raise ManifestError(f"{path}:{line}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ManifestError(f"{path}:{first_line}: JSON nested too deeply") from None
