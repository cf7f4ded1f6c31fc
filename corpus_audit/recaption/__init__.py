"""Recaptioning experiments: captions written by a model, and caption variants compared.

A recaptioning experiment replaces or augments a corpus's web alt-text with captions written by
a model (BLIP/GIT-style captioners, as LAION-COCO did) and asks what that does to the bias
signal: do the new captions name gender more or less often, per occupation; do they still
mention the occupation; do they read more like the prompts people type? One job per module:

- :mod:`.models`: the :class:`~.models.Captioner` protocol, its registry and two kinds:
  ``transformers`` (an image-captioning model: BLIP, BLIP-2, GIT and every other
  image-text-to-text class of transformers) and ``paraphrase`` (a text-only rewrite of the
  existing caption through :mod:`corpus_audit.paraphrase`);
- :mod:`.driver`: the resumable, batched loop that decodes images (the project's safe
  decoder), captions them and hands each finished batch to a sink;
- :mod:`.compare`: variant comparison as pure functions over pandas frames (mentions gained
  and lost, indicator rates, indicator transitions, similarity summaries, paired differences
  with bootstrap intervals and McNemar's exact test);
- :mod:`.similarity`: caption-prompt cosine similarity per caption with the project's embedder.

- :mod:`.stage`: the ``recaption`` stage (the driver over the study's training images into the
  ``recaptions`` table); :mod:`.tables`: the ``variants`` stage's comparisons as study tables
  and CSVs (the stage itself: :mod:`corpus_audit.variants`). See ``docs/recaptioning.md``.
"""

from __future__ import annotations

from corpus_audit.recaption.compare import VariantComparison, compare_variants
from corpus_audit.recaption.driver import RecaptionSummary, recaption
from corpus_audit.recaption.models import (
    CAPTIONERS,
    Captioner,
    CaptionInput,
    CaptionSettings,
    load_captioner,
    register_captioner,
)

__all__ = [
    "CAPTIONERS",
    "CaptionInput",
    "CaptionSettings",
    "Captioner",
    "RecaptionSummary",
    "VariantComparison",
    "compare_variants",
    "load_captioner",
    "recaption",
    "register_captioner",
]
