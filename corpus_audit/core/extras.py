"""Optional dependencies: which extra of ``corpus_audit`` a stage needs, checked before it runs.

A stage whose library is missing must fail before it writes anything (no run record, no
half-built study), in one line naming the extra to install. :func:`require` checks without
importing (``importlib.util.find_spec``), so the check costs milliseconds; a module set to
``None`` in ``sys.modules`` (how a test hides an installed one) counts as missing.

The extras (``pyproject.toml``): ``text`` (spaCy, gender-guesser, wordfreq), ``embed``
(sentence-transformers, FAISS), ``image`` (MediaPipe, CLIP...), ``demo`` (what ``corpus-audit
demo`` needs: ``text`` + ``embed``), ``all`` (every extra but ``dev``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable

from corpus_audit.core.errors import CorpusAuditError

# extra -> (import name, distribution name) of every library it brings that stages import
EXTRAS: dict[str, tuple[tuple[str, str], ...]] = {
    "text": (("spacy", "spacy"), ("gender_guesser", "gender-guesser"), ("wordfreq", "wordfreq")),
    "embed": (("sentence_transformers", "sentence-transformers"), ("faiss", "faiss-cpu")),
}
# stage -> the extras it cannot run without (stages that only need them when they have work,
# such as `label` on a study without images, are not listed: they say so when they start)
STAGE_EXTRAS: dict[str, tuple[str, ...]] = {
    "indicators": ("text",),
    "neighbors": ("embed",),
    "pst_captions": ("text",),
}
DEMO_EXTRAS = ("text", "embed")


class MissingExtraError(CorpusAuditError):
    """An optional dependency is not installed; the message names the extra to install."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found on the path and not hidden in sys.modules)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(extras: Iterable[str]) -> list[tuple[str, str]]:
    """``(extra, distribution)`` of every library of ``extras`` that is not installed."""
    return [
        (extra, dist)
        for extra in dict.fromkeys(extras)
        for module, dist in EXTRAS.get(extra, ())
        if not installed(module)
    ]


def require(what: str, extras: Iterable[str], *, extra_name: str | None = None) -> None:
    """Raise :class:`MissingExtraError` naming the extra when a library of ``extras`` is
    missing; ``extra_name`` is the extra to advise (default: the first missing one's)."""
    gone = missing(extras)
    if not gone:
        return
    extra = extra_name or gone[0][0]
    names = ", ".join(dict.fromkeys(dist for _, dist in gone))
    raise MissingExtraError(
        f"{what} needs {names}, not installed: pip install 'corpus_audit[{extra}]'"
    )


def require_stages(stages: Iterable[str]) -> None:
    """Check every stage of ``stages`` (a run order) before the first one runs."""
    for stage in dict.fromkeys(stages):
        require(f"stage {stage}", STAGE_EXTRAS.get(stage, ()))


def require_demo() -> None:
    """What ``corpus-audit demo`` needs, checked before it creates the study."""
    require("corpus-audit demo", DEMO_EXTRAS, extra_name="demo")
