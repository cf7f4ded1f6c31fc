"""The sampling rule of "More of the Same" (Mickel et al.; METHODS 4), as pure functions.

A *pair* is one (model, occupation, prompt, specified gender); ``gender`` None is an
unspecified prompt. What the ``llm_texts`` stage draws next for a pair depends only on its
committed counts (:class:`PairCounts`), so a killed run resumes from the database alone:

- **specified** prompt (a gender named): ``n`` texts, drawn as one batch (what is missing of
  ``n`` after a partial batch);
- **unspecified** prompt: batches of ``n`` until at least ``n`` texts are associated with
  women **and** ``n`` with men (the association rule of the ``who_how`` stage); after a batch,
  a pair whose cumulative count for women or for men is below ``abandon_below`` x ``n``
  (the paper: 10 %) is **abandoned**; a pair that reaches ``max_texts`` texts without either
  is **capped** (a safety limit the paper does not have; the counts are kept either way).

No database, no model: :func:`decide` and :func:`seed_for` are all the stage asks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

OPEN, DONE, ABANDONED, CAPPED = "open", "done", "abandoned", "capped"
STATES = (OPEN, DONE, ABANDONED, CAPPED)


@dataclass(frozen=True)
class Rule:
    """The rule's settings: ``n`` texts per side or per specified pair (the paper: 100),
    ``abandon_below`` the share of ``n`` under which a pair is abandoned (0.1), ``max_texts``
    the cap of texts per unspecified pair."""

    n: int = 100
    abandon_below: float = 0.1
    max_texts: int = 2000

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n: {self.n} must be >= 1")
        if not 0 <= self.abandon_below <= 1:
            raise ValueError(f"abandon_below: {self.abandon_below} is not in [0, 1]")
        if self.max_texts < self.n:
            raise ValueError(f"max_texts: {self.max_texts} must be >= n ({self.n})")


@dataclass(frozen=True)
class PairCounts:
    """What a pair has committed: texts, batches, and texts associated with women and men."""

    texts: int = 0
    batches: int = 0
    female: int = 0
    male: int = 0


@dataclass(frozen=True)
class Decision:
    """``state`` of the pair and, when it is open, how many texts its next batch draws."""

    state: str
    draw: int = 0


def decide(counts: PairCounts, rule: Rule, *, specified: bool) -> Decision:
    """The pair's state and next batch (module docstring)."""
    if specified:
        missing = rule.n - counts.texts
        return Decision(OPEN, missing) if missing > 0 else Decision(DONE)
    if counts.female >= rule.n and counts.male >= rule.n:
        return Decision(DONE)
    floor = rule.abandon_below * rule.n
    if counts.batches > 0 and (counts.female < floor or counts.male < floor):
        return Decision(ABANDONED)
    if counts.texts >= rule.max_texts:
        return Decision(CAPPED)
    return Decision(OPEN, min(rule.n, rule.max_texts - counts.texts))


def seed_for(study_seed: int, *key: object) -> int:
    """A request seed in [0, 2**31) from the study seed and the batch's key (model,
    occupation, prompt, gender, batch number): a batch drawn again after a crash asks with
    the same seed."""
    blob = "\x1f".join(str(k) for k in (study_seed, *key)).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") % 2**31
