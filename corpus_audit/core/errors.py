"""Errors a user can fix, and the escaping of data quoted in messages.

The CLI prints a user error as one line (exit status 2), no traceback. Messages quote data
that came from outside (corpus column names and values, paths, lexicon entries); every such
quote goes through :func:`printable`, and the CLI passes everything it prints through it once
more, so bytes from a corpus can never drive the user's terminal.
"""

from __future__ import annotations

import sys
import unicodedata

# Format characters that reorder or hide text on a terminal ("Trojan source" bidi controls).
_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


class CorpusAuditError(Exception):
    """Base of every user-facing error; messages name the file (or key) and the problem. Their
    text is always :func:`printable`, whatever data was quoted in it. The CLI catches this one
    class (one line, exit status 2), so a new user error only has to derive from it."""

    def __str__(self) -> str:
        return printable(super().__str__())


class ConfigError(CorpusAuditError, ValueError):
    """A study config that cannot be used; the message names the file and the key."""


class StudyError(CorpusAuditError, RuntimeError):
    """A study directory that cannot be opened or used as asked."""


class LexiconError(CorpusAuditError, ValueError):
    """A lexicon file that cannot be used; the message names the file and the problem."""


class CorpusError(CorpusAuditError):
    """A corpus file that cannot be read: missing column, corrupt file, no rows."""


class ModelError(CorpusAuditError):
    """A model that cannot be loaded (offline, missing weights, unknown id)."""


class ImageSourceError(CorpusAuditError):
    """An image source that cannot be used (missing directory, unreadable shard)."""


class ManifestError(CorpusAuditError, ValueError):
    """A source of images to import (a manifest, a folder, a BAFIS metadata.json) that cannot
    be used as given; the message names the file and the line (or entry)."""


class ApiError(CorpusAuditError):
    """An images API that cannot be used: no key in the named environment variable, a request
    refused for good (401, 404, ...), or retries exhausted."""


class StageOrderError(CorpusAuditError):
    """A stage run before the stages whose tables it reads, or on the tables of a stage
    whose last run did not finish."""


class RatingError(CorpusAuditError):
    """Battles that cannot be rated (missing columns, a model against itself)."""


class BattleError(CorpusAuditError):
    """Battle input that cannot be used; the message names the file and line."""


class EngineError(CorpusAuditError):
    """An unknown engine name, or an engine whose package is not installed."""


class RayEngineError(CorpusAuditError):
    """The Ray cluster cannot be reached, or a unit failed after every retry."""


class WorkerDiedError(CorpusAuditError):
    """A local worker process died (killed, out of memory) while serving a unit."""


class BackendOutputError(CorpusAuditError):
    """A backend (a plugin or a built-in model) that returned a value outside its contract
    (NaN, out of range, wrong shape or count); the message names the backend, its
    distribution and what it returned. Raised before anything of the batch is stored."""


class NotTextError(CorpusError, ValueError):
    """The caption column of a batch holds no text (see :func:`corpus_audit.backends.corpus.check_text_column`)."""

    def __init__(self, column: str, dtype: object) -> None:
        super().__init__(column, dtype)
        self.column = column
        self.dtype = dtype


class ValidationError(CorpusAuditError):
    """An annotation file that cannot be imported (names the file and line)."""


class TableError(CorpusAuditError):
    """A %female table (CSV) that cannot be used; the message names the file and line."""


def printable(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\n``,
    ``\\u202e``), so it prints as inert characters on one line.

    Escaped: C0 and C1 controls and DEL (ESC starts ANSI/OSC sequences that can retitle,
    recolour or clear a terminal), line and paragraph separators, and the bidirectional
    format characters. Everything else, including non-ASCII letters and emoji, is kept.
    ``keep_newlines`` keeps ``\\n`` as is (for multi-line output the CLI itself composes).
    """
    text = str(text)
    if text.isprintable() and not (_BIDI_CONTROLS & set(text)):
        return text  # the common case: nothing to escape
    out = []
    for ch in text:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif ch in _BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            out.append(_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def shorten(text: object, limit: int = 80) -> str:
    """``text`` made :func:`printable` and cut to about ``limit`` characters, the cut said
    (``abc... (200,000 characters)``): for names from outside (a plugin's, a key) quoted in
    a message, so one line stays one readable line."""
    text = printable(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def _escape(ch: str) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


RECOVERY_HINT = (
    "restore it from a backup, or move it away and run `corpus-audit run` on the study to "
    "rebuild every table (cached embeddings and stored images are reused)"
)
# what a DuckDB error says when a study file is damaged (lower case)
DAMAGE_SIGNS = (
    "could not read enough bytes",
    "not a valid duckdb database",
    "corrupt",
    "checksum",
)


def read_error(exc: BaseException) -> str | None:
    """A one-line message for a DuckDB I/O error met while a stage reads a study (a damaged
    ``study.duckdb``, a cache file removed under it), or None for any other exception. Imports
    nothing: the CLI's last resort for errors, also when ``--help`` loaded no DuckDB."""
    duckdb = sys.modules.get("duckdb")  # not imported: the error cannot be DuckDB's
    if duckdb is None or not isinstance(exc, duckdb.IOException):
        return None
    text = str(exc).strip()
    first = printable(text.splitlines()[0] if text else type(exc).__name__)
    if any(sign in text.lower() for sign in DAMAGE_SIGNS):
        return f"a study file is damaged ({first}); if it is study.duckdb, {RECOVERY_HINT}"
    return f"cannot read a file the study needs: {first}"
