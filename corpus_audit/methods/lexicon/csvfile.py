"""Strict reading of the lexicon's CSV data files, with errors that name the file and line.

One reader for the prompt tables, the occupation categories and the official statistics:
UTF-8 (a byte-order mark is dropped), RFC 4180 quoting read strictly (an unterminated quote is
an error, not a field that swallows the rest of the file), a header row whose names are
stripped and lower-cased, every row with exactly the header's number of fields, blank lines
skipped. Line numbers are the physical line where a record starts (comment and blank lines count), also when
a quoted field spans several lines.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

from corpus_audit.core.errors import LexiconError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def has_control(text: str) -> bool:
    """True when ``text`` holds an ASCII control character (newline and tab included)."""
    return _CONTROL.search(text) is not None


def _lines(text: str, comments: bool) -> Iterator[str]:
    for line in text.splitlines(keepends=True):
        # A comment becomes a blank line, so the reader's line count stays physical.
        yield "\n" if comments and line.lstrip().startswith("#") else line


def read_rows(
    path: Path, *, comments: bool = False, error: type[Exception] = LexiconError
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """``(header, [(line, fields)])`` of a CSV file; raises ``error`` (default
    :class:`LexiconError`) with a message naming the file and line.

    With ``comments`` a line whose first non-blank character is ``#`` is ignored; a row of
    only empty fields is skipped. Fields are returned as written (not stripped); header names
    are stripped and lower-cased and must be non-empty and unique.
    """
    try:
        data = path.read_bytes()
        text = data.decode("utf-8-sig")
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    reader = csv.reader(_lines(text, comments), strict=True)
    rows: list[tuple[int, list[str]]] = []
    header: list[str] | None = None
    start = 1
    try:
        for fields in reader:
            line, start = start, reader.line_num + 1
            if not any(f.strip() for f in fields):
                continue
            if header is None:
                header = [f.strip().lower() for f in fields]
                _check_header(path, line, header, error)
                continue
            if len(fields) != len(header):
                raise error(f"{path}:{line}: {len(fields)} fields, the header has {len(header)}")
            rows.append((line, fields))
    except csv.Error as exc:
        raise error(f"{path}:{start}: not valid CSV ({exc})") from None
    if header is None:
        raise error(f"{path}: empty file (no header row)")
    return header, rows


def records(
    header: list[str], rows: list[tuple[int, list[str]]]
) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, {column: field})`` per row of :func:`read_rows`' result."""
    for line, fields in rows:
        yield line, dict(zip(header, fields, strict=True))


def _check_header(path: Path, line: int, header: list[str], error: type[Exception]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(header, start=1):
        if not name:
            raise error(f"{path}:{line}: column {i} has no name")
        if name in seen:
            raise error(f"{path}:{line}: column {name!r} appears twice")
        seen.add(name)
