"""Subset similarity and the subset representational bias score (METHODS 4).

For two sets of vectors A and B (rows; for example the embeddings of two sets of marked
words):

    S(A, B) = mean over a in A of min over b in B of (1 - cos(a, b))        in [0, 2]

0 when every a has an identical direction in B. Not symmetric. The subset representational
bias score of a candidate set C (the marked words of the texts *associated* with one
gender) against target sets T_f, T_m (the marked words of texts whose gender was
*specified* as female / male) is

    SRBS(C) = S(C, T_f) - S(C, T_m)                                          in [-2, 2]

positive: C lies closer to the men's targets. Because S(C, .) is a mean over C, SRBS(C) is
the mean of the per-element scores min_b d(c, T_f) - min_b d(c, T_m)
(:func:`element_scores`).

**Comparison** (:func:`welch`): SRBS of the women's associated sets vs the men's, Welch's
t-test (scipy, unequal variances, two-sided). The unit is one candidate set per occupation
(:func:`srbs_by_occupation` gives SRBS of each occupation's women's and men's marked words);
with one occupation, compare the per-word scores of :func:`element_scores` instead (their
means are the two SRBS).

Functions take vectors, so any embedder works; :func:`embed_words` embeds words with the
embedder it is given (the ``who_how`` stage passes the project's SBERT all-MiniLM-L6-v2 from
:mod:`corpus_audit.backends.embeddings`).
Vectors need not be unit length (they are normalised here); a zero vector is an error.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import ttest_ind

SRBS_COLUMNS = (
    "occupation",
    "side",
    "words",
    "targets_female",
    "targets_male",
    "s_female",
    "s_male",
    "srbs",
)
WELCH_COLUMNS = ("unit", "n_female", "n_male", "mean_female", "mean_male", "t", "df", "p")
_CHUNK = 4096  # rows of A per matrix product: memory O(_CHUNK * |B|)


def _unit_rows(vectors: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array of vectors (rows), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{what}: the set is empty")
    norms = np.linalg.norm(arr, axis=1)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise ValueError(f"{what}: a vector is zero or not finite (no direction)")
    return arr / norms[:, None]


def nearest_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each row of ``a``: min over rows of ``b`` of the cosine distance 1 - cos, in
    [0, 2]. Raises ValueError for an empty set, mismatched dimensions or a zero vector."""
    ua, ub = _unit_rows(a, "subset A"), _unit_rows(b, "subset B")
    if ua.shape[1] != ub.shape[1]:
        raise ValueError(f"subset similarity: dimensions differ ({ua.shape[1]} vs {ub.shape[1]})")
    out = np.empty(ua.shape[0])
    for lo in range(0, ua.shape[0], _CHUNK):
        best = (ua[lo : lo + _CHUNK] @ ub.T).max(axis=1)
        out[lo : lo + _CHUNK] = 1.0 - np.clip(best, -1.0, 1.0)
    return out


def subset_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """S(A, B): mean over rows a of A of the cosine distance to the nearest row of B (0-2)."""
    return float(nearest_distances(a, b).mean())


def element_scores(c: np.ndarray, t_female: np.ndarray, t_male: np.ndarray) -> np.ndarray:
    """Per row c of C: min_b d(c, T_f) - min_b d(c, T_m), in [-2, 2]; their mean is SRBS(C)."""
    return nearest_distances(c, t_female) - nearest_distances(c, t_male)


def srbs(c: np.ndarray, t_female: np.ndarray, t_male: np.ndarray) -> float:
    """SRBS(C) = S(C, T_f) - S(C, T_m), in [-2, 2]; positive = closer to the men's targets."""
    return float(element_scores(c, t_female, t_male).mean())


def welch(female: Sequence[float], male: Sequence[float], unit: str = "occupation") -> pd.DataFrame:
    """Welch's t-test (two-sided, unequal variances; ``scipy.stats.ttest_ind``) of the
    women's scores vs the men's. NaNs are left out.

    One row with the columns ``unit`` (what one score is: ``occupation`` or ``word``),
    ``n_female``, ``n_male``, ``mean_female``, ``mean_male`` (SRBS, -2..2), ``t``
    (positive: the women's sets score higher, i.e. closer to the men's targets), ``df``
    (Welch-Satterthwaite degrees of freedom) and ``p``; t, df and p are NaN with fewer than
    two scores on a side or no variance at all.
    """
    x = np.asarray([v for v in female if v is not None and not math.isnan(v)], dtype=float)
    y = np.asarray([v for v in male if v is not None and not math.isnan(v)], dtype=float)
    t = df = p = math.nan
    if x.size >= 2 and y.size >= 2 and (np.ptp(x) > 0 or np.ptp(y) > 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = ttest_ind(x, y, equal_var=False)
        t, df, p = float(res.statistic), float(res.df), float(res.pvalue)
    row = {
        "unit": unit,
        "n_female": int(x.size),
        "n_male": int(y.size),
        "mean_female": float(x.mean()) if x.size else math.nan,
        "mean_male": float(y.mean()) if y.size else math.nan,
        "t": t,
        "df": df,
        "p": p,
    }
    return pd.DataFrame([row], columns=list(WELCH_COLUMNS))


def srbs_by_occupation(
    candidates: pd.DataFrame,
    targets: pd.DataFrame,
    vectors: Mapping[str, np.ndarray],
) -> pd.DataFrame:
    """SRBS of each occupation's women's and men's candidate words.

    ``candidates``: columns ``occupation``, ``side`` (``female``/``male``), ``word`` (for
    example the ``words`` table of :func:`corpus_audit.methods.texts.marked_words.marked_words` run
    on the associated texts). ``targets``: columns ``side``, ``word`` and optionally
    ``occupation`` (the marked words of the gender-specified texts); without an
    ``occupation`` column the same targets serve every occupation. ``vectors``: word ->
    vector (:func:`embed_words`).

    One row per (occupation, side) of the candidates, with the columns ``occupation``,
    ``side``, ``words`` (|C|), ``targets_female``, ``targets_male`` (|T_f|, |T_m|),
    ``s_female`` = S(C, T_f), ``s_male`` = S(C, T_m) (0-2) and ``srbs`` (-2..2); the three
    are NaN when C or a target set is empty. Raises KeyError naming a word without a vector
    and ValueError for a missing column.
    """
    for name, frame, needed in (
        ("candidates", candidates, {"occupation", "side", "word"}),
        ("targets", targets, {"side", "word"}),
    ):
        missing = needed - set(frame.columns)
        if missing:
            raise ValueError(f"srbs_by_occupation: {name} lacks the column(s) {sorted(missing)}")
    per_occ = "occupation" in targets.columns
    rows = []
    for (occ, side), group in candidates.groupby(["occupation", "side"], sort=True):
        tgt = targets[targets["occupation"] == occ] if per_occ else targets
        c = _stack(group["word"], vectors)
        tf = _stack(tgt.loc[tgt["side"] == "female", "word"], vectors)
        tm = _stack(tgt.loc[tgt["side"] == "male", "word"], vectors)
        s_f = s_m = math.nan
        if len(c) and len(tf) and len(tm):
            s_f, s_m = subset_similarity(c, tf), subset_similarity(c, tm)
        rows.append(
            {
                "occupation": occ,
                "side": side,
                "words": len(c),
                "targets_female": len(tf),
                "targets_male": len(tm),
                "s_female": s_f,
                "s_male": s_m,
                "srbs": s_f - s_m,
            }
        )
    return pd.DataFrame(rows, columns=list(SRBS_COLUMNS))


def compare_sides(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`welch` of the ``srbs`` of the ``female`` rows vs the ``male`` rows of a
    :func:`srbs_by_occupation` table (one score per occupation)."""
    female = table.loc[table["side"] == "female", "srbs"].tolist()
    male = table.loc[table["side"] == "male", "srbs"].tolist()
    return welch(female, male, unit="occupation")


def _stack(words: pd.Series, vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    unique = list(dict.fromkeys(words.tolist()))
    missing = [w for w in unique if w not in vectors]
    if missing:
        raise KeyError(f"no vector for the word(s) {missing[:5]} ({len(missing)} in all)")
    if not unique:
        return np.zeros((0, 0))
    return np.stack([np.asarray(vectors[w], dtype=float) for w in unique])


def embed_words(words: Sequence[str], embedder: Any) -> dict[str, np.ndarray]:
    """Word -> vector from ``embedder`` (anything with ``encode(texts) -> (N, D) array``, e.g.
    :func:`corpus_audit.backends.embeddings.load_embedder`'s SBERT all-MiniLM-L6-v2, whose
    vectors are unit-length float32). Each distinct word is embedded once; the stage that calls
    this loads the model."""
    unique = list(dict.fromkeys(words))
    if not unique:
        return {}
    vectors = embedder.encode(unique)
    return dict(zip(unique, vectors, strict=True))
