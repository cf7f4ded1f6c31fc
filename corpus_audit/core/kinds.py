"""Study kinds: the settings ``corpus-audit init --kind KIND`` writes into ``study.toml``.

A new study's settings come from three places, later ones winning: a preset
(:mod:`corpus_audit.core.preset`), the kind's own settings (:func:`kind_settings`), then the
flags given on the command line (:func:`init_settings` merges them). The CLI only names the
flags; what a kind means lives here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corpus_audit.core.errors import StudyError
from corpus_audit.core.preset import load_preset, resolve

if TYPE_CHECKING:
    from corpus_audit.core.config import StudyConfig

KINDS = ("amplification", "pst", "llm", "images")  # amplification: the default kind
# kinds whose study may go without a corpus (PST: the caption side is optional; LLM: the texts
# come from llm.models, docs/who_vs_how.md; images: a model audited without its training data,
# docs/model_only.md)
WITHOUT_CORPUS = ("pst", "llm", "images")
# kinds that never read a corpus: init refuses --corpus for them
NO_CORPUS = ("images",)
# the labour statistics an LLM study compares its texts with (bundled with the lexicon)
LLM_LABOR_STATS = "builtin:more_of_the_same/occupations_en.csv"

Settings = dict[str, dict[str, Any]]  # section -> key -> value, as in study.toml


def kind_settings(kind: str, models: list[str] | None = None) -> Settings:
    """The settings study kind ``kind`` (one of :data:`KINDS`) sets; ``models`` are the text
    generators of an LLM study (``llm.models``; None keeps the default). Raises
    :class:`StudyError` for models given to another kind."""
    if kind not in KINDS:
        raise StudyError(f"init: unknown study kind {kind!r} (one of {', '.join(KINDS)})")
    if kind == "llm":
        return {
            "llm": {"enabled": True, "models": models or None},
            "texts": {"source": "llm"},
            "lexicon": {"labor_stats": LLM_LABOR_STATS},
        }
    if models:
        raise StudyError("init: --model is for a --kind llm study (llm.models)")
    return {"pst": {"enabled": True}} if kind == "pst" else {}


def init_settings(
    kind: str,
    *,
    has_corpus: bool,
    preset: str | None = None,
    models: list[str] | None = None,
    flags: Settings | None = None,
) -> tuple[Settings, list[str]]:
    """The settings of a new study and the preset's notes: ``preset``'s settings, then the
    kind's, then ``flags`` (section -> key -> value; None values are flags not given).

    Raises :class:`StudyError` when a kind that needs a corpus has none (``has_corpus``).
    """
    settings: Settings = {}
    notes: list[str] = []
    if preset:
        settings, notes = resolve(load_preset(preset))
    own = kind_settings(kind, models)
    if not has_corpus and kind not in WITHOUT_CORPUS:
        raise StudyError(
            "init: give --corpus (only a --kind pst, llm or images study may go without one)"
        )
    if has_corpus and kind in NO_CORPUS:
        raise StudyError(
            "init: a --kind images study audits a model without its training data and reads no "
            "corpus: drop --corpus (or leave out --kind images to compare the model with a "
            "corpus, docs/model_only.md)"
        )
    for layer in (own, flags or {}):
        for section, values in layer.items():
            given = {k: v for k, v in values.items() if v is not None}
            settings.setdefault(section, {}).update(given)
    return settings, notes


def study_kind(config: StudyConfig) -> str:
    """``pst`` for a Paired Stereotype Test study (``[pst] enabled``), ``llm`` for a study of
    LLM-written texts (``[llm] enabled``), ``images`` for a study without a corpus (a model
    audited from its images alone, ``init --kind images``), else ``amplification``."""
    if config.pst.enabled:
        return "pst"
    if config.llm.enabled:
        return "llm"
    return "amplification" if config.corpus.paths else "images"


def prompt_stage(config: StudyConfig) -> str:
    """The stage that writes the prompts images are generated or imported for: ``pst_prompts``
    (PST study), ``prompts`` (a study without a corpus) or ``select``."""
    return {"pst": "pst_prompts", "images": "prompts"}.get(study_kind(config), "select")
