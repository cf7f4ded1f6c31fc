"""Text input and tokenisation shared by the who-and-how methods (METHODS 4).

One notion of a word for the association counts and the marked words, the same as the
explicit indicators' (:mod:`corpus_audit.methods.gender_text`):

1. **Markup is not text**: HTML entities are decoded and tags with their attributes removed
   (:func:`corpus_audit.methods.gender_text.clean_markup`; real LAION captions hold ``<a href=...>``,
   ``<br>``, ``<font><b>``, ``&#34;``), then URLs (``http://...``, ``https://...``,
   ``www....`` up to the next white space) are removed, so neither tags nor addresses
   produce words (``href``, ``br``, ``font``, ``www``, ``com``).
2. The text is lower-cased (Unicode) and split into **words**: maximal runs of letters,
   digits and ``_`` (``\\p{L}``, ``\\p{N}``); everything else separates. ``Mr.`` is ``mr``,
   ``woman's`` is ``woman`` + ``s``, ``well-dressed`` is ``well`` + ``dressed``,
   ``they/them`` is ``they`` + ``them``.
3. **Vocabulary words** (what the marked words count) are the words of at least
   :data:`MIN_WORD_CHARS` characters holding at least one letter: ``2019`` and the ``s``
   of ``woman's`` are not words of the vocabulary, ``4k`` and ``mp3`` are.

Everything is vectorised with pyarrow's RE2 kernels over a whole batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.core.errors import CorpusError
from corpus_audit.methods.gender_text import WORD_SPLIT, clean_markup

URL_PATTERN = r"(?:[Hh][Tt][Tt][Pp][Ss]?://|[Ww][Ww][Ww]\.)\S*"
MIN_WORD_CHARS = 2
TextInput = Sequence[Any] | pa.Array | pa.ChunkedArray


def text_array(texts: TextInput, source: str = "texts") -> pa.Array:
    """``texts`` as one arrow string array (nulls kept; None, NaN and pandas' NA are null).

    Accepts a list or tuple, a pandas Series, or an arrow (large) string or binary array.
    Raises :class:`CorpusError` naming ``source`` and the row for bytes that are not UTF-8,
    strings with lone surrogates, and values that are not text.
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if isinstance(texts, pa.Array):
        return _arrow_text(texts, source)
    values = texts.tolist() if hasattr(texts, "tolist") else list(texts)
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError):
        return pa.array([_one_text(v, i, source) for i, v in enumerate(values)], pa.string())


def _arrow_text(arr: pa.Array, source: str) -> pa.Array:
    if pa.types.is_string(arr.type):
        return arr
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), pa.string())
    if pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type):
        return arr.cast(pa.string())
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        try:
            return arr.cast(pa.string())
        except pa.ArrowInvalid:  # find the row to name it
            return pa.array([_one_text(v, i, source) for i, v in enumerate(arr.to_pylist())])
    raise CorpusError(f"{source}: texts must be strings, got arrow type {arr.type}")


def _one_text(value: Any, row: int, source: str) -> str | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusError(f"{source}: row {row}: not UTF-8 text") from None
    if not isinstance(value, str):
        raise CorpusError(f"{source}: row {row}: not text ({type(value).__name__})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise CorpusError(f"{source}: row {row}: not valid Unicode text (lone surrogate)") from None
    return value


def clean_texts(texts: TextInput, source: str = "texts") -> pa.Array:
    """Markup and URLs removed, lower-cased (Unicode); nulls stay null."""
    arr = text_array(texts, source)
    if len(arr) == 0:
        return arr
    cleaned = pc.replace_substring_regex(clean_markup(arr), URL_PATTERN, " ")
    return pc.utf8_lower(cleaned)


def words_of(cleaned: pa.Array, *, keep_empty: bool = False) -> tuple[pa.Array, np.ndarray]:
    """Every word of already cleaned texts (:func:`clean_texts`), in text order, and the row
    (index into ``cleaned``, int64) of each. Null texts have no words. ``keep_empty`` keeps
    the empty pieces the split leaves at the ends of a text (cheaper, for callers that look
    words up: an empty piece matches no term and is no vocabulary word)."""
    parts = pc.split_pattern_regex(cleaned, WORD_SPLIT)
    flat = pc.list_flatten(parts)
    rows = pc.list_parent_indices(parts).to_numpy().astype(np.int64, copy=False)
    if keep_empty or len(flat) == 0:
        return flat, rows
    keep = pc.greater(pc.utf8_length(flat), 0)
    return flat.filter(keep), rows[keep.to_numpy(zero_copy_only=False)]


def vocabulary_words(
    cleaned: pa.Array, drop: Sequence[str] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The vocabulary words of cleaned texts, dictionary-encoded: ``(word_ids, rows, vocab)``.

    ``word_ids`` (int64) index ``vocab`` (object array of the distinct words, in order of
    first appearance), ``rows`` (int64) the text of each occurrence. Words in ``drop`` are
    left out. The vocabulary test runs once per distinct word, not per occurrence.
    """
    flat, rows = words_of(cleaned, keep_empty=True)
    encoded = pc.dictionary_encode(flat)
    dictionary = encoded.dictionary
    keep = vocabulary_mask(dictionary)
    if drop and len(dictionary):
        dropped = pc.is_in(dictionary, value_set=pa.array(list(drop), pa.string()))
        keep &= ~pc.fill_null(dropped, False).to_numpy(zero_copy_only=False)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    kept_codes = np.flatnonzero(keep)
    new_id = np.full(len(dictionary), -1, dtype=np.int64)
    new_id[kept_codes] = np.arange(kept_codes.size)
    word_ids = new_id[codes]
    on = word_ids >= 0
    vocab = np.asarray(dictionary.take(pa.array(kept_codes)).to_pylist(), dtype=object)
    return word_ids[on], rows[on], vocab


def vocabulary_mask(flat_words: pa.Array) -> np.ndarray:
    """True for the words that are vocabulary words (>= 2 characters, at least one letter)."""
    if len(flat_words) == 0:
        return np.zeros(0, dtype=bool)
    long_enough = pc.greater_equal(pc.utf8_length(flat_words), MIN_WORD_CHARS)
    has_letter = pc.match_substring_regex(flat_words, r"\p{L}")
    both = pc.fill_null(pc.and_(long_enough, has_letter), False)
    return both.to_numpy(zero_copy_only=False)
