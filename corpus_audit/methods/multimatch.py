"""Occupation mentions of a whole arrow string array in one pass: the matcher interface.

Two matchers find the same mentions (tested on the real corpora, row for row), behind
:class:`ArrowMatcher` (``find(text) -> Found``), chosen by ``select.matcher``
(:func:`resolve_matcher`):

``duckdb``
    The reference: pyarrow's RE2 keeps the rows the alternation of
    :func:`corpus_audit.methods.matching.build_matcher` matches, and DuckDB's SQL
    (``sql/select/20_found.sql``-``22_edges.sql``) extracts and maps every match later, on the
    driver. :meth:`DuckdbMatcher.find` returns the kept rows only (no mentions).
``hyperscan``
    Intel's multi-pattern engine (``pip install hyperscan``, extra ``fast``): every lexicon
    form is one pattern of one block-mode database (compiled once per process,
    :func:`hyperscan_matcher`; pattern id = the form's place in the alternation). The
    array's UTF-8 bytes are scanned in one call per slice of :data:`SLICE_ROWS` rows (a
    bounded copy whatever the batch size): the values joined by a NUL byte (a non-word
    character that no form and no white-space run contains, so no match spans two captions
    and ``\\b`` sees a caption's edge as RE2 does). The matches are then brought to RE2's
    semantics in numpy, looping in Python only over rows where two matches overlap: as
    ``regexp_extract_all`` iterates, leftmost-first (of matches that start at one place, the
    first alternative, i.e. the longest form), non-overlapping (the next search starts where
    the last match ended). Rows that match nothing never become Python objects. Returns the
    kept rows and, per (row, occupation), the first form and its place among the caption's
    matches: the triples the SQL's ``arg_min(form, pos)`` gives, in row order, then order of
    first appearance.

Kept exactly: a form edge that is a non-ASCII letter or digit is guarded in RE2 by a
consumed character (``(?:^|[^\\p{L}\\p{N}_])``, ``\\b`` being ASCII-only). Such a Unicode
class beside a form makes a multilingual database too large to compile, so those guards are
checked on the matches instead (:meth:`HyperscanMatcher._guard`, Python's Unicode tables): the
consumed character counts in the match, so it is not available to the next one. RE2's ``\\s``
is ``[\\t\\n\\f\\r ]`` (no vertical tab), spelled out for Hyperscan, whose ``\\s`` has it.
Case: DuckDB's RE2 and Hyperscan (``HS_FLAG_CASELESS``) both fold simple case only (``K``
KELVIN SIGN is not ``k`` in either, tested).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.core.errors import ConfigError
from corpus_audit.methods.matching import Matcher, form_body, guarded_edges

MATCHERS = ("auto", "duckdb", "hyperscan")
SLICE_ROWS = 65_536  # rows joined and scanned at a time by the hyperscan matcher (memory)
_SEP = "\x00"  # between two captions in the scanned buffer: not a word char, not white space
_SPACE = re.compile(r"[\t\n\f\r \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
_EDGE = re.compile(r"^\W|\W$")


def _word(raw: bytes) -> bool:
    """Whether the UTF-8 character ``raw`` is a letter, a digit/number or ``_`` (RE2's
    ``[\\p{L}\\p{N}_]``, by Python's Unicode tables)."""
    ch = raw.decode("utf-8", errors="replace")
    return ch == "_" or unicodedata.category(ch)[0] in "LN"


@dataclass(frozen=True)
class Found:
    """What a matcher found in one string array of ``n`` rows.

    ``keep``: the rows (indices 0..n-1, ascending, int64) whose caption matched at least once.
    ``mention_rows`` / ``mention_forms``: one entry per (row, occupation), the row index and
    the index in ``Matcher.forms`` of the occupation's first form in that caption, ordered by
    row then first appearance; None when mentions are extracted later (``duckdb``).
    ``positions``: the 1-based ordinal of that form among the caption's matches.
    ``unmapped``: matches whose text maps to no lexicon form (expected 0).
    """

    keep: np.ndarray
    mention_rows: np.ndarray | None = None
    mention_forms: np.ndarray | None = None
    positions: np.ndarray | None = None
    unmapped: int = 0


class ArrowMatcher(Protocol):
    """Finds occupation mentions in an arrow string array (captions, UTF-8 valid, nulls ok)."""

    name: str

    def find(self, text: pa.Array) -> Found: ...


class DuckdbMatcher:
    """The reference path: the RE2 alternation keeps rows (pyarrow); DuckDB's SQL extracts."""

    name = "duckdb"

    def __init__(self, matcher: Matcher, prefilter: bool = True) -> None:
        self.pattern, self.prefilter = matcher.pattern, prefilter

    def find(self, text: pa.Array) -> Found:
        """Rows whose caption the alternation matches (every non-null row without prefilter)."""
        if self.prefilter:
            mask = pc.match_substring_regex(text, self.pattern, ignore_case=True)
        else:
            mask = pc.is_valid(text)
        keep = np.flatnonzero(mask.fill_null(False).to_numpy(zero_copy_only=False))
        return Found(keep.astype(np.int64))


def hyperscan_pattern(form: str) -> str:
    """The Hyperscan (PCRE) pattern of one lower-case form: RE2's fragment with ``\\s``
    spelled as RE2 means it, without the guards of non-ASCII letter edges (a Unicode class
    beside a form makes databases too large to compile: they are checked on the matches,
    :meth:`HyperscanMatcher._guard`)."""
    return form_body(form, space=r"[\t\n\f\r \p{Zs}]+", outside_word=False)


def hyperscan_version() -> str | None:
    """The installed ``hyperscan`` bindings' version, None when they cannot be used here."""
    try:
        import hyperscan  # optional, heavy native library: only when select uses it

        return str(getattr(hyperscan, "__version__", "?"))
    except ImportError:
        return None


class HyperscanMatcher:
    """Every lexicon form as one Hyperscan pattern of one block-mode database."""

    name = "hyperscan"

    def __init__(self, matcher: Matcher) -> None:
        import hyperscan  # optional, heavy native library: only when select uses it

        self.forms = matcher.forms
        n = len(self.forms)
        flags = hyperscan.HS_FLAG_CASELESS | hyperscan.HS_FLAG_UTF8 | hyperscan.HS_FLAG_SOM_LEFTMOST
        self.db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self.db.compile(
            expressions=[hyperscan_pattern(f).encode() for f, _ in self.forms],
            ids=list(range(n)),
            elements=n,
            flags=[flags] * n,
        )
        self._hs = hyperscan
        self._local = threading.local()  # one scratch space per thread (scans release the GIL)
        # forms that are not plain ASCII: their matched text is checked as SQL maps it
        self.check = np.array([not f.isascii() for f, _ in self.forms], dtype=bool)
        edges = [guarded_edges(f) for f, _ in self.forms]
        self.left = np.array([e[0] for e in edges], dtype=bool)
        self.right = np.array([e[1] for e in edges], dtype=bool)
        occ_index = {o: i for i, o in enumerate(dict.fromkeys(o for _, o in self.forms))}
        self.occupation_of = np.array([occ_index[o] for _, o in self.forms], dtype=np.int64)

    def _scan(self, data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids: list[int] = []
        starts: list[int] = []
        ends: list[int] = []

        def on_match(i: int, start: int, end: int, _flags: int, _ctx: object) -> None:
            ids.append(i)
            starts.append(start)
            ends.append(end)

        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._hs.Scratch(self.db)
        self.db.scan(data, match_event_handler=on_match, scratch=scratch)
        return (
            np.array(ids, dtype=np.int64),
            np.array(starts, dtype=np.int64),
            np.array(ends, dtype=np.int64),
        )

    def find(self, text: pa.Array) -> Found:
        """Mentions of every row of ``text`` (see :class:`Found`), RE2 semantics.

        Matched :data:`SLICE_ROWS` rows at a time (the joined copy and the per-row arrays of
        one slice: ~5 MB for LAION captions, whatever the batch), results shifted by the
        slice's first row and concatenated: the same triples in the same order."""
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        if not pa.types.is_string(text.type):
            text = text.cast(pa.string())
        n = len(text)
        if n <= SLICE_ROWS:
            return self._find(text)
        parts = [(lo, self._find(text.slice(lo, SLICE_ROWS))) for lo in range(0, n, SLICE_ROWS)]
        return Found(
            np.concatenate([f.keep + lo for lo, f in parts]),
            np.concatenate([f.mention_rows + lo for lo, f in parts]),
            np.concatenate([f.mention_forms for _, f in parts]),
            np.concatenate([f.positions for _, f in parts]),
            sum(f.unmapped for _, f in parts),
        )

    def _find(self, text: pa.Array) -> Found:
        """:meth:`find` of one string array of at most :data:`SLICE_ROWS` rows."""
        n = len(text)
        empty = np.zeros(0, np.int64)
        if n == 0:
            return Found(empty, empty, empty, empty)
        offsets = np.frombuffer(
            text.buffers()[1], dtype=np.int32, count=n + 1, offset=text.offset * 4
        )
        if text.null_count:  # joined as empty captions: no copy when nulls hold no bytes
            valid = text.is_valid().to_numpy(zero_copy_only=False)
            if np.diff(offsets)[~valid].any():
                text = text.fill_null("")
                offsets = np.frombuffer(text.buffers()[1], dtype=np.int32, count=n + 1)
            else:
                text = pa.StringArray.from_buffers(
                    n, text.buffers()[1], text.buffers()[2], offset=text.offset
                )
        # row i starts at offsets[i] - offsets[0] + i in the joined buffer (one NUL between rows)
        starts_of = offsets[:-1].astype(np.int64) - offsets[0] + np.arange(n, dtype=np.int64)
        lengths = np.diff(offsets).astype(np.int64)
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), text), _SEP)
        buf = joined.buffers()[2]
        data = memoryview(buf).cast("B")[: int(starts_of[-1] + lengths[-1])]  # bytes 0-255
        ids, mstart, mend = self._scan(data)
        if len(ids) == 0:
            return Found(empty, empty, empty, empty)
        rows = np.searchsorted(starts_of, mstart, side="right") - 1
        # a match starting on the NUL before row r+1 (a guard that consumed it: RE2's ^ at the
        # caption's start) belongs to row r+1; one ending on the NUL after it (RE2's $) ends
        # with its row
        rows = np.where(mstart >= starts_of[rows] + lengths[rows], rows + 1, rows)
        row_start = starts_of[rows]
        row_end = row_start + lengths[rows]
        mstart = np.maximum(mstart, row_start)
        mend = np.minimum(mend, row_end)
        guarded = np.flatnonzero(self.left[ids] | self.right[ids])
        if len(guarded):
            ok = self._guard(data, guarded, ids, mstart, mend, row_start, row_end)
            rows, ids, mstart, mend = rows[ok], ids[ok], mstart[ok], mend[ok]
            if len(ids) == 0:
                return Found(empty, empty, empty, empty)
        order = np.lexsort((ids, mstart, rows))
        return self._select(data, rows[order], ids[order], mstart[order], mend[order])

    def _select(
        self,
        data: memoryview,
        rows: np.ndarray,
        ids: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
    ) -> Found:
        """RE2's iteration over the matches sorted by (row, start, alternative): in each row,
        from position 0, the match that starts first (then the first alternative) wins and
        the next search starts at its end. Then the first form of each occupation per row.

        Vectorised; only the rows where two matches overlap (``prime minister`` holding
        ``minister``) go through the loop of :meth:`_greedy`, and only the matches of forms
        that are not plain ASCII are mapped back from their text (:meth:`_maps`)."""
        # of several matches at one start, the first alternative wins (the others overlap it)
        first = np.ones(len(rows), dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (starts[1:] != starts[:-1])
        rows, ids, starts, ends = rows[first], ids[first], starts[first], ends[first]
        overlap = np.zeros(len(rows), dtype=bool)
        overlap[1:] = (rows[1:] == rows[:-1]) & (starts[1:] < ends[:-1])
        if overlap.any():
            keep = self._greedy(rows, starts, ends, np.unique(rows[overlap]))
            rows, ids, starts, ends = rows[keep], ids[keep], starts[keep], ends[keep]
        # pos: 1-based ordinal of each kept match within its row
        new_row = np.ones(len(rows), dtype=bool)
        new_row[1:] = rows[1:] != rows[:-1]
        row_first = np.flatnonzero(new_row)
        index = np.arange(len(rows))
        pos = index - row_first[np.cumsum(new_row) - 1] + 1
        kept_rows = rows[new_row]
        mapped = np.ones(len(rows), dtype=bool)
        for j in np.flatnonzero(self.check[ids]).tolist():
            s, e = int(starts[j]), int(ends[j])
            mapped[j] = self._maps(bytes(data[s:e]), self.forms[int(ids[j])][0])
        unmapped = int(len(rows) - mapped.sum())
        rows, ids, pos = rows[mapped], ids[mapped], pos[mapped]
        # the first match of each (row, occupation), in (row, pos) order
        key = rows * (int(self.occupation_of.max()) + 1) + self.occupation_of[ids]
        _, firsts = np.unique(key, return_index=True)
        firsts.sort()
        return Found(kept_rows, rows[firsts], ids[firsts], pos[firsts], unmapped)

    @staticmethod
    def _greedy(
        rows: np.ndarray, starts: np.ndarray, ends: np.ndarray, conflicted: np.ndarray
    ) -> np.ndarray:
        """Mask of the matches RE2 keeps: every match of a row without overlaps, and in the
        ``conflicted`` rows the leftmost-first, non-overlapping sequence."""
        keep = ~np.isin(rows, conflicted)
        for r in conflicted.tolist():
            lo, hi = np.searchsorted(rows, [r, r + 1])
            pos = 0
            for j in range(int(lo), int(hi)):
                if starts[j] >= pos:
                    keep[j] = True
                    pos = int(ends[j]) if ends[j] > starts[j] else int(starts[j]) + 1
        return keep

    def _guard(
        self,
        data: memoryview,
        which: np.ndarray,
        ids: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        row_start: np.ndarray,
        row_end: np.ndarray,
    ) -> np.ndarray:
        """RE2's guards of non-ASCII letter edges, ``(?:^|[^\\p{L}\\p{N}_])`` before and
        ``(?:[^\\p{L}\\p{N}_]|$)`` after, on the matches ``which``: a match whose neighbour
        is a letter, digit or ``_`` is dropped (mask returned), a neighbour that is not is
        consumed (``starts`` / ``ends`` updated in place), the caption's start or end needs
        nothing."""
        ok = np.ones(len(ids), dtype=bool)
        for j in which.tolist():
            i, s, e = int(ids[j]), int(starts[j]), int(ends[j])
            if self.left[i] and s > row_start[j]:
                p = s - 1
                while p > row_start[j] and s - p < 4 and 0x80 <= data[p] < 0xC0:
                    p -= 1
                if _word(bytes(data[p:s])):
                    ok[j] = False
                    continue
                starts[j] = p
            if self.right[i] and e < row_end[j]:
                lead = data[e]
                size = 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
                q = min(e + size, int(row_end[j]))
                if _word(bytes(data[e:q])):
                    ok[j] = False
                    continue
                ends[j] = q
        return ok

    @staticmethod
    def _maps(raw: bytes, form: str) -> bool:
        """Whether a match of a non-ASCII form maps back to it as the SQL maps it (lower
        case, white-space runs as one space, one guard character stripped at each end)."""
        norm = raw.decode("utf-8", errors="replace").lower()
        if norm == form:
            return True
        norm = _SPACE.sub(" ", norm)
        return norm == form or _EDGE.sub("", norm) == form


_COMPILE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=8)
def _compiled(matcher: Matcher) -> HyperscanMatcher:
    return HyperscanMatcher(matcher)


def hyperscan_matcher(matcher: Matcher) -> HyperscanMatcher:
    """The compiled database of ``matcher``'s forms, once per process (worker; ~0.3 s for
    the built-in lexicon's 159 forms): the threads of one process share it."""
    with _COMPILE_LOCK:
        return _compiled(matcher)


def resolve_matcher(setting: str) -> tuple[str, str]:
    """(the matcher that runs, the note saying so) for ``select.matcher`` = ``setting``.

    ``auto``: hyperscan when its bindings are installed, else duckdb. ``hyperscan`` without
    them raises ConfigError (one line).
    """
    if setting == "duckdb":
        return "duckdb", "matcher: duckdb (select.matcher = duckdb)"
    version = hyperscan_version()
    if version is not None:
        return "hyperscan", f"matcher: hyperscan {version} (select.matcher = {setting})"
    if setting == "hyperscan":
        raise ConfigError(
            "select.matcher = hyperscan, but the hyperscan package is not installed "
            "(pip install 'corpus-audit[fast]', or set select.matcher = auto)"
        )
    return "duckdb", "matcher: duckdb (hyperscan is not installed; select.matcher = auto)"


def arrow_matcher(matcher: Matcher, kind: str, prefilter: bool = True) -> ArrowMatcher:
    """The matcher ``kind`` (``duckdb`` | ``hyperscan``, as :func:`resolve_matcher` chose)."""
    if kind == "hyperscan":
        return hyperscan_matcher(matcher)
    return DuckdbMatcher(matcher, prefilter)
