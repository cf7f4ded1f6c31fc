"""The one folder of downloaded model files (MediaPipe's face models), wherever a command runs.

In order: the study setting ``label.model_dir`` (when not empty), else the environment variable
``CORPUS_AUDIT_MODEL_DIR``, else the user's cache (``platformdirs``: ``~/.cache/corpus_audit/
models`` on Linux, ``~/Library/Caches/corpus_audit/models`` on macOS). ``corpus-audit
fetch-models`` writes there and every stage reads there, so a stage run from any working
directory finds the models. The Makefile points it at the repository's ``.cache/models``.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "CORPUS_AUDIT_MODEL_DIR"
APP_NAME = "corpus_audit"


def user_model_dir() -> Path:
    """``<user cache>/corpus_audit/models`` (platformdirs)."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir(APP_NAME, appauthor=False)) / "models"


def model_dir(setting: str | os.PathLike[str] | None = None) -> Path:
    """The model folder: ``setting`` (``label.model_dir``) if given, else ``$CORPUS_AUDIT_MODEL_DIR``,
    else :func:`user_model_dir`; ``~`` expanded, made absolute (never relative to a later cwd)."""
    chosen = str(setting or "") or os.environ.get(ENV_VAR, "") or str(user_model_dir())
    return Path(chosen).expanduser().absolute()
