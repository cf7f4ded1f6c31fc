"""``corpus-audit import-images``: another model's images, registered as a study's generated images.

A user with a folder of images from DALL-E 3, Midjourney, an SDXL on a cluster or any other
model, and the prompt of each file, registers them with::

    corpus-audit import-images DIR SOURCE... [--model NAME] [--strict]

Each SOURCE is one of three layouts (:func:`read_source` tells them apart):

- a **manifest**, CSV (``.csv``/``.tsv``) or JSONL (``.jsonl``/``.ndjson``): one image per
  row/line with ``file`` (relative to the manifest's folder), ``prompt_id`` or ``prompt`` (the
  text; matched to the study's prompts exactly after whitespace normalisation), ``model``
  (or ``--model``), optional ``seed`` and ``index``; every other column is kept as metadata;
- a **folder per prompt** (DALL-Eval and other tools): ``<root>/<prompt text>/<n>.png``; the
  folder name is the prompt text, ``n`` the index; needs ``--model``;
- the **BAFIS dataset**: a folder with ``metadata.json`` (``{"0": {"occupation", "model",
  "prompt_group", "language", "prompt"}, ...}``, files ``<key>.png`` beside it), or that file.

Imported images become ``images`` rows with ``source = 'generated'`` (``origin =
'import:<import_id>'``), so ``label``, ``analyze``, the PST stages, ``categories``, ``battles``
and the report use them as they use the images ``generate`` made. Their provenance is in
``image_imports`` (source path and SHA-256, layout, time) and ``imported_images`` (the file,
its SHA-256 and size, manifest line, index, metadata).

Checks, all before anything is written: a bad source (not UTF-8, bad JSON, a missing column, a
prompt the study does not know, a path leaving the manifest's folder, the same file or the same
(model, prompt, index) twice) is a :class:`~corpus_audit.core.errors.ManifestError` naming the file
and line, and the study is left unchanged. A file that is missing, unreadable or not an image is
a named drop reason (``import_skips``), not an error (``--strict`` makes it one). Without
``--strict`` only the header of a file is opened; ``--strict`` decodes every file in full, so
one cut short (a valid header, the rest missing) is ``unreadable`` too. Every file is
hashed: the image id is ``imp:<model-slug>:<prompt_id>:<index>:<sha256[:16]>``, so importing the same
source again adds nothing, and a file whose bytes changed since it was imported is reported
(``changed_since_import``) and left as it was, never silently relabelled. Model names are kept
as given (case-sensitive), but two names with one slug (``DALL-E-3`` and ``dall-e-3``, in one
import or the study and a new import) are refused: their images would share ids. An image
whose bytes are already those of an image of another prompt (the same file imported again for
another prompt, or a copy) is imported and named (``same_image_other_prompt``, with the first
image); ``--strict`` refuses it. All rows of one run go in one transaction.

Imported images have no recipe the study can replay: ``regenerate`` and FairCritic refuse them
with a message.

The readers (:func:`read_source` and its helpers) and :func:`resolve_entries` are pure
functions of the files and the study's prompt list; :func:`import_images` does the writing.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import itertools
import json
import os
import re
import stat
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from corpus_audit.backends.generators import model_slug
from corpus_audit.commands.import_remote import (  # the layouts' names, shared
    BAFIS_METADATA,
    IMAGE_SUFFIXES,
    mirror_source,
)
from corpus_audit.core.errors import ManifestError, printable
from corpus_audit.core.imagefile import DecodeBudget, UnreadableImage, check_whole, image_size
from corpus_audit.core.kinds import prompt_stage
from corpus_audit.core.store import StageRun, Study
from corpus_audit.core.urls import credentials_refused, has_credentials, is_url
from corpus_audit.core.versions import package_versions

LAYOUTS = ("csv", "jsonl", "folder", "bafis")
KNOWN_COLUMNS = ("file", "prompt_id", "prompt", "model", "seed", "index")
_HASHERS = max(1, min(8, (os.cpu_count() or 2)))
SAME_IMAGE = "same_image_other_prompt"  # the note on an image whose bytes another prompt has
SHOWN_TWINS = 10  # such notes printed one by one (then a count)


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


@dataclass(frozen=True)
class StudyPrompt:
    prompt_id: str
    text: str
    occupation: str | None
    family: str | None = None
    variant: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Item:
    """An entry matched to a study prompt: what will be imported."""

    entry: Entry
    model: str
    prompt: StudyPrompt
    index: int


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


# -- readers (pure) -------------------------------------------------------------------------
def read_source(path: Path | str, model: str | None = None) -> Source:
    """Read one SOURCE: a manifest file, a BAFIS folder/metadata.json or a folder per prompt."""
    p = Path(path).expanduser().resolve()
    if p.is_dir():
        if (p / BAFIS_METADATA).is_file():
            return read_bafis(p / BAFIS_METADATA, model)
        return read_folder(p, model)
    if not p.is_file():
        raise ManifestError(f"{printable(p)}: no such manifest file or folder")
    name = p.name.lower()
    if name == BAFIS_METADATA or name.endswith(".json") and not name.endswith(".jsonl"):
        return read_bafis(p, model)
    if name.endswith((".jsonl", ".ndjson")):
        return read_jsonl(p, model)
    if name.endswith((".csv", ".tsv")):
        return read_csv(p, model)
    raise ManifestError(
        f"{p}: unknown manifest type (give a .csv, .tsv, .jsonl, a BAFIS metadata.json, or a "
        "folder of <prompt>/<n>.png)"
    )


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


# -- matching to the study (pure) -----------------------------------------------------------
def study_prompts(study: Study) -> list[StudyPrompt]:
    """The prompts an import can name: ``prompts`` (with their MAGBIG/BAFIS categories) and,
    in a PST study, ``pst_prompts``."""
    rows = study.con.execute(
        "SELECT p.prompt_id, p.text, p.occupation, c.family, c.variant, c.language "
        "FROM prompts p LEFT JOIN prompt_categories c USING (prompt_id) ORDER BY p.prompt_id"
    ).fetchall()
    out = [StudyPrompt(*r) for r in rows]
    if study.table_exists("pst_prompts"):
        out += [
            StudyPrompt(pid, text, occ)
            for pid, text, occ in study.con.execute(
                "SELECT prompt_id, text, occupation FROM pst_prompts ORDER BY prompt_id"
            ).fetchall()
        ]
    return out


def resolve_entries(entries: Sequence[Entry], prompts: Sequence[StudyPrompt]) -> list[Item]:
    """Match every entry to one study prompt and give it its index; the first problem is a
    :class:`ManifestError` naming the entry's file and line."""
    by_id = {p.prompt_id: p for p in prompts}
    by_text: dict[str, list[StudyPrompt]] = {}
    for p in prompts:
        by_text.setdefault(normalise(p.text), []).append(p)
    items: list[Item] = []
    seen_files: dict[Path, str] = {}
    seen_keys: dict[tuple[str, str, int], str] = {}
    counters: dict[tuple[str, str], int] = {}
    for e in entries:
        prompt = _match(e, by_id, by_text, prompts)
        if e.file in seen_files:
            raise ManifestError(
                f"{e.where}: file {e.file.name!r} is listed twice (first at {seen_files[e.file]})"
            )
        seen_files[e.file] = e.where
        model = str(e.model)
        if e.index is None:
            index = counters.get((model, prompt.prompt_id), 0)
            while (model, prompt.prompt_id, index) in seen_keys:
                index += 1
        else:
            index = e.index
        key = (model, prompt.prompt_id, index)
        if key in seen_keys:
            raise ManifestError(
                f"{e.where}: image {index} of model {model!r} for prompt {prompt.prompt_id!r} is "
                f"listed twice (first at {seen_keys[key]})"
            )
        seen_keys[key] = e.where
        counters[(model, prompt.prompt_id)] = index + 1
        items.append(Item(e, model, prompt, index))
    return items


def _match(
    e: Entry,
    by_id: dict[str, StudyPrompt],
    by_text: dict[str, list[StudyPrompt]],
    prompts: Sequence[StudyPrompt],
) -> StudyPrompt:
    if e.prompt_id is not None:
        found = by_id.get(e.prompt_id)
        if found is None:
            occupation = e.prompt_id.rsplit(":", 1)[-1]
            why = (
                ""
                if any(p.occupation == occupation for p in prompts)
                else f": no prompt of the study is for the occupation {occupation!r} "
                "(lexicon.occupations, lexicon.prompts)"
            )
            raise ManifestError(
                f"{e.where}: prompt_id {e.prompt_id!r} is not a prompt of the study{why}"
            )
        if e.prompt is not None and normalise(e.prompt) != normalise(found.text):
            raise ManifestError(
                f"{e.where}: prompt {e.prompt!r} differs from the text of {e.prompt_id!r} "
                f"({found.text!r})"
            )
        return found
    candidates = list(by_text.get(normalise(e.prompt or ""), []))
    if not candidates and e.prompt is not None and "_" in e.prompt:  # folder names: _ for space
        candidates = list(by_text.get(normalise(e.prompt.replace("_", " ")), []))
    if not candidates and e.prompt is None and e.hints.get("family"):
        candidates = [
            p
            for p in prompts
            if (p.family, p.variant, p.language, p.occupation)
            == tuple(e.hints.get(k) for k in ("family", "variant", "language", "occupation"))
        ]
    if len(candidates) > 1 and e.hints:
        narrowed = [
            p
            for p in candidates
            if all(
                getattr(p, k) in (None, e.hints[k])
                for k in ("family", "variant", "language", "occupation")
                if k in e.hints
            )
        ]
        candidates = narrowed or candidates
    if not candidates:
        shown = e.prompt if e.prompt is not None else e.hints
        raise ManifestError(
            f"{e.where}: prompt {shown!r} is not a prompt of the study (texts are matched "
            "exactly after whitespace normalisation; `select`, `prompts` or `pst_prompts` "
            "writes them)"
        )
    if len(candidates) > 1:
        ids = ", ".join(p.prompt_id for p in candidates[:4])
        raise ManifestError(
            f"{e.where}: prompt {e.prompt!r} matches several prompts of the study ({ids}): "
            "give prompt_id"
        )
    return candidates[0]


# -- files ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Checked:
    """A file read and hashed: ``reason`` is None when it is a usable image."""

    sha256: str | None
    n_bytes: int
    width: int | None
    height: int | None
    reason: str | None  # missing_file | unreadable | not_an_image
    detail: str | None


def check_file(
    path: Path,
    max_pixels: int,
    *,
    whole: bool = False,
    budget: DecodeBudget | None = None,
    stop: threading.Event | None = None,
) -> Checked:
    """Hash (streaming) and open (header only) one image file. Anything but a regular file (a
    FIFO, a device, a socket, a folder) is refused by its type before a byte is read: it is
    opened without blocking and checked with ``fstat`` (a FIFO would block a read forever). The
    file is hashed in blocks of :data:`_BLOCK` bytes, so a 1 GB file costs one block of memory
    per hashing thread, not 1 GB.

    ``whole`` (``--strict``): every byte is checked too, by a decode of the whole image
    (:func:`~corpus_audit.core.imagefile.check_whole`, full-size pixels bounded by ``budget``):
    a file cut short keeps a valid header and passes the header check alone.

    ``stop``: once set, the hashing ends at the next block (:class:`_Stopped`), so that Ctrl-C
    or SIGTERM does not wait for a huge file to be read to its end."""
    size = functools.partial(check_whole, budget=budget) if whole else image_size
    try:
        sha, n_bytes, head, same = _hash_regular(path, stop, _header_verdict)
    except _NotAnImage as exc:  # told by its first block: the rest is never read
        return Checked(None, exc.size, None, None, "not_an_image", exc.detail)
    except _NotRegular as exc:
        return Checked(None, 0, None, None, "unreadable", f"not a regular file ({exc})")
    except FileNotFoundError:
        return Checked(None, 0, None, None, "missing_file", "no such file")
    except OSError as exc:
        return Checked(None, 0, None, None, "unreadable", f"cannot read: {exc.strerror or exc}")
    try:
        if n_bytes <= len(head):  # the whole file was kept: the header of exactly these bytes
            width, height = size(head, max_pixels=max_pixels)
        elif same():  # a larger file: its header read again, from the file just hashed
            width, height = size(path, max_pixels=max_pixels)
        else:
            return Checked(sha, n_bytes, None, None, "unreadable", "changed while it was read")
    except UnreadableImage as exc:
        reason = "not_an_image" if "not a recognised image" in exc.detail else "unreadable"
        return Checked(sha, n_bytes, None, None, reason, exc.detail)
    return Checked(sha, n_bytes, width, height, None, None)


_BLOCK = 1 << 20  # bytes hashed at a time; files up to 4 blocks are also kept for their header
_KEEP = 4 * _BLOCK


class _NotRegular(Exception):
    pass


class _NotAnImage(Exception):
    """A file whose first block is no image format Pillow knows (:func:`_header_verdict`)."""

    def __init__(self, detail: str, size: int) -> None:
        super().__init__(detail)
        self.detail, self.size = detail, size


def _header_verdict(first: bytes) -> str | None:
    """Why a file beginning with ``first`` (its first block, :data:`_BLOCK` bytes) is not an
    image, or None when it may be one (a header Pillow recognises, or one it cannot tell from
    these bytes alone). Checked before the rest of a larger file is read, so a 1 GB file that
    is no image costs one block, not a full read (issue 33, M10)."""
    try:
        image_size(first)
    except UnreadableImage as exc:
        if "not a recognised image" in exc.detail:
            return exc.detail
    return None


class _Stopped(Exception):
    """The command is unwinding (Ctrl-C, SIGTERM, an error): a hashing thread stops."""


def _check_all(
    check: Callable[[Any, threading.Event], Checked], items: Sequence[Any]
) -> list[Checked]:
    """``check(item, stop)`` for every item on :data:`_HASHERS` threads, in order. When the
    calling thread unwinds (Ctrl-C, SIGTERM), the files not started are cancelled and the ones
    being hashed stop at their next block: the command ends in well under a second, not when
    every file has been read (issue 33, High 3)."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=_HASHERS)  # hashing releases the GIL
    try:
        return list(pool.map(lambda item: check(item, stop), items))
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _hash_regular(
    path: Path,
    stop: threading.Event | None = None,
    verdict: Callable[[bytes], str | None] | None = None,
) -> tuple[str, int, bytes, Any]:
    """(sha256, size, the first :data:`_KEEP` bytes, ``same()``) of ``path`` if it is a
    regular file (symlinks followed), else :class:`_NotRegular` naming its type. Opened with
    ``O_NONBLOCK`` so that opening a FIFO does not wait for a writer; ``same()`` says whether
    ``path`` is still the file that was hashed (same device and inode). ``verdict`` sees the
    first block of a file longer than one block: a reason it returns ends the read there
    (:class:`_NotAnImage`)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO" if stat.S_ISFIFO(mode)
                else "a folder" if stat.S_ISDIR(mode)
                else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a file"
            )  # fmt: skip
            raise _NotRegular(kind)
        digest = hashlib.sha256()
        head = bytearray()
        total = 0
        with os.fdopen(fd, "rb", closefd=False) as fh:
            while block := fh.read(_BLOCK):
                if stop is not None and stop.is_set():
                    raise _Stopped
                if total == 0 and verdict is not None and len(block) < st.st_size:
                    reason = verdict(block)
                    if reason is not None:
                        raise _NotAnImage(reason, st.st_size)
                digest.update(block)
                total += len(block)
                if len(head) < _KEEP:
                    head += block[: _KEEP - len(head)]
    finally:
        os.close(fd)

    def same() -> bool:
        try:
            now = os.stat(path)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino) and stat.S_ISREG(now.st_mode)

    return digest.hexdigest(), total, bytes(head), same


def image_id(model: str, prompt_id: str, index: int, sha256: str) -> str:
    """The id of an imported image: model, prompt, index and the file's bytes (two images of
    one prompt with the same bytes are two images, not one)."""
    return f"imp:{model_slug(model)}:{prompt_id}:{index}:{sha256[:16]}"


# -- the command ----------------------------------------------------------------------------
def import_images(
    study: Study,
    sources: Sequence[Path | str],
    *,
    model: str | None = None,
    strict: bool = False,
) -> StageRun:
    """Import the images of ``sources`` (see the module docstring); returns the run's counts.

    Nothing is written when a source is bad (:class:`ManifestError`), nor, with ``strict``,
    when any file is missing, unreadable or not an image.
    """
    run = StageRun("import-images")
    read = _read_sources(study, sources, model)
    prompts = study_prompts(study)
    if not prompts:
        raise ManifestError(
            f"{study.root}: the study has no prompts yet: run `corpus-audit "
            f"{prompt_stage(study.config)} {study.root}` before importing images"
        )
    matched = resolve_entries([e for s in read for e in s.entries], prompts)
    _refuse_generated_names(study, matched)
    _refuse_colliding_names(study, matched)
    plans = _plans(study, run, read, matched, model, strict)
    if strict:
        _refuse_any_skip(plans)
    now = datetime.now(UTC).replace(tzinfo=None)
    with study.transaction() as con:
        for p in plans:
            _write(con, p, now)
    _count(run, plans)
    models = sorted({i.model for i in matched})
    run.messages.append(
        f"imported images are source = 'generated' rows of model(s) {', '.join(models)}; run "
        "`corpus-audit label` next (they cannot be regenerated: no recipe is known)"
    )
    if run.rows_out == 0:
        run.skipped = True
    return run


def _read_sources(study: Study, sources: Sequence[Path | str], model: str | None) -> list:
    """Every source read (a manifest on a store mirrored into the study first); a source URL
    with credentials is refused before any request, and never quoted."""
    secret = [str(i + 1) for i, s in enumerate(sources) if has_credentials(str(s))]
    if secret:
        raise ManifestError(credentials_refused([f"source {n}" for n in secret], "import-images"))
    sources = [
        mirror_source(study, str(s), read_source, model) if is_url(str(s)) else s for s in sources
    ]
    return [read_source(s, model) for s in sources]


def _plans(
    study: Study, run: StageRun, read: list, matched: list[Item], model: str | None, strict: bool
) -> list[dict]:
    """Every file checked (decoded whole with ``strict``) and each source's plan of rows."""
    by_source: dict[Path, list[Item]] = {}
    for item in matched:
        by_source.setdefault(item.entry.source, []).append(item)
    max_pixels = study.config.images.max_pixels
    # --strict decodes every file: the threads share one budget of full-size pixels
    budget = DecodeBudget(max_pixels) if strict else None

    def check(item: Item, stop: threading.Event) -> Checked:
        return check_file(item.entry.file, max_pixels, whole=strict, budget=budget, stop=stop)

    checked = _check_all(check, matched)
    results = dict(zip((id(i) for i in matched), checked, strict=True))
    known = _known_files(study, {str(i.entry.file) for i in matched})
    first_of = _known_bytes(study, {c.sha256 for c in checked if c.sha256})
    return [
        _plan(study, run, source, by_source.get(source.path, []), results, known, first_of, model)
        for source in read
    ]


def _refuse_any_skip(plans: list[dict]) -> None:
    """``--strict``: a file skipped (but for one changed since its import) or a picture
    imported for two prompts refuses the whole import."""
    bad = [s for p in plans for s in p["skips"] if s[4] != "changed_since_import"]
    if bad:
        _iid, where, _line, file, reason, detail = bad[0]
        raise ManifestError(f"{where}: {reason}: {file} ({detail}); nothing imported (--strict)")
    twins = [t for p in plans for t in p["twins"]]
    if twins:
        raise ManifestError(f"{twins[0]}; nothing imported (--strict)")


def _count(run: StageRun, plans: list[dict]) -> None:
    """The run's counts, drops, per-source summary and the twins' messages."""
    for p in plans:
        run.rows_in += p["n_items"]
        run.rows_out += len(p["images"])
        for _iid, where, _line, file, reason, detail in p["skips"]:
            run.drop(reason)
            run.messages.append(f"{where}: {reason}: {file}" + (f" ({detail})" if detail else ""))
        run.summary.append(
            {"source": p["source"].path.name, "layout": p["source"].layout, "entries": p["n_items"],
             "added": len(p["images"]), "already_imported": p["n_present"], "dropped": len(p["skips"])}
        )  # fmt: skip
    twins = [t for p in plans for t in p["twins"]]
    if twins:
        run.messages.append(
            f"{len(twins)} imported image(s) have the bytes of an image of another prompt (one "
            "picture counted for two prompts: check the manifest; --strict refuses them):"
        )
        run.messages += twins[:SHOWN_TWINS]
        if len(twins) > SHOWN_TWINS:
            run.messages.append(f"... and {len(twins) - SHOWN_TWINS} more")


def _refuse_generated_names(study: Study, items: Sequence[Item]) -> None:
    """An imported model named like one of ``generate.models`` (case aside) would be pooled
    with the images the study generates: refused, one line naming the model and the entry."""
    generated = {m.casefold(): m for m in study.config.generate.models}
    for item in items:
        clash = generated.get(item.model.casefold())
        if clash is not None:
            raise ManifestError(
                f"{item.entry.where}: model {printable(item.model)!r} is the name of "
                f"generate.models entry {printable(clash)!r}: its images would be pooled with "
                "the generated ones; give the import another name (--model NAME)"
            )


def _refuse_colliding_names(study: Study, items: Sequence[Item]) -> None:
    """Two model names with one id part (:func:`model_slug` lower-cases: ``DALL-E-3`` and
    ``dall-e-3``) would give their images the same ids, so an image of the second would be
    taken for one of the first and silently not imported: refused, one line naming the entry
    and the name already used (in the study, else earlier in this import). Names are kept
    case-sensitive as given; the first spelling is the one to use again."""
    first: dict[str, tuple[str, str]] = {}  # model slug -> (model name, where it was seen)
    rows = study.con.execute(
        "SELECT DISTINCT model_id FROM images WHERE starts_with(image_id, 'imp:') "
        "AND model_id IS NOT NULL ORDER BY model_id"
    ).fetchall()
    for (name,) in rows:
        first.setdefault(model_slug(name), (name, "already in the study"))
    for item in items:
        seen = first.setdefault(model_slug(item.model), (item.model, f"at {item.entry.where}"))
        if seen[0] != item.model:
            how = (
                "differs only in case from"
                if seen[0].casefold() == item.model.casefold()
                else ("has the same image id part as")
            )
            raise ManifestError(
                f"{item.entry.where}: model {printable(item.model)!r} {how} model "
                f"{printable(seen[0])!r} ({seen[1]}): their images would share ids "
                f"(imp:{model_slug(item.model)}:...); write it {printable(seen[0])!r}, or give "
                "another name (--model NAME)"
            )


def _known_bytes(study: Study, shas: set[str]) -> dict[str, tuple[str, str, str]]:
    """Imported already: sha256 -> (prompt_id, image_id, file) of its first image."""
    if not shas:
        return {}
    rows = study.con.execute(
        "SELECT m.sha256, i.prompt_id, m.image_id, m.file FROM imported_images m "
        "JOIN images i USING (image_id) ORDER BY m.image_id"
    ).fetchall()
    out: dict[str, tuple[str, str, str]] = {}
    for sha, prompt_id, iid, file in rows:
        if sha in shas:
            out.setdefault(sha, (prompt_id, iid, file))
    return out


def _known_files(study: Study, files: set[str]) -> dict[str, list[tuple[str, str]]]:
    """Already imported: file -> [(image_id, sha256)]."""
    if not files:
        return {}
    # every imported row, filtered here: list_contains over a long list is quadratic in DuckDB
    rows = study.con.execute("SELECT file, image_id, sha256 FROM imported_images").fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for file, iid, sha in rows:
        if file in files:
            out.setdefault(file, []).append((iid, sha))
    return out


def _plan(
    study: Study,
    run: StageRun,
    source: Source,
    items: Sequence[Item],
    results: dict[int, Checked],
    known: dict[str, list[tuple[str, str]]],
    first_of: dict[str, tuple[str, str, str]],
    model: str | None,
) -> dict[str, Any]:
    """The rows one source adds: images, imported_images, import_skips, image_imports.
    ``first_of`` (sha256 -> prompt, image id and file of the first image with these bytes)
    is shared by the sources of one run and updated with the images this one adds."""
    import_id = uuid.uuid4().hex[:16]
    present_ids = _present_ids(study, items, results)
    images, imported, skips = [], [], []
    twins: list[str] = []  # images whose bytes are an image of another prompt
    n_present = 0
    for item in items:
        e, c = item.entry, results[id(item)]
        file = str(e.file)
        if c.reason is not None:
            skips.append((import_id, e.where, e.line, file, c.reason, c.detail))
            continue
        assert c.sha256 is not None
        before = known.get(file, [])
        changed = _changed_since_import(import_id, item, c.sha256, before)
        if changed is not None:
            skips.append(changed)
            continue
        iid = image_id(item.model, item.prompt.prompt_id, item.index, c.sha256)
        same_file = any(
            sha == c.sha256
            and old_id.startswith(f"imp:{model_slug(item.model)}:{item.prompt.prompt_id}:")
            for old_id, sha in before
        )  # this file, these bytes, this model and prompt: imported before (index aside)
        if iid in present_ids or same_file:
            n_present += 1
            continue
        first = first_of.setdefault(c.sha256, (item.prompt.prompt_id, iid, file))
        if first[0] != item.prompt.prompt_id:  # one picture counted for two prompts: said
            twins.append(
                f"{e.where}: {SAME_IMAGE}: {file} has the bytes (sha256 {c.sha256[:12]}...) of "
                f"image {first[1]} of prompt {first[0]} ({first[2]})"
            )
        present_ids.add(iid)
        image_row, imported_row = _rows(study, item, c, iid, import_id)
        images.append(image_row)
        imported.append(imported_row)
    return {
        "import_id": import_id,
        "source": source,
        "model": model,
        "n_items": len(items),
        "n_present": n_present,
        "images": images,
        "imported": imported,
        "skips": skips,
        "twins": twins,
    }


def _changed_since_import(
    import_id: str, item: Item, sha256: str, before: list[tuple[str, str]]
) -> tuple | None:
    """The skip row of a file imported before (``before``: its image ids and sha256s) whose
    bytes differ now; None when it is new or unchanged."""
    if not before or any(sha == sha256 for _iid, sha in before):
        return None
    e, old = item.entry, before[0][1]
    return (
        import_id, e.where, e.line, str(e.file), "changed_since_import",
        f"sha256 {old[:12]}... at import ({before[0][0]}), now {sha256[:12]}...; the "
        "stored rows and labels are kept: import the new file under another name to add it",
    )  # fmt: skip


def _rows(study: Study, item: Item, c: Checked, iid: str, import_id: str) -> tuple[tuple, tuple]:
    """The ``images`` and ``imported_images`` rows of one new image."""
    e = item.entry
    rel = _study_path(study, e.file)
    image_row = (
        iid, "generated", item.prompt.prompt_id, item.prompt.occupation, rel, item.model,
        e.prompt if e.prompt is not None else item.prompt.text, e.seed, f"import:{import_id}",
    )  # fmt: skip
    imported_row = (
        iid, import_id, str(e.file), c.sha256, c.n_bytes, c.width, c.height, e.line, item.index,
        json.dumps(e.metadata, ensure_ascii=False, sort_keys=True, default=str),
    )  # fmt: skip
    return image_row, imported_row


def _present_ids(study: Study, items: Sequence[Item], results: dict[int, Checked]) -> set[str]:
    ids = [
        image_id(i.model, i.prompt.prompt_id, i.index, results[id(i)].sha256 or "")
        for i in items
        if results[id(i)].sha256
    ]
    if not ids:
        return set()
    rows = study.con.execute("SELECT image_id FROM images WHERE starts_with(image_id, 'imp:')")
    return {r[0] for r in rows.fetchall()} & set(ids)


def _study_path(study: Study, file: Path) -> str:
    """``images.path``: relative to the study when the file is inside it, else absolute."""
    try:
        return file.relative_to(study.root.resolve()).as_posix()
    except ValueError:
        return str(file)


def _write(con: Any, plan: dict[str, Any], now: datetime) -> None:

    source: Source = plan["source"]
    con.execute(
        "INSERT INTO image_imports VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            plan["import_id"], str(source.path), source.layout, source.sha256, plan["model"], now,
            plan["n_items"], len(plan["images"]), plan["n_present"], len(plan["skips"]),
            json.dumps(package_versions("corpus_audit", "pillow"), sort_keys=True),
        ],
    )  # fmt: skip
    if plan["images"]:  # bulk, through Arrow (executemany costs ~1 ms a row in DuckDB)
        _bulk_insert(con, "images", IMAGE_COLUMNS, plan["images"])
        _bulk_insert(con, "imported_images", IMPORTED_COLUMNS, plan["imported"])
    if plan["skips"]:
        con.executemany(
            "INSERT INTO import_skips VALUES (?, ?, ?, ?, ?, ?)",
            [(iid, str(source.path), line, file, reason, detail)
             for iid, _where, line, file, reason, detail in plan["skips"]],
        )  # fmt: skip


IMAGE_COLUMNS = {
    "image_id": "string", "source": "string", "prompt_id": "string", "occupation": "string",
    "path": "string", "model_id": "string", "prompt_text": "string", "seed": "int64",
    "origin": "string",
}  # fmt: skip
IMPORTED_COLUMNS = {
    "image_id": "string", "import_id": "string", "file": "string", "sha256": "string",
    "n_bytes": "int64", "width": "int32", "height": "int32", "source_line": "int32",
    "image_index": "int32", "metadata": "string",
}  # fmt: skip


def _bulk_insert(con: Any, table: str, columns: dict[str, str], rows: Sequence[tuple]) -> None:
    """``INSERT INTO table (columns) SELECT ... FROM`` an Arrow table of ``rows`` (the values
    are data in the Arrow table, never SQL text; the table and column names are constants)."""
    import pyarrow as pa

    arrays = {
        name: pa.array([r[i] for r in rows], type=getattr(pa, kind)())
        for i, (name, kind) in enumerate(columns.items())
    }
    view = f"_import_{table}"
    con.register(view, pa.table(arrays))
    try:
        names = ", ".join(columns)
        con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {view}")
    finally:
        con.unregister(view)


def verify_imports(study: Study) -> StageRun:
    """``import-images DIR --verify``: hash every imported file again and report those missing,
    unreadable or changed since their import (nothing is written)."""
    run = StageRun("import-images --verify")
    if not study.table_exists("imported_images"):
        return run.skip("no imported images")
    rows = study.con.execute(
        "SELECT image_id, file, sha256 FROM imported_images ORDER BY file"
    ).fetchall()
    max_pixels = study.config.images.max_pixels
    checked = _check_all(lambda r, stop: check_file(Path(r[1]), max_pixels, stop=stop), rows)
    run.rows_in = len(rows)
    for (iid, file, sha), c in zip(rows, checked, strict=True):
        if c.reason is not None:
            run.drop(c.reason)
            run.messages.append(f"{file}: {c.reason} ({c.detail}); image {iid}")
        elif c.sha256 != sha:
            run.drop("changed_since_import")
            run.messages.append(
                f"{file}: changed since import (sha256 {sha[:12]}... then, {c.sha256[:12] if c.sha256 else '?'}... "
                f"now); image {iid} keeps its labels from the old bytes"
            )
        else:
            run.rows_out += 1
    run.summary.append({"imported": len(rows), "unchanged": run.rows_out,
                        "changed_or_missing": len(rows) - run.rows_out})  # fmt: skip
    return run
