"""Errors a user can fix. The CLI prints them as one line (exit status 2), no traceback."""

from __future__ import annotations


class CorpusAuditError(Exception):
    """Base of user-facing errors; messages name the file (or key) and the problem."""


class CorpusError(CorpusAuditError):
    """A corpus file that cannot be read: missing column, corrupt file, no rows."""


class ModelError(CorpusAuditError):
    """A model that cannot be loaded (offline, missing weights, unknown id)."""


class ImageSourceError(CorpusAuditError):
    """An image source that cannot be used (missing directory, unreadable shard)."""


class StageOrderError(CorpusAuditError):
    """A stage run before the stages whose tables it reads."""
