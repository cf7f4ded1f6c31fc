"""Caption variants of the same images compared: pure functions over pandas frames.

A **variant** is one caption per image from one source: the corpus's alt-text (``original``),
a second human caption, a model's recaption (``blip``). The inputs are plain frames:

- ``captions``: one row per (``image_key``, ``variant``) with ``label``, the caption's explicit
  gender-indicator label of the ``indicators`` stage (``male`` | ``female`` | ``both`` |
  ``none``; METHODS 1.6, :mod:`corpus_audit.methods.gender_text`); optional ``caption`` (the text)
  and ``triggers`` (the readable triggers, ``woman; his``) for the examples.
- ``mentions``: one row per (``image_key``, ``variant``, ``occupation``) whose caption mentions
  the occupation (the ``select`` matcher; :func:`corpus_audit.methods.texts.mentions.find_mentions`
  for plain texts). Every (image_key, variant) must be in ``captions``.
- ``similarities`` (optional): (``image_key``, ``variant``, ``occupation``, ``similarity``) rows,
  the cosine (-1..1) between a caption and a prompt of the occupation, one row per prompt
  (:func:`corpus_audit.methods.recaption.similarity.caption_prompt_similarity`).

Terms. Labels: ``male_only`` = label male, ``female_only`` = female, ``both`` = both,
``any`` = not none; a **female indicator** is female or both, a **male indicator** male or
both (as ``analysis`` counts them). A comparison is between two variants ``a`` (the baseline,
e.g. ``original``) and ``b`` (e.g. ``blip``); differences are ``b - a``. **Paired images** have
a caption in both. The **image set of an occupation** for a pair is chosen by ``basis``:
``union`` (default: images whose ``a`` or ``b`` caption mentions it: "a doctor" -> "a woman in
a white coat" stays in the doctor's set), ``a`` (the baseline's mentions: what becomes of the
images selected from the original captions), ``b``, or ``both`` (both captions mention it).
Rows with ``occupation`` NULL (None) are over every paired image (or, for the per-variant
tables, every caption of the variant); for the mention metric there, "mentions" means "mentions
any occupation".

Intervals are **paired over images**: a percentile bootstrap (:class:`PairedBootstrap`,
default 1000 replicates, 95 %) resamples images with replacement and takes both variants'
values of each drawn image together, so the difference's interval is as narrow as the
images' agreement allows. For a 0/1 outcome the resampled difference depends only on how
many drawn images are +1 (b yes, a no), -1 and 0, so it is drawn as one multinomial
(exactly the same distribution, vectorised); for similarities the images are drawn as index
blocks. Each set's seed derives from the base seed and the set's identity, so an interval
does not depend on which other sets exist. Binary outcomes also get **McNemar's exact test**
(two-sided binomial test of the discordant images, b-only vs a-only, at 1/2; p = 1 with no
discordant image); mean similarity gets a paired t-test.

Every function returns a DataFrame with the ``*_COLUMNS`` of this module, in that order;
``None``/NaN where a value is undefined (an empty set). Percentages are 0-100.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from corpus_audit.methods.gender_text import LABELS
from corpus_audit.methods.stats import percentile_interval, stable_seed, wilson_interval

BASES = ("union", "a", "b", "both")
DEFAULT_REPLICATES = 1000
_BLOCK_DRAWS = 4_000_000  # integer draws held at once by the similarity bootstrap (~32 MB)

# indicator_rates(): one row per (variant, occupation), occupation NULL = all its captions.
RATE_COLUMNS = (
    "variant",
    "occupation",  # NULL: every caption of the variant
    "n_captions",  # captions of the variant that mention the occupation
    "n_male_only",  # of which labelled male
    "n_female_only",  # female
    "n_both",  # both
    "n_none",  # none
    "pct_male_only",  # 100 x n_male_only / n_captions
    "pct_female_only",
    "pct_both",
    "pct_any",  # 100 x (captions with any indicator) / n_captions
    "any_ci_low",  # Wilson 95 % interval of pct_any
    "any_ci_high",
)
# mention_changes(): one row per occupation (NULL = any occupation), over paired images.
MENTION_COLUMNS = (
    "variant_a",
    "variant_b",
    "occupation",  # NULL: the caption mentions any occupation
    "n_a",  # paired images whose a caption mentions it
    "n_b",  # ... whose b caption mentions it
    "n_kept",  # both captions mention it
    "n_gained",  # only the b caption mentions it
    "n_lost",  # only the a caption mentions it
    "pct_kept",  # 100 x n_kept / n_a: share of a's mentions that b keeps
)
# mention_flips(): one row per (occupation, image) that gains or loses the mention.
FLIP_COLUMNS = ("occupation", "image_key", "change", "caption_a", "caption_b")  # gained | lost
# image_changes(): one row per paired image.
CHANGE_COLUMNS = (
    "image_key",
    "variant_a",
    "variant_b",
    "label_a",  # male | female | both | none
    "label_b",
    "transition",  # 'label_a->label_b', e.g. 'none->female'
    "changed",  # label_a != label_b
    "occupations_a",  # occupations the a caption mentions, sorted, '; '-joined ('' none)
    "occupations_b",
    "caption_a",  # the texts and triggers when `captions` has them, else NULL
    "caption_b",
    "triggers_a",
    "triggers_b",
)
# transitions(): one row per (occupation, label_a, label_b): all 16 cells, zeros included.
TRANSITION_COLUMNS = (
    "variant_a",
    "variant_b",
    "occupation",  # NULL: every paired image
    "basis",  # union | a | b | both: how the occupation's images were chosen
    "label_a",
    "label_b",
    "transition",  # 'label_a->label_b'
    "changed",
    "n_images",  # images of the set with this pair of labels
    "pct_images",  # 100 x n_images / images in the set
    "example_keys",  # list of up to `examples` image keys, in key order
)
# transition_examples(): one row per example image of a changed cell.
EXAMPLE_COLUMNS = (
    "occupation",
    "transition",
    "image_key",
    "caption_a",
    "caption_b",
    "triggers_a",
    "triggers_b",
)
# similarity_summary(): one row per (variant, occupation), occupation NULL = all rows.
SIMILARITY_COLUMNS = (
    "variant",
    "occupation",
    "n_pairs",  # (caption, prompt) pairs
    "n_images",  # distinct images among them
    "mean_similarity",  # cosine, -1..1
    "std_similarity",  # sample standard deviation (NULL below 2 pairs)
    "q05",  # quantiles (linear interpolation)
    "q25",
    "q50",  # the median
    "q75",
    "q95",
)
# paired_differences(): one row per (occupation, metric).
DIFFERENCE_COLUMNS = (
    "variant_a",
    "variant_b",
    "occupation",  # NULL: every paired image
    "basis",
    "metric",  # see METRICS
    "unit",  # percent (0-100) | cosine (-1..1)
    "n_images",  # paired images in the set (with a similarity in both, for mean_similarity)
    "value_a",  # % of the set's a captions with the outcome (or their mean similarity)
    "value_b",
    "difference",  # value_b - value_a: percentage points, or cosine
    "ci_low",  # paired bootstrap percentile interval of the difference
    "ci_high",
    "n_a_only",  # binary metrics: images with the outcome in a but not b (discordant)
    "n_b_only",  # ... in b but not a
    "test",  # mcnemar_exact | paired_t
    "p_value",  # two-sided
)
# Binary outcomes per caption, from its label (and, for `mentions`, its occupations).
LABEL_METRICS: dict[str, tuple[str, ...]] = {
    "any_indicator": ("male", "female", "both"),
    "female_indicator": ("female", "both"),
    "male_indicator": ("male", "both"),
    "female_only": ("female",),
    "male_only": ("male",),
    "both": ("both",),
}
METRICS = (*LABEL_METRICS, "mentions", "mean_similarity")


@dataclass(frozen=True)
class PairedBootstrap:
    """Paired percentile bootstrap over images: ``replicates`` >= 0 resamples (0: no
    interval), base ``seed``, ``confidence`` in (0, 1)."""

    replicates: int = DEFAULT_REPLICATES
    seed: int = 0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.replicates < 0:
            raise ValueError(f"replicates: {self.replicates} must be >= 0")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence: {self.confidence} is not in (0, 1)")

    def interval(self, samples: np.ndarray | None) -> tuple[float | None, float | None]:
        if samples is None or len(samples) == 0:
            return (None, None)
        return percentile_interval(samples, self.confidence)

    def binary(self, a: np.ndarray, b: np.ndarray, *key: object) -> np.ndarray | None:
        """Replicates of 100 x (mean(b) - mean(a)) for 0/1 arrays over the same images."""
        n = len(a)
        if n == 0 or self.replicates == 0:
            return None
        plus = int(np.count_nonzero(b & ~a))
        minus = int(np.count_nonzero(a & ~b))
        rng = np.random.default_rng(stable_seed(self.seed, "recaption", *key))
        draws = rng.multinomial(n, [plus / n, minus / n, (n - plus - minus) / n], self.replicates)
        return 100.0 * (draws[:, 0] - draws[:, 1]) / n

    def mean_difference(self, diff: np.ndarray, *key: object) -> np.ndarray | None:
        """Replicates of mean(diff) over images drawn with replacement (index blocks)."""
        n = len(diff)
        if n == 0 or self.replicates == 0:
            return None
        rng = np.random.default_rng(stable_seed(self.seed, "recaption", *key))
        block = max(1, _BLOCK_DRAWS // n)
        out = np.empty(self.replicates)
        for start in range(0, self.replicates, block):
            stop = min(self.replicates, start + block)
            out[start:stop] = diff[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
        return out


# -- input checks -------------------------------------------------------------------------------
def _show(value: Any) -> str:
    """``repr`` of a key as the user wrote it (numpy scalars as plain Python values)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _require(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {', '.join(missing)}")


def check_captions(captions: pd.DataFrame) -> pd.DataFrame:
    """``captions`` with the optional columns added as NULL; ValueError naming the problem
    (missing column, NULL key or variant, unknown label, a (key, variant) twice)."""
    _require(captions, ("image_key", "variant", "label"), "captions")
    frame = captions.copy()
    for col in ("caption", "triggers"):
        if col not in frame.columns:
            frame[col] = None
    if frame["image_key"].isna().any() or frame["variant"].isna().any():
        raise ValueError("captions: image_key and variant must not be NULL")
    bad = sorted(set(frame["label"].dropna().astype(str)) - set(LABELS))
    if bad or frame["label"].isna().any():
        raise ValueError(
            f"captions: label must be one of {', '.join(LABELS)}; found {bad or ['NULL']}"
        )
    twice = frame.duplicated(["image_key", "variant"])
    if twice.any():
        row = frame[twice].iloc[0]
        raise ValueError(
            f"captions: image {_show(row['image_key'])} has two captions of variant "
            f"{_show(row['variant'])}"
        )
    return frame


def check_mentions(mentions: pd.DataFrame, captions: pd.DataFrame) -> pd.DataFrame:
    """Distinct (image_key, variant, occupation) rows; each must name a row of ``captions``."""
    _require(mentions, ("image_key", "variant", "occupation"), "mentions")
    frame = mentions[["image_key", "variant", "occupation"]].dropna().drop_duplicates()
    known = pd.MultiIndex.from_frame(captions[["image_key", "variant"]])
    here = pd.MultiIndex.from_frame(frame[["image_key", "variant"]])
    orphan = ~here.isin(known)
    if orphan.any():
        key, variant = here[orphan][0]
        raise ValueError(
            f"mentions: {int(orphan.sum())} row(s) name a caption that is not in captions "
            f"(first: image_key {_show(key)}, variant {_show(variant)}; same key type on both sides?)"
        )
    return frame.reset_index(drop=True)


def _check_pair(captions: pd.DataFrame, a: str, b: str) -> None:
    if a == b:
        raise ValueError(f"variants: compare two different variants, got {a!r} twice")
    present = set(captions["variant"])
    for v in (a, b):
        if v not in present:
            raise ValueError(
                f"variants: {v!r} has no captions (known: {', '.join(map(str, sorted(present)))})"
            )


def _occupation_order(found: Sequence[str], occupations: Sequence[str] | None) -> list[str]:
    if occupations is None:
        return sorted(set(found))
    extra = sorted(set(found) - set(occupations))
    return [*occupations, *extra]


# -- paired frames -------------------------------------------------------------------------------
def paired(captions: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """One row per image with a caption in both variants, sorted by key: ``image_key``,
    ``label_a``, ``label_b``, ``caption_a``, ``caption_b``, ``triggers_a``, ``triggers_b``."""
    frame = check_captions(captions)
    _check_pair(frame, a, b)
    cols = ["image_key", "label", "caption", "triggers"]
    left = frame.loc[frame["variant"] == a, cols]
    right = frame.loc[frame["variant"] == b, cols]
    both = left.merge(right, on="image_key", suffixes=("_a", "_b"), validate="one_to_one")
    return both.sort_values("image_key", kind="stable").reset_index(drop=True)


def occupation_sets(
    pairs: pd.DataFrame, mentions: pd.DataFrame, a: str, b: str, basis: str = "union"
) -> pd.DataFrame:
    """(``occupation``, ``image_key``, ``in_a``, ``in_b``) for the paired images of each
    occupation's set under ``basis`` (module docstring); sorted by occupation, key."""
    if basis not in BASES:
        raise ValueError(f"basis: {basis!r} is not one of {', '.join(BASES)}")
    keys = pd.Index(pairs["image_key"])
    flags = []
    for variant, flag in ((a, "in_a"), (b, "in_b")):
        part = mentions.loc[mentions["variant"] == variant, ["occupation", "image_key"]]
        part = part[part["image_key"].isin(keys)].drop_duplicates()
        flags.append(part.assign(**{flag: True}))
    sets = flags[0].merge(flags[1], on=["occupation", "image_key"], how="outer")
    sets[["in_a", "in_b"]] = sets[["in_a", "in_b"]].astype("boolean").fillna(False).astype(bool)
    keep = {
        "union": sets["in_a"] | sets["in_b"],
        "a": sets["in_a"],
        "b": sets["in_b"],
        "both": sets["in_a"] & sets["in_b"],
    }[basis]
    sets = sets[keep].sort_values(["occupation", "image_key"], kind="stable")
    return sets.reset_index(drop=True)[["occupation", "image_key", "in_a", "in_b"]]


def _any_mention(pairs: pd.DataFrame, mentions: pd.DataFrame, variant: str) -> np.ndarray:
    """Per paired image (in order): does its caption of ``variant`` mention any occupation."""
    keys = mentions.loc[mentions["variant"] == variant, "image_key"]
    return pairs["image_key"].isin(set(keys)).to_numpy()


def _groups(pairs: pd.DataFrame, sets: pd.DataFrame, order: list[str]):
    """(occupation or None, its paired rows, its in_a, its in_b) for every image set;
    None first: all paired images (in_a/in_b = None)."""
    yield None, pairs, None, None
    grouped = dict(tuple(sets.groupby("occupation", sort=False)))
    for occ in order:
        part = grouped.get(occ)
        if part is None:
            yield occ, pairs.iloc[0:0], np.zeros(0, bool), np.zeros(0, bool)
            continue
        rows = pairs.set_index("image_key").loc[part["image_key"]].reset_index()
        yield occ, rows, part["in_a"].to_numpy(), part["in_b"].to_numpy()


# -- per variant ---------------------------------------------------------------------------------
def indicator_rates(
    captions: pd.DataFrame,
    mentions: pd.DataFrame,
    *,
    variants: Sequence[str] | None = None,
    occupations: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per (variant, occupation): the captions that mention it and their indicator labels
    (:data:`RATE_COLUMNS`). Unpaired: each variant's own captions. ``variants`` (default all,
    sorted) and ``occupations`` (default those mentioned, sorted; given ones get rows even
    when nothing mentions them) fix the rows and their order."""
    caps = check_captions(captions)
    ments = check_mentions(mentions, caps)
    chosen = list(variants) if variants is not None else sorted(set(caps["variant"]))
    order = _occupation_order(ments["occupation"].tolist(), occupations)
    labelled = ments.merge(caps[["image_key", "variant", "label"]], on=["image_key", "variant"])
    rows = []
    for variant in chosen:
        own = caps.loc[caps["variant"] == variant, "label"]
        rows.append(_rate_row(variant, None, own))
        counts = labelled[labelled["variant"] == variant].groupby("occupation")["label"]
        by_occ = dict(tuple(counts))
        for occ in order:
            rows.append(_rate_row(variant, occ, by_occ.get(occ, pd.Series([], dtype=object))))
    return pd.DataFrame(rows, columns=list(RATE_COLUMNS))


def _rate_row(variant: str, occupation: str | None, labels: pd.Series) -> dict[str, Any]:
    counts = labels.value_counts()
    n = int(len(labels))
    k = {lab: int(counts.get(lab, 0)) for lab in LABELS}
    any_k = n - k["none"]
    lo, hi = wilson_interval(any_k, n)

    def pct(x: int) -> float | None:
        return 100.0 * x / n if n else None

    return {
        "variant": variant,
        "occupation": occupation,
        "n_captions": n,
        "n_male_only": k["male"],
        "n_female_only": k["female"],
        "n_both": k["both"],
        "n_none": k["none"],
        "pct_male_only": pct(k["male"]),
        "pct_female_only": pct(k["female"]),
        "pct_both": pct(k["both"]),
        "pct_any": pct(any_k),
        "any_ci_low": lo,
        "any_ci_high": hi,
    }


def similarity_summary(
    similarities: pd.DataFrame,
    *,
    variants: Sequence[str] | None = None,
    occupations: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per (variant, occupation): the distribution of caption-prompt cosine similarities
    (:data:`SIMILARITY_COLUMNS`); occupation NULL = every row of the variant."""
    sims = _check_similarities(similarities)
    chosen = list(variants) if variants is not None else sorted(set(sims["variant"]))
    order = _occupation_order(sims["occupation"].tolist(), occupations)
    rows = []
    for variant in chosen:
        own = sims[sims["variant"] == variant]
        rows.append(_similarity_row(variant, None, own))
        by_occ = dict(tuple(own.groupby("occupation", sort=False)))
        for occ in order:
            rows.append(_similarity_row(variant, occ, by_occ.get(occ, own.iloc[0:0])))
    return pd.DataFrame(rows, columns=list(SIMILARITY_COLUMNS))


def _check_similarities(similarities: pd.DataFrame) -> pd.DataFrame:
    _require(similarities, ("image_key", "variant", "occupation", "similarity"), "similarities")
    values = similarities["similarity"].to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(values).any() or (np.abs(values) > 1.0 + 1e-6).any():
        raise ValueError("similarities: similarity must be a cosine in [-1, 1], not NULL")
    return similarities


def _similarity_row(variant: str, occupation: str | None, rows: pd.DataFrame) -> dict[str, Any]:
    values = rows["similarity"].to_numpy(dtype=float)
    n = len(values)
    names = SIMILARITY_COLUMNS[6:]  # q05 ... q95
    q = np.quantile(values, [0.05, 0.25, 0.5, 0.75, 0.95]) if n else [None] * len(names)
    return {
        "variant": variant,
        "occupation": occupation,
        "n_pairs": n,
        "n_images": int(rows["image_key"].nunique()),
        "mean_similarity": float(values.mean()) if n else None,
        "std_similarity": float(values.std(ddof=1)) if n > 1 else None,
        **{k: (None if v is None else float(v)) for k, v in zip(names, q, strict=True)},
    }


# -- mentions between two variants ---------------------------------------------------------------
def mention_changes(
    captions: pd.DataFrame,
    mentions: pd.DataFrame,
    a: str,
    b: str,
    *,
    occupations: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Per occupation: paired images whose caption mentions it in ``a``, in ``b``, in both,
    gained and lost (:data:`MENTION_COLUMNS`); the first row (NULL) is "any occupation"."""
    pairs = paired(captions, a, b)
    ments = check_mentions(mentions, check_captions(captions))
    sets = occupation_sets(pairs, ments, a, b, "union")
    order = _occupation_order(sets["occupation"].tolist(), occupations)
    rows = [_mention_row(a, b, None, _any_mention(pairs, ments, a), _any_mention(pairs, ments, b))]
    grouped = dict(tuple(sets.groupby("occupation", sort=False)))
    for occ in order:
        part = grouped.get(occ, sets.iloc[0:0])
        rows.append(_mention_row(a, b, occ, part["in_a"].to_numpy(), part["in_b"].to_numpy()))
    return pd.DataFrame(rows, columns=list(MENTION_COLUMNS))


def _mention_row(a: str, b: str, occ: str | None, in_a: np.ndarray, in_b: np.ndarray) -> dict:
    n_a, n_kept = int(in_a.sum()), int((in_a & in_b).sum())
    return {
        "variant_a": a,
        "variant_b": b,
        "occupation": occ,
        "n_a": n_a,
        "n_b": int(in_b.sum()),
        "n_kept": n_kept,
        "n_gained": int((in_b & ~in_a).sum()),
        "n_lost": int((in_a & ~in_b).sum()),
        "pct_kept": 100.0 * n_kept / n_a if n_a else None,
    }


def mention_flips(captions: pd.DataFrame, mentions: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Every (occupation, paired image) whose mention is ``gained`` (only b mentions it) or
    ``lost`` (only a), with both captions (:data:`FLIP_COLUMNS`), by occupation then key."""
    pairs = paired(captions, a, b)
    ments = check_mentions(mentions, check_captions(captions))
    sets = occupation_sets(pairs, ments, a, b, "union")
    flips = sets[sets["in_a"] != sets["in_b"]].copy()
    flips["change"] = np.where(flips["in_b"], "gained", "lost")
    flips = flips.merge(pairs[["image_key", "caption_a", "caption_b"]], on="image_key")
    flips = flips.sort_values(["occupation", "image_key"], kind="stable")
    return flips.reset_index(drop=True)[list(FLIP_COLUMNS)]


# -- indicators between two variants --------------------------------------------------------------
def image_changes(captions: pd.DataFrame, mentions: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """Per paired image: both labels, whether the label changed, the occupations each caption
    mentions, and the texts (:data:`CHANGE_COLUMNS`), in key order."""
    pairs = paired(captions, a, b)
    ments = check_mentions(mentions, check_captions(captions))
    out = pairs.copy()
    out["variant_a"], out["variant_b"] = a, b
    out["transition"] = out["label_a"].astype(str) + "->" + out["label_b"].astype(str)
    out["changed"] = out["label_a"] != out["label_b"]
    for variant, col in ((a, "occupations_a"), (b, "occupations_b")):
        part = ments[ments["variant"] == variant].sort_values("occupation")
        joined = part.groupby("image_key")["occupation"].agg("; ".join)
        mapped = out["image_key"].map(joined).astype(object)
        out[col] = mapped.where(mapped.notna(), "")
    return out[list(CHANGE_COLUMNS)]


def transitions(
    captions: pd.DataFrame,
    mentions: pd.DataFrame,
    a: str,
    b: str,
    *,
    basis: str = "union",
    examples: int = 3,
    occupations: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The 4 x 4 table of (label in a, label in b) per occupation's image set, all 16 cells
    (zeros included), with up to ``examples`` (>= 0) image keys per cell
    (:data:`TRANSITION_COLUMNS`); the first block (occupation NULL) is every paired image."""
    if examples < 0:
        raise ValueError(f"examples: {examples} must be >= 0")
    pairs = paired(captions, a, b)
    sets = occupation_sets(pairs, check_mentions(mentions, check_captions(captions)), a, b, basis)
    order = _occupation_order(sets["occupation"].tolist(), occupations)
    rows = []
    for occ, part, _, _ in _groups(pairs, sets, order):
        total = len(part)
        cells = dict(tuple(part.groupby(["label_a", "label_b"], sort=False)["image_key"]))
        for la in LABELS:
            for lb in LABELS:
                keys = cells.get((la, lb), pd.Series([], dtype=object))
                rows.append(
                    {
                        "variant_a": a,
                        "variant_b": b,
                        "occupation": occ,
                        "basis": basis,
                        "label_a": la,
                        "label_b": lb,
                        "transition": f"{la}->{lb}",
                        "changed": la != lb,
                        "n_images": len(keys),
                        "pct_images": 100.0 * len(keys) / total if total else None,
                        "example_keys": sorted(keys.tolist())[:examples],
                    }
                )
    return pd.DataFrame(rows, columns=list(TRANSITION_COLUMNS))


def transition_examples(table: pd.DataFrame, captions: pd.DataFrame) -> pd.DataFrame:
    """The example images of every changed cell of a :func:`transitions` ``table`` with both
    captions and triggers from ``captions`` (:data:`EXAMPLE_COLUMNS`), in the table's order
    (occupation NULL first, then by occupation and transition), keys in key order."""
    _require(table, TRANSITION_COLUMNS, "transitions")
    if table.empty:
        return pd.DataFrame(columns=list(EXAMPLE_COLUMNS))
    a, b = table["variant_a"].iloc[0], table["variant_b"].iloc[0]
    changed = table[table["changed"] & (table["n_images"] > 0)]
    picked = changed[["occupation", "transition", "example_keys"]].explode("example_keys")
    picked = picked.rename(columns={"example_keys": "image_key"}).dropna(subset=["image_key"])
    if picked.empty:
        return pd.DataFrame(columns=list(EXAMPLE_COLUMNS))
    pairs = paired(captions, a, b)
    picked["image_key"] = picked["image_key"].astype(pairs["image_key"].dtype)
    out = picked.merge(pairs, on="image_key", how="left")
    return out.reset_index(drop=True)[list(EXAMPLE_COLUMNS)]


# -- paired differences ---------------------------------------------------------------------------
def _binary_row(
    a_val: np.ndarray, b_val: np.ndarray, key: tuple, boot: PairedBootstrap
) -> dict[str, Any]:
    n = len(a_val)
    a_only = int(np.count_nonzero(a_val & ~b_val))
    b_only = int(np.count_nonzero(b_val & ~a_val))
    discordant = a_only + b_only
    p = float(binomtest(b_only, discordant, 0.5).pvalue) if discordant else (1.0 if n else None)
    lo, hi = boot.interval(boot.binary(a_val, b_val, *key))
    va = 100.0 * float(a_val.mean()) if n else None
    vb = 100.0 * float(b_val.mean()) if n else None
    return {
        "unit": "percent",
        "n_images": n,
        "value_a": va,
        "value_b": vb,
        "difference": vb - va if n else None,
        "ci_low": lo,
        "ci_high": hi,
        "n_a_only": a_only,
        "n_b_only": b_only,
        "test": "mcnemar_exact",
        "p_value": p,
    }


def _similarity_diff_row(
    sa: np.ndarray, sb: np.ndarray, key: tuple, boot: PairedBootstrap
) -> dict[str, Any]:
    n = len(sa)
    diff = sb - sa
    p = None
    if n >= 2 and float(np.ptp(diff)) > 0.0:
        from scipy.stats import ttest_rel

        p = float(ttest_rel(sb, sa).pvalue)
    lo, hi = boot.interval(boot.mean_difference(diff, *key))
    return {
        "unit": "cosine",
        "n_images": n,
        "value_a": float(sa.mean()) if n else None,
        "value_b": float(sb.mean()) if n else None,
        "difference": float(diff.mean()) if n else None,
        "ci_low": lo,
        "ci_high": hi,
        "n_a_only": None,
        "n_b_only": None,
        "test": "paired_t",
        "p_value": p,
    }


def _image_similarity(sims: pd.DataFrame, variant: str) -> dict[tuple[Any, Any], float]:
    """(occupation, image_key) -> mean similarity of the variant's rows; and
    (None, image_key) -> mean over all the image's rows."""
    own = sims[sims["variant"] == variant]
    out = own.groupby(["occupation", "image_key"])["similarity"].mean().to_dict()
    for k, v in own.groupby("image_key")["similarity"].mean().items():
        out[(None, k)] = v
    return out


def paired_differences(
    captions: pd.DataFrame,
    mentions: pd.DataFrame,
    a: str,
    b: str,
    *,
    similarities: pd.DataFrame | None = None,
    basis: str = "union",
    bootstrap: PairedBootstrap = PairedBootstrap(),
    occupations: Sequence[str] | None = None,
) -> pd.DataFrame:
    """``b - a`` for every metric of :data:`METRICS` over each occupation's image set (and
    over every paired image, occupation NULL), with paired intervals and tests
    (:data:`DIFFERENCE_COLUMNS`). ``mean_similarity`` rows only when ``similarities`` is
    given; their images are those of the set with a similarity in both variants."""
    pairs = paired(captions, a, b)
    ments = check_mentions(mentions, check_captions(captions))
    sets = occupation_sets(pairs, ments, a, b, basis)
    order = _occupation_order(sets["occupation"].tolist(), occupations)
    sim_a = sim_b = None
    if similarities is not None:
        sims = _check_similarities(similarities)
        sim_a, sim_b = _image_similarity(sims, a), _image_similarity(sims, b)
    rows = []
    for occ, part, in_a, in_b in _groups(pairs, sets, order):
        la, lb = part["label_a"].to_numpy(), part["label_b"].to_numpy()
        if in_a is None:
            in_a, in_b = _any_mention(part, ments, a), _any_mention(part, ments, b)
        outcomes = {m: (np.isin(la, labs), np.isin(lb, labs)) for m, labs in LABEL_METRICS.items()}
        outcomes["mentions"] = (in_a.astype(bool), in_b.astype(bool))
        for metric, (va, vb) in outcomes.items():
            row = _binary_row(va, vb, (a, b, basis, occ, metric), bootstrap)
            rows.append({"occupation": occ, "metric": metric, **row})
        if sim_a is not None and sim_b is not None:
            keys = [(occ, k) for k in part["image_key"]]
            both = [k for k in keys if k in sim_a and k in sim_b]
            sa = np.array([sim_a[k] for k in both], dtype=float)
            sb = np.array([sim_b[k] for k in both], dtype=float)
            key = (a, b, basis, occ, "mean_similarity")
            rows.append(
                {
                    "occupation": occ,
                    "metric": "mean_similarity",
                    **_similarity_diff_row(sa, sb, key, bootstrap),
                }
            )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=list(DIFFERENCE_COLUMNS))
    frame["variant_a"], frame["variant_b"], frame["basis"] = a, b, basis
    for col in ("n_a_only", "n_b_only"):
        frame[col] = frame[col].astype("Int64")
    return frame[list(DIFFERENCE_COLUMNS)]


# -- everything at once -------------------------------------------------------------------------
@dataclass
class VariantComparison:
    """Every table of one comparison of variant ``b`` against ``a`` (see each function)."""

    indicator_rates: pd.DataFrame  # indicator_rates(), both variants
    mention_changes: pd.DataFrame
    mention_flips: pd.DataFrame
    image_changes: pd.DataFrame
    transitions: pd.DataFrame
    transition_examples: pd.DataFrame
    differences: pd.DataFrame  # paired_differences()
    similarity: pd.DataFrame | None  # similarity_summary(), when similarities were given

    def tables(self) -> dict[str, pd.DataFrame]:
        """Name -> table (the study's tables: :data:`corpus_audit.tables.analysis.VARIANT_TABLES`)."""
        return {k: v for k, v in vars(self).items() if v is not None}


def compare_variants(
    captions: pd.DataFrame,
    mentions: pd.DataFrame,
    a: str,
    b: str,
    *,
    similarities: pd.DataFrame | None = None,
    basis: str = "union",
    examples: int = 3,
    bootstrap: PairedBootstrap = PairedBootstrap(),
    occupations: Sequence[str] | None = None,
) -> VariantComparison:
    """Every table comparing ``b`` with ``a`` (module docstring for the terms)."""
    both = [a, b]
    table = transitions(
        captions, mentions, a, b, basis=basis, examples=examples, occupations=occupations
    )
    return VariantComparison(
        indicator_rates=indicator_rates(captions, mentions, variants=both, occupations=occupations),
        mention_changes=mention_changes(captions, mentions, a, b, occupations=occupations),
        mention_flips=mention_flips(captions, mentions, a, b),
        image_changes=image_changes(captions, mentions, a, b),
        transitions=table,
        transition_examples=transition_examples(table, captions),
        differences=paired_differences(
            captions,
            mentions,
            a,
            b,
            similarities=similarities,
            basis=basis,
            bootstrap=bootstrap,
            occupations=occupations,
        ),
        similarity=None
        if similarities is None
        else similarity_summary(similarities, variants=both, occupations=occupations),
    )
