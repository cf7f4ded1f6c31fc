"""Who is represented and how, for captions and any text corpus (METHODS 4; Mickel et al.).

Plain functions over plain inputs (sequences, pandas Series or arrow arrays of occupation,
text and gender label) that return pandas DataFrames; the ``who_how`` stage and the
``corpus-audit texts`` command store those tables. One job per module:

- :mod:`.tokens`: text input checks, markup/URL cleaning, the notion of a word;
- :mod:`.association`: pronoun, honorific and non-binary-term counts and the association
  rule (female, male, non_binary, none); :func:`.association.agreement` validates it
  against texts whose gender is specified;
- :mod:`.who`: % women per occupation vs labour statistics, occupations per decile;
- :mod:`.marked_words`: calibrated Fightin' Words within each occupation;
- :mod:`.srbs`: subset similarity S, SRBS, Welch's t-test, word embeddings;
- :mod:`.figures`: the decile figure and the who-vs-labour scatter;
- :mod:`.mentions`: occupations mentioned in texts that come without an occupation column;
- :mod:`.tables`: every table of the ``who_how`` stage from one frame of labelled texts;
- :mod:`.stage`, :mod:`.inputs`, :mod:`.command`, :mod:`.page`: the ``who_how`` stage, the
  text-corpus reader, ``corpus-audit texts`` and the report section (not imported here).

See ``docs/who_vs_how.md``.
"""

from __future__ import annotations

from corpus_audit.methods.texts.association import AssociationCounter, agreement, associate, decide
from corpus_audit.methods.texts.marked_words import MarkedWords, MarkedWordsSettings, marked_words
from corpus_audit.methods.texts.srbs import (
    compare_sides,
    element_scores,
    embed_words,
    srbs,
    srbs_by_occupation,
    subset_similarity,
    welch,
)
from corpus_audit.methods.texts.who import decile_counts, percent_women

__all__ = [
    "AssociationCounter",
    "MarkedWords",
    "MarkedWordsSettings",
    "agreement",
    "associate",
    "compare_sides",
    "decide",
    "decile_counts",
    "element_scores",
    "embed_words",
    "marked_words",
    "percent_women",
    "srbs",
    "srbs_by_occupation",
    "subset_similarity",
    "welch",
]
