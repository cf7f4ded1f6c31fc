"""``corpus-audit validate export / import``: the command side of the ``validate_export`` and
``validate_import`` stages (:mod:`corpus_audit.stages.validate`). The export gets its
thumbnails from the report and its strata from the analysis, which a stage imports neither of.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from corpus_audit.report.thumbs import thumbnail_uri
from corpus_audit.stages import validate as validate_stages
from corpus_audit.stages.analyze.strata import prepare_strata
from corpus_audit.stages.validate import THUMBNAIL_PX


def _thumbnail(path: Path, max_pixels: int) -> str | None:
    """A JPEG data URI of the image (longest side THUMBNAIL_PX), or None when unreadable."""
    return thumbnail_uri(path, size=THUMBNAIL_PX, max_pixels=max_pixels, quality=85)


#: ``validate export``: the ``validate_export`` stage with the report's thumbnails and the
#: analysis's strata (see :func:`corpus_audit.stages.validate.export_sheet`)
export_sheet = partial(
    validate_stages.export_sheet, thumbnail=_thumbnail, prepare_strata=prepare_strata
)
#: ``validate import``: the ``validate_import`` stage over the annotators' CSVs (see
#: :func:`corpus_audit.stages.validate.import_labels`)
import_labels = validate_stages.import_labels
