"""The 18 cells perceived gender x tone group x age group corrected by the product model
(docs/attributes.md, "The cells, corrected").

Within each L* tone group, gender and age group are corrected jointly with the Kronecker
product of the source's gender matrix and age-group matrix (both learnt from annotator labels
by :mod:`~corpus_audit.stages.analyze.attribute_errors`); an ambiguous gender or a minor is an
uncounted outcome. The tone groups' shares stay as measured: no human truth maps the L*
groups. Intervals: bootstrap replicates of both sides' faces (multinomial) with the matrices'
replicates.
"""

from __future__ import annotations

import numpy as np

from corpus_audit.methods import multiclass as mk
from corpus_audit.methods.age_bins import AGE_GROUPS
from corpus_audit.stages.analyze.attribute_errors import (
    GENDER,
    GENDERS,
    TRAINING,
    AttributeCorrection,
)

CELL_AGES = AGE_GROUPS  # the age matrices' scale (age_group)


def cell_counts(cells: list[tuple[str, str, str]], tones: tuple[str, ...]) -> np.ndarray:
    """``(tones, 6)`` counts of one side's measured cells: per tone group, gender (slowest)
    x age group."""
    tone_of = np.array([tones.index(c[1]) for c in cells], dtype=int)
    ga = np.array([GENDERS.index(c[0]) * 3 + CELL_AGES.index(c[2]) for c in cells], dtype=int)
    counts = np.zeros((len(tones), 6))
    np.add.at(counts, (tone_of, ga), 1)
    return counts


def _joint(
    counts: np.ndarray,
    gender_m: np.ndarray,
    age_m: np.ndarray,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Corrected shares (0-1) of the cells (gender x tone x age, in :data:`CELLS` order) of
    one side from its :func:`cell_counts`: within each tone group, gender and age group
    corrected jointly by the product model (the Kronecker product of the two matrices; an
    ambiguous gender or a minor is an uncounted outcome); the tone groups' shares as measured.
    ``rng``: one multinomial replicate of the side's faces instead of the faces themselves."""
    if rng is not None:
        n = int(counts.sum())
        counts = rng.multinomial(n, counts.ravel() / n).reshape(counts.shape).astype(float)
    joint = np.kron(gender_m, age_m)  # (6, 12): column = predicted gender * 4 + predicted age
    counted = [g * 4 + a for g in range(2) for a in range(3)]
    order = counted + [c for c in range(12) if c not in counted]
    out = np.zeros((2, len(counts), 3))
    for t, row in enumerate(counts):
        if row.sum() == 0:
            continue
        p = mk.corrected_shares(row / row.sum(), joint[:, order]).reshape(2, 3)
        out[:, t, :] = p * row.sum() / counts.sum()
    return out.ravel()  # gender slowest, then tone, then age: the CELLS order


def corrected_cells(
    fix: AttributeCorrection,
    model: str,
    sides: tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]],
    tones: tuple[str, ...],
    confidence: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | str:
    """(training, generated, change, (low, high) of the change) in percent per cell, or why
    the cells cannot be corrected. ``sides``: the measured cells of the training and the
    generated faces."""
    need = [(a, s) for s in (TRAINING, model) for a in (GENDER, "age_group")]
    missing = [f"{a} of {s}" for a, s in need if (a, s) not in fix.matrices]
    if missing:
        return "not corrected: no applied error matrix for " + ", ".join(missing)
    shares, draws = [], []
    for source, cells in zip((TRAINING, model), sides, strict=True):
        counts = cell_counts(cells, tones)
        g_m, a_m = fix.matrices[(GENDER, source)], fix.matrices[("age_group", source)]
        shares.append(_joint(counts, g_m, a_m))
        g_d, a_d = fix.draws[(GENDER, source)], fix.draws[("age_group", source)]
        draws.append(np.stack([_joint(counts, g, a, rng) for g, a in zip(g_d, a_d, strict=True)]))
    change = draws[1] - draws[0]
    lo, hi = np.nanquantile(change, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
    return 100 * shares[0], 100 * shares[1], 100 * (shares[1] - shares[0]), 100 * np.stack([lo, hi])
