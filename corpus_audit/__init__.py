"""corpus_audit: audit image-caption corpora for gender-occupation bias and its amplification.

The Python API (:mod:`corpus_audit.api`, documented in ``docs/api.md``) is this package's
public surface: ``from corpus_audit import Study``. Its names are imported on first use, so
``import corpus_audit`` stays light (the ``corpus-audit`` command and ``__version__`` need no
DuckDB, pandas or matplotlib); ``__init__.pyi`` gives type checkers the same names.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

__version__ = "0.1.0"

__all__ = [
    "STAGES",
    "Amplification",
    "ClassifierBackend",
    "CorpusAuditError",
    "ExportResult",
    "Plugin",
    "PluginStatus",
    "StageRun",
    "Study",
    "amplify",
    "analyze_texts",
    "arena_leaderboard",
    "arena_votes_file",
    "demo_corpus",
    "logger",
    "plugins",
    "published_table3",
    "published_tables",
]

# a library's logger has no handler of its own: the application (a notebook) routes it
logging.getLogger("corpus_audit").addHandler(logging.NullHandler())


def __getattr__(name: str) -> Any:
    """The API's names, imported from :mod:`corpus_audit.api` when first asked for."""
    if name in __all__:
        value = getattr(importlib.import_module("corpus_audit.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'corpus_audit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
