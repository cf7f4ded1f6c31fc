"""The notes ``corpus-audit status`` prints under its table of stages.

Each note comes from a function ``fn(study) -> list[str]`` of the module that knows the
matter (the shortfall of the subsets, the API images, the imported images, the LLM texts).
They are named here as lazy entries (:func:`corpus_audit.core.registry.load`), so this core
module imports no stage, backend or report module, and ``status`` loads only those it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corpus_audit.core.registry import load

if TYPE_CHECKING:
    from corpus_audit.core.store import Study

# (the config section whose ``enabled`` switch the note needs, or None: always; lazy entry)
NOTES: tuple[tuple[str | None, str], ...] = (
    (None, "corpus_audit.tables.subsets:study_shortfall"),
    (None, "corpus_audit.backends.openai_images:status_lines"),
    (None, "corpus_audit.report.imports:status_lines"),
    ("llm", "corpus_audit.stages.llm_texts:status_lines"),
    (None, "corpus_audit.core.pipeline:next_steps"),  # a study without a corpus: what next
)


def status_notes(study: Study) -> list[str]:
    """Every note of :data:`NOTES` for ``study``, in order (a switched-off one is skipped)."""
    lines: list[str] = []
    for switch, entry in NOTES:
        if switch is None or getattr(study.config, switch).enabled:
            lines.extend(load(entry)(study))
    return lines
