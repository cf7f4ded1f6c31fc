"""Read votes collected by another arena: the BAFIS arena's JSON and LMSYS-style battle files.

Pure reading and checking (no study): :func:`read_arena_file` turns one file into one row per
answered vote (:data:`ARENA_VOTE_COLUMNS`), or raises :class:`ArenaImportError` with one line
naming the file and the record. ``corpus-audit battles import DIR FILE.json`` stores the rows
(:mod:`corpus_audit.stages.arena`).

**BAFIS** (``bafis_arena_votes.json`` of the BAFIS repository; a JSON list of objects):
``model_a``, ``model_b``, ``language``, ``prompt``, ``bias_vote``, ``quality_vote``,
``alignment_vote``, ``createdAt``, ``updatedAt``. A vote is 0 (A better), 1 (B better), 2 or 3
(the two tie answers) or null (not answered: no row). One record gives up to three rows, one
per aspect (:data:`BAFIS_ASPECTS`: ``bias``, ``image_quality``, ``prompt_alignment``).
``createdAt`` / ``updatedAt``: Unix milliseconds.

**LMSYS-style** (the LMSYS arena's ``clean_battle`` dumps): ``model_a``, ``model_b``,
``winner`` (``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``), optional ``tstamp`` (Unix
seconds), ``language``, ``prompt`` and ``aspect`` (else the ``aspect`` given to the reader,
default ``overall``). Codes: ``model_a`` = 0, ``model_b`` = 1, ``tie`` = 2, ``tie (bothbad)`` =
3, so a BAFIS vote 2 is an LMSYS ``tie`` and a BAFIS 3 a ``tie (bothbad)`` (the BAFIS files do
not name their two tie answers; this pairing follows the LMSYS arena's buttons, "Tie" then
"Both are bad", which the BAFIS arena copies. Both are draws for every rating, so the pairing
changes no number, only the ``outcome`` label).

Both formats: a JSON list (``record`` = 1-based position in it) or JSON Lines (``.jsonl``:
one object per line, ``record`` = line number; blank lines skipped). Other keys are ignored.

**Rejected** (one line, ``<file>: record <n>: ...``): a record that is not an object; a missing,
empty or non-text model, or a model against itself; a vote / winner outside the codes above
(a boolean or text where BAFIS has a number, 2.5, ``"A"``); a missing, non-numeric,
non-finite or out-of-range timestamp (before 2000 or from 2100 on), an ``updatedAt`` before
``createdAt``; a language or prompt that is not text; an LMSYS aspect outside
:data:`ARENA_ASPECTS`; a record nested too deeply for Python's JSON parser, holding an integer
longer than Python converts (:func:`sys.get_int_max_str_digits`, 4,300 digits by default) or a
text with a lone surrogate (``"\\ud800"``: JSON escapes allow it, UTF-8 cannot hold it). A
file that is not JSON, or a list of no records, is rejected too. A JSON list is parsed record by
record, so each of these names its record.

**Identity** (what makes re-imports idempotent): ``record_sha256`` = sha256 of the record's
canonical JSON (sorted keys, no whitespace), ``occurrence`` = how many identical records came
before it in the same file (0 for the first). A vote is (record_sha256, occurrence, aspect):
the same file imported again, or from another path, or grown by new records, adds only what
is new. An edited record is a new record (the old one stays).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import CorpusAuditError

BAFIS = "bafis"
LMSYS = "lmsys"
FORMATS = (BAFIS, LMSYS)
BAFIS_ASPECTS = {
    "bias_vote": "bias",
    "quality_vote": "image_quality",
    "alignment_vote": "prompt_alignment",
}
OVERALL = "overall"
ARENA_ASPECTS = (*BAFIS_ASPECTS.values(), OVERALL)
OUTCOMES = ("model_a", "model_b", "tie", "tie (bothbad)")  # index = vote code
VOTE_A, VOTE_B, VOTE_TIE, VOTE_TIE_BOTHBAD = 0, 1, 2, 3
# Timestamps outside [2000-01-01, 2100-01-01) UTC are taken for a unit or typing error.
_EARLIEST, _LATEST = 946_684_800.0, 4_102_444_800.0

ARENA_VOTE_COLUMNS = (
    "record_sha256",
    "occurrence",
    "aspect",
    "format",
    "source_file",
    "file_sha256",
    "record",
    "model_a",
    "model_b",
    "language",
    "prompt",
    "vote",
    "outcome",
    "created_at",
    "updated_at",
)


class ArenaImportError(CorpusAuditError):
    """An arena vote file that cannot be imported; the message names the file and record."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _unreadable(where: str, exc: Exception) -> ArenaImportError:
    """The one-line error for JSON that Python cannot turn into values: nested too deeply for
    the parser (:class:`RecursionError`), or an integer longer than Python converts
    (:func:`sys.get_int_max_str_digits`, a :class:`ValueError`)."""
    if isinstance(exc, json.JSONDecodeError):
        return ArenaImportError(
            f"{where}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        )
    if isinstance(exc, RecursionError):
        return ArenaImportError(f"{where}: JSON nested too deeply to read")
    limit = sys.get_int_max_str_digits()
    return ArenaImportError(f"{where}: holds an integer of more than {limit:,} digits")


_JSON_ERRORS = (ValueError, RecursionError)  # JSONDecodeError is a ValueError


def _list_records(path: Path, text: str) -> list[tuple[int, Any]]:
    """The records of a JSON list, parsed one by one so that an error names its record."""
    decoder = json.JSONDecoder()
    end = len(text)

    def skip(i: int) -> int:
        while i < end and text[i] in " \t\n\r":
            i += 1
        return i

    i = skip(0)
    if text[i : i + 1] != "[":  # not a list: the whole text says what it is
        try:
            json.loads(text)
        except _JSON_ERRORS as exc:
            raise _unreadable(str(path), exc) from None
        raise ArenaImportError(f"{path}: not a JSON list of battle records")
    out: list[tuple[int, Any]] = []
    i = skip(i + 1)
    if text[i : i + 1] != "]":
        while True:
            number = len(out) + 1
            try:
                value, i = decoder.raw_decode(text, i)
            except _JSON_ERRORS as exc:
                raise _unreadable(f"{path}: record {number}", exc) from None
            out.append((number, value))
            i = skip(i)
            if text[i : i + 1] == ",":
                i = skip(i + 1)
                continue
            if text[i : i + 1] == "]":
                break
            line = text.count("\n", 0, i) + 1
            raise ArenaImportError(
                f"{path}: record {number}: not JSON (expected ',' or ']' after it, line {line})"
            )
    if skip(i + 1) != end:
        line = text.count("\n", 0, skip(i + 1)) + 1
        raise ArenaImportError(f"{path}: not JSON (extra data after the list, line {line})")
    return out


def _records(path: Path) -> list[tuple[int, Any]]:
    """``(record number, parsed value)`` of a JSON list or a JSON Lines file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ArenaImportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ArenaImportError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    if path.suffix.lower() != ".jsonl":
        return _list_records(path, text)
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ArenaImportError(f"{path}: record {number}: not JSON ({exc.msg})") from None
            except _JSON_ERRORS as exc:
                raise _unreadable(f"{path}: record {number}", exc) from None
    return out


def detect_format(path: Path, record: Any) -> str:
    """``bafis`` when the first record has a BAFIS vote key, ``lmsys`` when it has ``winner``."""
    if isinstance(record, dict):
        if any(key in record for key in BAFIS_ASPECTS):
            return BAFIS
        if "winner" in record:
            return LMSYS
    raise ArenaImportError(
        f"{path}: record 1: neither a BAFIS record (bias_vote, quality_vote, alignment_vote) "
        "nor an LMSYS one (winner)"
    )


def _text(where: str, record: dict, key: str, *, required: bool) -> str | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        what = "missing" if value is None else f"{value!r} is not a non-empty text"
        raise ArenaImportError(f"{where}: {key} {what}")
    return value.strip() if key != "prompt" else value


def _timestamp(where: str, key: str, value: Any, per_second: float) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float):
        what = "missing" if value is None else f"{value!r} is not a number"
        raise ArenaImportError(f"{where}: {key} {what}")
    try:
        seconds = value / per_second
    except OverflowError:  # an integer too large for a float (hundreds of digits)
        seconds = math.inf
    if not math.isfinite(seconds) or not _EARLIEST <= seconds < _LATEST:
        raise ArenaImportError(
            f"{where}: {key} {_shown(value)} is not a Unix time between 2000 and 2100 "
            f"({'milliseconds' if per_second == 1000 else 'seconds'})"
        )
    micros = round(value * (1_000_000 / per_second))
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(
        tzinfo=None, microsecond=micros % 1_000_000
    )


def _shown(value: int | float) -> str:
    """``value`` for a message: a long integer cut to its first digits and its length."""
    text = repr(value)
    if isinstance(value, int) and len(text) > 30:
        return f"{text[:15]}... ({len(text.lstrip('-'))} digits)"
    return text


def _bafis_vote(where: str, key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value not in (0, 1, 2, 3):
        raise ArenaImportError(
            f"{where}: {key} {value!r} is not 0 (A), 1 (B), 2 or 3 (ties) or null"
        )
    return int(value)


def _models(where: str, record: dict) -> tuple[str, str]:
    a = _text(where, record, "model_a", required=True)
    b = _text(where, record, "model_b", required=True)
    assert a is not None and b is not None
    if a == b:
        raise ArenaImportError(f"{where}: model_a and model_b are both {a!r}")
    return a, b


def _canonical_sha(where: str, record: dict) -> str:
    """sha256 of the record's canonical JSON; a text that is not Unicode text (a lone
    surrogate such as ``"\\ud800"``, which JSON escapes allow and UTF-8 cannot hold) is an
    error naming the key."""
    try:
        text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        data = text.encode("utf-8")
    except RecursionError:
        raise ArenaImportError(f"{where}: JSON nested too deeply to read") from None
    except UnicodeEncodeError as exc:
        bad = next((key for key in record if not _encodable({key: record[key]})), "a key")
        raise ArenaImportError(
            f"{where}: {bad!r} holds a lone surrogate ({exc.object[exc.start]!r}), not text"
        ) from None
    return hashlib.sha256(data).hexdigest()


def _encodable(value: Any) -> bool:
    """Whether ``value``'s JSON text can be written as UTF-8."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_arena_file(path: Path, *, fmt: str | None = None, aspect: str = OVERALL) -> Any:
    """The answered votes of one arena file: DataFrame :data:`ARENA_VOTE_COLUMNS`, in file
    order (``vote`` 0-3, ``outcome`` its name, ``created_at`` / ``updated_at`` naive UTC
    datetimes or None). ``fmt``: ``bafis``, ``lmsys`` or None (from the first record);
    ``aspect``: the aspect of LMSYS records without one. See the module docstring."""
    import pandas as pd  # not at the top: `corpus-audit --help` imports this module's names

    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise ArenaImportError(f"{path}: format {fmt!r} is not one of {', '.join(FORMATS)}")
    if aspect not in ARENA_ASPECTS:
        raise ArenaImportError(
            f"{path}: aspect {aspect!r} is not one of {', '.join(ARENA_ASPECTS)}"
        )
    records = _records(path)
    if not records:
        raise ArenaImportError(f"{path}: no battle records")
    fmt = fmt or detect_format(path, records[0][1])
    digest = file_sha256(path)
    seen: dict[str, int] = {}
    rows: list[dict[str, Any]] = []
    for number, record in records:
        where = f"{path}: record {number}"
        if not isinstance(record, dict):
            raise ArenaImportError(f"{where}: not a JSON object")
        parse = _bafis_rows if fmt == BAFIS else _lmsys_rows
        parsed = parse(where, record, aspect)
        sha = _canonical_sha(where, record)
        occurrence = seen.get(sha, 0)
        seen[sha] = occurrence + 1
        base = {
            "record_sha256": sha,
            "occurrence": occurrence,
            "format": fmt,
            "source_file": str(path),
            "file_sha256": digest,
            "record": number,
        }
        rows += [{**base, **row} for row in parsed]
    return pd.DataFrame(rows, columns=list(ARENA_VOTE_COLUMNS))


def _common(where: str, record: dict) -> dict[str, Any]:
    a, b = _models(where, record)
    return {
        "model_a": a,
        "model_b": b,
        "language": _text(where, record, "language", required=False),
        "prompt": _text(where, record, "prompt", required=False),
    }


def _bafis_rows(where: str, record: dict, _aspect: str) -> list[dict[str, Any]]:
    common = _common(where, record)
    created = _timestamp(where, "createdAt", record.get("createdAt"), 1000.0)
    updated = None
    if record.get("updatedAt") is not None:
        updated = _timestamp(where, "updatedAt", record["updatedAt"], 1000.0)
        if updated < created:
            raise ArenaImportError(f"{where}: updatedAt is before createdAt")
    rows = []
    for key, aspect in BAFIS_ASPECTS.items():
        vote = _bafis_vote(where, key, record.get(key))
        if vote is not None:
            rows.append(
                {
                    **common,
                    "aspect": aspect,
                    "vote": vote,
                    "outcome": OUTCOMES[vote],
                    "created_at": created,
                    "updated_at": updated,
                }
            )
    return rows


def _lmsys_rows(where: str, record: dict, aspect: str) -> list[dict[str, Any]]:
    common = _common(where, record)
    winner = record.get("winner")
    if not isinstance(winner, str) or winner not in OUTCOMES:
        raise ArenaImportError(f"{where}: winner {winner!r} is not one of {', '.join(OUTCOMES)}")
    own = record.get("aspect")
    if own is not None:
        if not isinstance(own, str) or own not in ARENA_ASPECTS:
            raise ArenaImportError(
                f"{where}: aspect {own!r} is not one of {', '.join(ARENA_ASPECTS)}"
            )
        aspect = own
    created = None
    if record.get("tstamp") is not None:
        created = _timestamp(where, "tstamp", record["tstamp"], 1.0)
    vote = OUTCOMES.index(winner)
    return [
        {
            **common,
            "aspect": aspect,
            "vote": vote,
            "outcome": winner,
            "created_at": created,
            "updated_at": None,
        }
    ]
