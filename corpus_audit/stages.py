"""Names and order of the stages (kept apart so the CLI can list them without importing them)."""

from __future__ import annotations

# (stage name, "module:function"), in the order `corpus-audit run` executes them.
STAGES: list[tuple[str, str]] = [
    ("select", "corpus_audit.select:select"),
    ("indicators", "corpus_audit.indicators:indicators"),
    ("neighbors", "corpus_audit.neighbors:neighbors"),
    ("images", "corpus_audit.images:images"),
    ("generate", "corpus_audit.generate:generate"),
    ("label", "corpus_audit.label:label"),
    ("analyze", "corpus_audit.analysis:analyze"),
    ("report", "corpus_audit.report:report"),
]
STAGE_NAMES = [name for name, _ in STAGES]
# What `corpus-audit run` executes: `label` runs before `generate` too, because the training
# subsets are cut at N labelled training images and the captions used as prompts come from
# that cut (corpus_audit/subsets.py); its second run labels the generated images. Each run
# only labels what has no label yet, so the second one does not repeat the first's work.
RUN_ORDER = [
    "select",
    "indicators",
    "neighbors",
    "images",
    "label",
    "generate",
    "label",
    "analyze",
    "report",
]
