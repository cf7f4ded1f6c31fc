"""The occupation matcher: one case-insensitive RE2 alternation over every lexicon form.

A form matches as a whole word: ``\\b`` at an ASCII word edge, a non-word character (or the
text's start or end) at another letter or digit (RE2's ``\\b`` is ASCII-only), nothing at
punctuation; the spaces inside a form match any run of white space. Used by the ``select``
stage's scan and by the text methods (mentions, association) on any text corpus.
"""

from __future__ import annotations

from dataclasses import dataclass

from corpus_audit.core.errors import CorpusError
from corpus_audit.methods.lexicon import Occupation

_RE2_SPECIAL = set("\\.+*?()|[]{}^$#&-~/")
_SPACE = r"[\s\p{Zs}]+"
_NOT_WORD = r"[^\p{L}\p{N}_]"


# -- the matcher -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Matcher:
    """The regex of all lexicon forms and the form -> occupation table behind it."""

    pattern: str  # RE2 syntax, to be used case-insensitively
    forms: tuple[tuple[str, str], ...]  # (form, occupation), forms lower case
    occupations: tuple[str, ...]  # lexicon order


def _escape(text: str) -> str:
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in text)


def _ascii_word(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def form_regex(form: str) -> str:
    """The RE2 fragment matching one lower-case surface form (see the module docstring)."""
    return form_body(form, space=_SPACE)


def form_body(form: str, space: str, outside_word: bool = True) -> str:
    """One form's fragment with ``space`` (a pattern) for the white space inside it; RE2 and
    Hyperscan (PCRE syntax) read the rest alike. ``outside_word = False`` leaves out the
    guards of non-ASCII letter edges (:func:`guarded_edges`: the caller checks them)."""
    body = space.join(_escape(part) for part in form.split())
    left = _edge(form[0], f"(?:^|{_NOT_WORD})" if outside_word else "")
    right = _edge(form[-1], f"(?:{_NOT_WORD}|$)" if outside_word else "")
    return left + body + right


def guarded_edges(form: str) -> tuple[bool, bool]:
    """Whether the form's first / last character is guarded by a consumed non-word
    character (a letter or digit that is not ASCII, see :func:`form_regex`)."""
    return (
        not _ascii_word(form[0]) and form[0].isalnum(),
        not _ascii_word(form[-1]) and form[-1].isalnum(),
    )


def _edge(ch: str, outside_word: str) -> str:
    """The guard for a form's edge character ``ch``: ``\\b`` after an ASCII word character,
    ``outside_word`` (start/end of text or a non-word character) after another letter or
    digit (RE2's ``\\b`` is ASCII-only), nothing after punctuation."""
    if _ascii_word(ch):
        return r"\b"
    if ch.isalnum():
        return outside_word
    return ""


def build_matcher(occupations: list[Occupation]) -> Matcher:
    """One case-insensitive RE2 alternation over every form, longest first (so ``prime
    minister`` wins over a shorter form it contains)."""
    forms: dict[str, str] = {}
    for occ in occupations:
        for form in occ.forms:
            norm = " ".join(form.lower().split())
            if norm:
                forms.setdefault(norm, occ.name)
    if not forms:
        raise CorpusError("lexicon: no occupation forms to search for")
    ordered = sorted(forms, key=lambda f: (-len(f), f))
    pattern = "(?:" + "|".join(form_regex(f) for f in ordered) + ")"
    return Matcher(
        pattern, tuple((f, forms[f]) for f in ordered), tuple(o.name for o in occupations)
    )
