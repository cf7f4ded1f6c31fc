"""Gender association of a text (METHODS 4, Mickel et al. "More of the Same").

A text in which no gender was specified is *associated* with a gender from the way it
refers to its subject. Per text it counts (terms from a lexicon file,
``association_terms_en.toml`` by default, never hard-coded here):

- ``female_pronouns``, ``male_pronouns``, ``neutral_pronouns``: pronoun words
  (she/her/hers/herself, he/him/his/himself, they/them/their/theirs/themself/themselves);
- ``female_honorifics``, ``male_honorifics``: honorific words (ms, mrs, miss; mr), which
  count with the pronouns of their gender in the rule;
- ``non_binary_terms``: occurrences of non-binary terms (``non-binary``, ``nonbinary``,
  ``they/them``), phrases matched on word boundaries of the lower-cased text.

Words are those of :mod:`corpus_audit.methods.texts.tokens` (markup and URLs removed, lower-cased,
runs of letters, digits and ``_``), so ``Mr.`` counts as ``mr``, ``herb`` is not ``her`` and
``they/them`` also counts two neutral pronouns. Every occurrence counts (``his ... his`` is
2).

The rule (:func:`decide`), with F = female pronouns + female honorifics, M = male pronouns
+ male honorifics, N = neutral pronouns and B = "a non-binary term is present":

1. ``non_binary`` if B and N > M and N > F;
2. ``female`` if (F > M and F > N), or (not B and F > M);
3. ``male`` if (M > F and M > N), or (not B and M > F);
4. otherwise ``none`` (not associated: no gendered reference, a tie F = M, or a non-binary
   term with a gendered count that does not beat the neutral one). Texts with ``none`` are
   left out of the who and how analyses.

Without a non-binary term, neutral pronouns do not block a binary association ("she and
her students ... they"), as the method defines it. The branches exclude one another.

:func:`agreement` validates the rule the way the method's authors did, against texts whose
gender is specified (for captions: the explicit-indicator label of the ``indicators``
stage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from corpus_audit.methods.lexicon import AssociationTerms, load_association_terms
from corpus_audit.methods.matching import form_regex
from corpus_audit.methods.texts.tokens import TextInput, clean_texts, words_of

ASSOCIATIONS = ("female", "male", "non_binary", "none")
GENDERS = ("female", "male", "non_binary")
# (column, table, list) of the word counts, in the order of the columns of the result
WORD_COUNTS = (
    ("female_pronouns", "pronouns", "female"),
    ("male_pronouns", "pronouns", "male"),
    ("neutral_pronouns", "pronouns", "neutral"),
    ("female_honorifics", "honorifics", "female"),
    ("male_honorifics", "honorifics", "male"),
)
COUNT_COLUMNS = (*(c for c, _, _ in WORD_COUNTS), "non_binary_terms")
COLUMNS = (*COUNT_COLUMNS, "association")


class AssociationCounter:
    """The counts and the association of texts, for one set of terms.

    ``terms`` defaults to the built-in English file. Build once, call :meth:`count` per
    batch (vectorised: one RE2 split of the batch into words, one ``index_in`` lookup, one
    ``bincount``, and one RE2 count of the non-binary terms).
    """

    def __init__(self, terms: AssociationTerms | None = None):
        self.terms = terms or load_association_terms()
        vocabulary: list[str] = []
        codes: list[int] = []
        for code, (_, table, key) in enumerate(WORD_COUNTS):
            for term in getattr(self.terms, table)[key]:
                vocabulary.append(term)
                codes.append(code)
        self._value_set = pa.array(vocabulary, pa.string())
        self._codes = np.array(codes, dtype=np.int64)
        forms = sorted(set(self.terms.non_binary), key=lambda t: (-len(t), t))
        self._non_binary = "(?:" + "|".join(form_regex(f) for f in forms) + ")"

    def count(self, texts: TextInput, source: str = "texts") -> pd.DataFrame:
        """One row per text, in input order (index 0..n-1).

        Columns: ``female_pronouns``, ``male_pronouns``, ``neutral_pronouns``,
        ``female_honorifics``, ``male_honorifics``, ``non_binary_terms`` (int64 counts,
        >= 0) and ``association`` (``female``, ``male``, ``non_binary`` or ``none``). A null
        text has zero counts and ``none``. Raises :class:`CorpusError` (naming ``source``
        and the row) for a value that is not text.
        """
        cleaned = clean_texts(texts, source)
        n = len(cleaned)
        kinds = len(WORD_COUNTS)
        flat, rows = words_of(cleaned, keep_empty=True)
        counts = np.zeros((n, kinds), dtype=np.int64)
        if len(flat):
            found = pc.fill_null(pc.index_in(flat, value_set=self._value_set), -1)
            index = found.to_numpy(zero_copy_only=False).astype(np.int64)
            hit = index >= 0
            code = self._codes[index[hit]]
            counts = np.bincount(rows[hit] * kinds + code, minlength=n * kinds).reshape(n, kinds)
        non_binary = np.zeros(n, dtype=np.int64)
        if n:
            found = pc.count_substring_regex(cleaned, self._non_binary)
            non_binary = pc.fill_null(found, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        frame = pd.DataFrame(counts, columns=[c for c, _, _ in WORD_COUNTS])
        frame["non_binary_terms"] = non_binary
        frame["association"] = decide(
            frame["female_pronouns"] + frame["female_honorifics"],
            frame["male_pronouns"] + frame["male_honorifics"],
            frame["neutral_pronouns"],
            frame["non_binary_terms"],
        )
        return frame


def associate(
    texts: TextInput, terms: AssociationTerms | None = None, source: str = "texts"
) -> pd.DataFrame:
    """:meth:`AssociationCounter.count` with a counter built for ``terms`` (default file)."""
    return AssociationCounter(terms).count(texts, source)


def decide(female: Any, male: Any, neutral: Any, non_binary_terms: Any) -> np.ndarray:
    """The association rule (module docstring) over arrays of counts: F, M, N and the
    number of non-binary terms. Returns an object array of ``female``, ``male``,
    ``non_binary`` or ``none``."""
    f = np.asarray(female, dtype=np.int64)
    m = np.asarray(male, dtype=np.int64)
    n = np.asarray(neutral, dtype=np.int64)
    has_term = np.asarray(non_binary_terms, dtype=np.int64) > 0
    non_binary = has_term & (n > m) & (n > f)
    is_female = ~non_binary & (((f > m) & (f > n)) | (~has_term & (f > m)))
    is_male = ~non_binary & (((m > f) & (m > n)) | (~has_term & (m > f)))
    out = np.full(f.shape, "none", dtype=object)
    out[is_female] = "female"
    out[is_male] = "male"
    out[non_binary] = "non_binary"
    return out


def agreement(
    associations: Sequence[str | None] | pd.Series,
    specified: Sequence[str | None] | pd.Series,
    genders: Sequence[str] = GENDERS,
) -> pd.DataFrame:
    """Agreement of the association with a specified gender, per specified gender.

    ``associations[i]`` is text i's association, ``specified[i]`` its specified gender (for
    captions the explicit-indicator label; labels outside ``genders``, such as ``both`` and
    ``none``, are not a specification and are left out). One row per gender in ``genders``:

    - ``gender``: the specified gender;
    - ``specified``: texts specified as that gender;
    - ``associated_same``, ``associated_other``, ``not_associated``: of those, texts the
      rule associated with the same gender, with another one, with none;
    - ``agreement_pct``: 100 * associated_same / specified (0-100; NaN when none is
      specified), the accuracy the method's authors report (> 99.6 % per gender on
      biographies whose prompt named the gender);
    - ``agreement_associated_pct``: 100 * associated_same / (associated_same +
      associated_other), the agreement among the texts the rule associated at all.
    """
    a = pd.Series(list(associations), dtype=object).fillna("none").to_numpy()
    s = pd.Series(list(specified), dtype=object).to_numpy()
    if len(a) != len(s):
        raise ValueError(f"agreement: {len(a)} associations but {len(s)} specified labels")
    rows = []
    for gender in genders:
        mask = s == gender
        total = int(mask.sum())
        same = int((a[mask] == gender).sum())
        none = int((a[mask] == "none").sum())
        other = total - same - none
        rows.append(
            {
                "gender": gender,
                "specified": total,
                "associated_same": same,
                "associated_other": other,
                "not_associated": none,
                "agreement_pct": 100.0 * same / total if total else np.nan,
                "agreement_associated_pct": (
                    100.0 * same / (same + other) if same + other else np.nan
                ),
            }
        )
    return pd.DataFrame(rows)
