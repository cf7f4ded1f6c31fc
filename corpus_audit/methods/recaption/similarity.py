"""Caption-prompt cosine similarity per caption, for comparing caption variants.

The question (METHODS 1.5 diagnostics; the paper found nearest-neighbour captions far closer
to the prompts than keyword captions, mean cosine 0.385 -> 0.704) asked of recaptions: do a
model's captions read more like the prompts people type? For each (image, variant,
occupation) the caption is compared with every prompt of the occupation, one row per prompt,
with the project's embedder (:func:`corpus_audit.backends.embeddings.load_embedder`; SBERT
all-MiniLM-L6-v2 by default, as the ``neighbors`` stage), so the numbers are on the same scale
as ``similarity_diagnostics``.

:func:`similarity_inputs` lists the captions to score for a comparison of two variants: both
variants' captions of every image in each occupation's image set
(:func:`corpus_audit.methods.recaption.compare.occupation_sets`), so an image whose recaption no longer
names the occupation is still scored against the occupation's prompts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from corpus_audit.methods.recaption.compare import (
    check_captions,
    check_mentions,
    occupation_sets,
    paired,
)

SIMILARITY_INPUT_COLUMNS = ("image_key", "variant", "occupation", "caption")
# caption_prompt_similarity(): one row per (image, variant, occupation, prompt).
PAIR_COLUMNS = ("image_key", "variant", "occupation", "prompt_id", "similarity")


def similarity_inputs(
    captions: pd.DataFrame, mentions: pd.DataFrame, a: str, b: str, *, basis: str = "union"
) -> pd.DataFrame:
    """(image_key, variant, occupation, caption) for both variants of every image in each
    occupation's set (:data:`SIMILARITY_INPUT_COLUMNS`); ``captions`` needs ``caption``."""
    caps = check_captions(captions)
    if caps["caption"].isna().all() and len(caps):
        raise ValueError("captions: a similarity needs the caption texts (column 'caption')")
    pairs = paired(caps, a, b)
    sets = occupation_sets(pairs, check_mentions(mentions, caps), a, b, basis)
    merged = sets[["occupation", "image_key"]].merge(pairs, on="image_key")
    parts = [
        pd.DataFrame(
            {
                "image_key": merged["image_key"],
                "variant": variant,
                "occupation": merged["occupation"],
                "caption": merged[f"caption_{side}"],
            }
        )
        for variant, side in ((a, "a"), (b, "b"))
    ]
    return pd.concat(parts, ignore_index=True)[list(SIMILARITY_INPUT_COLUMNS)]


def caption_prompt_similarity(
    items: pd.DataFrame, prompts: pd.DataFrame, embedder: Any
) -> pd.DataFrame:
    """Cosine similarity of each item's caption with each prompt of its occupation.

    ``items``: :data:`SIMILARITY_INPUT_COLUMNS`; ``prompts``: ``occupation``, ``prompt_id``,
    ``text`` (the rows of the ``prompts`` table, :func:`corpus_audit.methods.lexicon.render_prompts`);
    ``embedder``: anything with ``encode(texts) -> (n, dim)`` L2-normalised float rows. Each
    distinct text is embedded once. Returns :data:`PAIR_COLUMNS`, similarity in [-1, 1]. An
    occupation without a prompt, or a NULL caption, is a ValueError.
    """
    for frame, cols, name in (
        (items, SIMILARITY_INPUT_COLUMNS, "items"),
        (prompts, ("occupation", "prompt_id", "text"), "prompts"),
    ):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{name}: missing column(s) {', '.join(missing)}")
    if items["caption"].isna().any():
        row = items[items["caption"].isna()].iloc[0]
        raise ValueError(f"items: image {row['image_key']!r} has no caption text")
    unknown = sorted(set(items["occupation"]) - set(prompts["occupation"]))
    if unknown:
        raise ValueError(f"prompts: no prompt for occupation(s) {', '.join(unknown[:5])}")
    if items.empty:
        return pd.DataFrame(columns=list(PAIR_COLUMNS))
    texts = pd.unique(pd.concat([items["caption"], prompts["text"]], ignore_index=True))
    vectors = np.asarray(embedder.encode(list(texts)), dtype=np.float32)
    row_of = {t: i for i, t in enumerate(texts)}
    scored = items.merge(prompts[["occupation", "prompt_id", "text"]], on="occupation", how="inner")
    left = vectors[scored["caption"].map(row_of).to_numpy()]
    right = vectors[scored["text"].map(row_of).to_numpy()]
    sims = np.clip(np.einsum("ij,ij->i", left, right), -1.0, 1.0)
    out = scored[["image_key", "variant", "occupation", "prompt_id"]].copy()
    out["similarity"] = sims.astype(np.float64)
    return out.reset_index(drop=True)
