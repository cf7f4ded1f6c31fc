"""Reading a study that another process holds: a read-only open, else a snapshot.

DuckDB lets one process write a database at a time, and while it does no other process may
open the file, not even read-only. The rule (docs/api.md, "Reading a study another process
holds"): a reader first opens the study read-only; when another process holds it (a notebook
with an open ``Study``, a running stage), the reader copies ``study.duckdb`` and its
write-ahead log into a temporary folder and reads the copy. The copy holds everything the
holder had committed when it was taken (a later commit is not seen); nothing of the holder's
study is changed, locked or waited on. A copy taken while the holder checkpoints can be torn:
it is checked when opened and taken again (up to :data:`ATTEMPTS` times).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from corpus_audit.core.config import CONFIG_NAME
from corpus_audit.core.errors import StudyError, printable
from corpus_audit.core.store import DB_NAME, Study

ATTEMPTS = 3
IN_USE = "in use by another process"


def open_for_reading(root: Path | str, *, writable: bool = False) -> tuple[Study, Path | None]:
    """``(study, snapshot folder or None)``: the study opened read-only (``writable``: opened
    as usual, schema updates applied, as ``corpus-audit status`` always did), or a snapshot of
    it when another process holds it. The caller removes the folder after closing the study
    (:func:`close_reader`)."""
    root = Path(root)
    if root.name == CONFIG_NAME and root.is_file():
        root = root.parent
    try:
        return Study.open(root, read_only=not writable), None
    except StudyError as exc:
        if IN_USE not in str(exc):
            raise
    last: StudyError | None = None
    for attempt in range(ATTEMPTS):
        folder = Path(tempfile.mkdtemp(prefix="corpus_audit_snapshot_"))
        try:
            shutil.copy2(root / CONFIG_NAME, folder / CONFIG_NAME)
            shutil.copy2(root / DB_NAME, folder / DB_NAME)
            wal = root / f"{DB_NAME}.wal"
            if wal.exists():
                shutil.copy2(wal, folder / wal.name)
            study = Study.open(folder, read_only=True)
        except (OSError, StudyError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            last = exc if isinstance(exc, StudyError) else StudyError(f"{printable(root)}: {exc}")
            time.sleep(0.2 * (attempt + 1))
            continue
        study.root = root  # paths (export's default folder, images) are the study's own
        study.config.root = root
        return study, folder
    assert last is not None
    raise StudyError(
        f"{printable(root)}: held by another process and no consistent copy could be taken ({last})"
    )


def close_reader(study: Study, folder: Path | None) -> None:
    """Close a study from :func:`open_for_reading` and remove its snapshot."""
    try:
        study.close()
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
