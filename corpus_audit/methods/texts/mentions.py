"""Occupations mentioned in texts that come without an occupation column.

The ``select`` stage's own matcher (:func:`corpus_audit.methods.matching.build_matcher`: every surface
form of the lexicon, longest first, case-insensitive, word-boundary guarded) finds the
mentions, and each match maps to its occupation as in ``sql/select/20_found.sql`` to
``select/22_edges.sql`` (white space collapsed; a consumed guard character at a non-ASCII
edge stripped). A text that mentions two occupations gives a row for each; a text that
mentions one twice gives one row. Texts are matched as given (markup included), as the
stage matches them.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa

from corpus_audit.methods.lexicon import Occupation, load_occupations
from corpus_audit.methods.matching import build_matcher
from corpus_audit.methods.texts.tokens import TextInput, clean_texts, text_array, words_of

_EDGE = re.compile(r"^[^\w]|[^\w]$")


def find_mentions(
    texts: TextInput, occupations: list[Occupation] | None = None, source: str = "texts"
) -> pd.DataFrame:
    """Rows ``row`` (index into ``texts``, int64) and ``occupation``, sorted by row then
    occupation; ``occupations`` defaults to the built-in lexicon. DuckDB's RE2 runs the
    matcher's pattern (one query, in memory)."""
    import duckdb

    matcher = build_matcher(occupations or load_occupations())
    form_to_occ = dict(matcher.forms)
    arr = text_array(texts, source)
    table = pa.table({"row": pa.array(np.arange(len(arr), dtype=np.int64)), "text": arr})
    con = duckdb.connect()
    try:
        con.register("texts_in", table)
        found = con.execute(
            "SELECT row, lower(m) FROM (SELECT row, unnest(regexp_extract_all(text, $p, 0, 'i'))"
            " AS m FROM texts_in)",
            {"p": matcher.pattern},
        ).fetchall()
    finally:
        con.close()
    pairs = set()
    for row, match in found:
        norm = " ".join(match.split())
        occ = form_to_occ.get(norm) or form_to_occ.get(_EDGE.sub("", norm))
        if occ is not None:
            pairs.add((int(row), occ))
    out = pd.DataFrame(sorted(pairs), columns=["row", "occupation"])
    out["row"] = out["row"].astype(np.int64)
    return out


def occupation_words(occupations: list[Occupation] | None = None) -> tuple[str, ...]:
    """The lexicon's one-word surface forms (``dancer``, ``dancers``, ``ceo``...), sorted.

    An occupation's own name marks nothing about how its women and men are described, so
    callers add these to the marked words' ``drop_words``. The words of multi-word forms
    (``hair`` of ``hair stylist``, ``fashion`` of ``fashion designer``, ``prime``) are not
    included: alone they are ordinary descriptive words.
    """
    forms = [f for o in occupations or load_occupations() for f in o.forms]
    flat, rows = words_of(clean_texts(forms))
    single = np.bincount(rows, minlength=len(forms)) == 1
    words = flat.to_pylist()
    return tuple(sorted({w for w, r in zip(words, rows.tolist(), strict=True) if single[r]}))
