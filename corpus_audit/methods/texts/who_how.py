"""Every table of the who-and-how analysis, from one frame of labelled texts (no database).

The ``who_how`` stage (:mod:`corpus_audit.stages.who_how`) reads its inputs into a frame with
one row per (text, occupation) and hands it to :func:`who_how_tables`; what comes back is one
DataFrame per table of ``sql/schema/002_who_how.sql`` (columns in the table's order except the
association counts, which the stage writes batch by batch). Pure, so it is tested on its own.

Two labels per text:

- ``association``: the rule's (:mod:`.association`; female, male, non_binary, none);
- ``specified``: the gender the text states (female, male, non_binary or None): for a
  caption, its explicit indicator *words and names* (pronouns left out: they decide the
  association, so agreement with them would be circular); for a text corpus, its gender
  column.

Comparisons (the ``comparison`` column): ``associated`` compares the texts associated with
women vs men, ``specified`` those specified as women vs men. Each runs per occupation
(``scope = 'occupation'``) and once over every distinct text (``scope = 'pooled'``,
occupation NULL). SRBS takes the ``associated`` marked words as candidates C and the
``specified`` ones as targets T (per occupation with that occupation's targets, and pooled);
Welch's t-test compares the women's and men's SRBS over occupations and over the pooled
words' scores.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from corpus_audit.methods.texts.association import agreement
from corpus_audit.methods.texts.marked_words import MarkedWordsSettings, marked_words
from corpus_audit.methods.texts.srbs import (
    element_scores,
    srbs_by_occupation,
    subset_similarity,
    welch,
)
from corpus_audit.methods.texts.who import decile_counts, percent_women

COMPARISONS = {"associated": "association", "specified": "specified"}  # name -> label column
POOLED = "(pooled)"  # the single group of a pooled comparison (stored as occupation NULL)
Embedder = Callable[[list[str]], Mapping[str, np.ndarray]]


@dataclass(frozen=True)
class WhoHowSettings:
    """What the tables depend on besides the texts (the ``[texts]`` config, resolved)."""

    marked: MarkedWordsSettings
    drop_words: tuple[str, ...]
    labor_stats: Mapping[str, float | None]
    min_associated: int = 10
    confidence: float = 0.95


def who_how_tables(
    texts: pd.DataFrame,
    occupations: pd.DataFrame,
    settings: WhoHowSettings,
    embed: Embedder | None = None,
    agreement_labels: Mapping[str, str] | None = None,
) -> dict[str, pd.DataFrame]:
    """The tables ``texts_agreement``, ``texts_who``, ``texts_deciles``,
    ``texts_marked_words``, ``texts_marked_summary``, ``texts_calibration``, ``texts_srbs``
    and ``texts_srbs_tests`` (``embed`` None: the last two are empty).

    ``texts``: one row per text with ``text_id`` (int, unique), ``text``, ``association``,
    ``specified`` and the columns named in ``agreement_labels`` (``specified_by`` name ->
    column; default ``{"specified": "specified"}``). ``occupations``: ``text_id``,
    ``occupation``, one row per (text, occupation); a text may have none (it counts in the
    pooled comparisons only).
    """
    texts = texts.sort_values("text_id", kind="stable").reset_index(drop=True)
    rows = occupations[["text_id", "occupation"]].merge(texts, on="text_id", how="inner")
    rows = rows.sort_values(["text_id", "occupation"], kind="stable").reset_index(drop=True)
    labels = agreement_labels or {"specified": "specified"}
    out = {"texts_agreement": agreement_table(texts, labels)}
    out.update(_who(rows, settings))
    marked = {}
    for scope, frame, occupations in (
        ("occupation", rows, rows["occupation"]),
        ("pooled", texts, pd.Series([POOLED] * len(texts), dtype=object)),
    ):
        for comparison, column in COMPARISONS.items():
            marked[comparison, scope] = marked_words(
                occupations,
                frame["text"],
                frame[column],
                text_ids=frame["text_id"],
                settings=settings.marked,
                drop_words=settings.drop_words,
            )
    out.update(_marked_tables(marked))
    out.update(_srbs_tables(out["texts_marked_words"], embed))
    return out


def agreement_table(texts: pd.DataFrame, labels: Mapping[str, str]) -> pd.DataFrame:
    parts = []
    for name, column in labels.items():
        part = agreement(texts["association"], texts[column])
        part.insert(0, "specified_by", name)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)


def _who(rows: pd.DataFrame, settings: WhoHowSettings) -> dict[str, pd.DataFrame]:
    who, deciles = [], []
    for name, column in (("association", "association"), ("specified", "specified")):
        table = percent_women(
            rows["occupation"], rows[column], settings.labor_stats, confidence=settings.confidence
        )
        table.insert(0, "labels", name)
        who.append(table)
        placed = decile_counts(table, min_associated=settings.min_associated)
        placed.insert(0, "labels", name)
        deciles.append(placed)
    return {
        "texts_who": pd.concat(who, ignore_index=True),
        "texts_deciles": pd.concat(deciles, ignore_index=True),
    }


def _marked_tables(marked: Mapping[tuple[str, str], object]) -> dict[str, pd.DataFrame]:
    parts: dict[str, list[pd.DataFrame]] = {"words": [], "summary": [], "calibration": []}
    for (comparison, scope), result in marked.items():
        for name in parts:
            frame = getattr(result, name).copy()
            if "occupation" in frame.columns and scope == "pooled":
                frame["occupation"] = None
            frame.insert(0, "scope", scope)
            frame.insert(0, "comparison", comparison)
            parts[name].append(frame)
    return {
        "texts_marked_words": pd.concat(parts["words"], ignore_index=True),
        "texts_marked_summary": pd.concat(parts["summary"], ignore_index=True),
        "texts_calibration": pd.concat(parts["calibration"], ignore_index=True),
    }


SRBS_COLUMNS = ("scope", "occupation", "side", "words", "targets_female", "targets_male")
SRBS_VALUES = ("s_female", "s_male", "srbs")
TEST_COLUMNS = ("scope", "unit", "n_female", "n_male", "mean_female", "mean_male", "t", "df", "p")


def _srbs_tables(words: pd.DataFrame, embed: Embedder | None) -> dict[str, pd.DataFrame]:
    """SRBS per occupation and pooled, and the two Welch tests (module docstring)."""
    empty = {
        "texts_srbs": pd.DataFrame(columns=[*SRBS_COLUMNS, *SRBS_VALUES]),
        "texts_srbs_tests": pd.DataFrame(columns=list(TEST_COLUMNS)),
    }
    cand = words[words["comparison"] == "associated"]
    targ = words[words["comparison"] == "specified"]
    if embed is None or cand.empty or targ.empty:
        return empty
    vectors = embed(sorted(set(cand["word"]) | set(targ["word"])))
    per_occ = srbs_by_occupation(
        cand[cand["scope"] == "occupation"], targ[targ["scope"] == "occupation"], vectors
    )
    per_occ.insert(0, "scope", "occupation")
    tests = welch(*_sides(per_occ, "srbs"), unit="occupation")
    tests.insert(0, "scope", "occupation")
    pooled, scores = _pooled_srbs(
        cand[cand["scope"] == "pooled"], targ[targ["scope"] == "pooled"], vectors
    )
    pooled_test = welch(scores.get("female", []), scores.get("male", []), unit="word")
    pooled_test.insert(0, "scope", "pooled")
    srbs_table = pd.concat([per_occ, pooled], ignore_index=True)
    return {
        "texts_srbs": srbs_table[[*SRBS_COLUMNS, *SRBS_VALUES]],
        "texts_srbs_tests": pd.concat([tests, pooled_test], ignore_index=True),
    }


def _sides(table: pd.DataFrame, column: str) -> tuple[list[float], list[float]]:
    return tuple(  # type: ignore[return-value]
        table.loc[table["side"] == side, column].dropna().tolist() for side in ("female", "male")
    )


def _pooled_srbs(
    cand: pd.DataFrame, targ: pd.DataFrame, vectors: Mapping[str, np.ndarray]
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """One SRBS row per side of the pooled candidates, and each side's per-word scores."""

    def stack(frame: pd.DataFrame, side: str) -> np.ndarray:
        unique = list(dict.fromkeys(frame.loc[frame["side"] == side, "word"]))
        return np.stack([vectors[w] for w in unique]) if unique else np.zeros((0, 0))

    t_f, t_m = stack(targ, "female"), stack(targ, "male")
    rows, scores = [], {}
    for side in ("female", "male"):
        c = stack(cand, side)
        if not len(c):
            continue
        row = {"scope": "pooled", "occupation": None, "side": side, "words": len(c)}
        row.update({"targets_female": len(t_f), "targets_male": len(t_m)})
        row.update(dict.fromkeys(SRBS_VALUES, np.nan))
        if len(t_f) and len(t_m):
            scores[side] = element_scores(c, t_f, t_m)  # their mean is SRBS(C)
            row["s_female"], row["s_male"] = subset_similarity(c, t_f), subset_similarity(c, t_m)
            row["srbs"] = row["s_female"] - row["s_male"]
        rows.append(row)
    return pd.DataFrame(rows, columns=[*SRBS_COLUMNS, *SRBS_VALUES]), scores


def drop_words_for(
    association_words: Collection[str],
    gender_words: Collection[str],
    occupation_words: Collection[str],
) -> tuple[str, ...]:
    """The words removed before counting, sorted and de-duplicated: the association terms'
    pronouns and honorifics, the gender words (when dropped) and the occupations' own names."""
    return tuple(sorted({*association_words, *gender_words, *occupation_words}))
