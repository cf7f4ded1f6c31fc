"""``corpus-audit texts FILE... --out DIR``: the who-and-how analysis of any text corpus.

``DIR`` becomes a study directory (``study.toml`` + ``study.duckdb``) whose config says
``texts.source = "corpus"``, ``corpus.paths = FILE...`` and the columns given; the ``who_how``
stage (:mod:`corpus_audit.stages.who_how`) then reads the files and writes the same tables as
for a study's captions, and the page ``DIR/report/who_how.html`` shows them. Running the
command again on the same ``DIR`` resumes and skips finished work; with other files or
columns it updates the config and recomputes. A ``DIR`` holding a caption study is refused
(its tables are never touched).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corpus_audit.core.config import CONFIG_NAME, write_config
from corpus_audit.core.errors import StudyError, printable
from corpus_audit.core.fileio import entries_now, remove_new
from corpus_audit.core.pipeline import absolute_paths, init_study
from corpus_audit.core.store import StageRun, Study
from corpus_audit.core.study_lock import config_lock
from corpus_audit.report.who_how import write_page
from corpus_audit.stages.who_how import who_how


@dataclass(frozen=True)
class TextColumns:
    """What the text files hold where: the ``text_column``, ``occupation_column`` and
    ``gender_column`` ("": found by name, or the occupation by the lexicon) and the files'
    format (``fmt``, None: from the files)."""

    text_column: str = ""
    occupation_column: str = ""
    gender_column: str = ""
    fmt: str | None = None

    def settings(self) -> dict[str, dict[str, str]]:
        """What they set of ``study.toml``: ``{section: {key: value}}`` (``corpus``, ``texts``)."""
        return {
            "corpus": {"text_column": self.text_column, "format": self.fmt or "auto"},
            "texts": {
                "source": "corpus",
                "occupation_column": self.occupation_column,
                "gender_column": self.gender_column,
            },
        }


def run_texts(
    files: list[str], out: Path, columns: TextColumns = TextColumns(), *, progress: bool = True
) -> StageRun:
    """Create or update the text-corpus study ``out`` and run ``who_how`` on it."""
    settings = columns.settings()
    if out.exists() and not out.is_dir():
        raise StudyError(f"{printable(out)}: --out names a file; give a directory for the study")
    first = not (out / CONFIG_NAME).exists()
    before = entries_now(out)  # what a failed first run keeps
    if not first:
        study = Study.open(out)
        if study.config.texts.source != "corpus":
            study.close()
            raise StudyError(
                f"{printable(out)}: holds a caption study (texts.source = "
                f"{study.config.texts.source!r}); give `corpus-audit texts` another --out"
            )
        study.config.corpus.paths = absolute_paths(files)
        for section, values in settings.items():
            for key, value in values.items():
                setattr(getattr(study.config, section), key, value)
        study.config.corpus.validate()
        with config_lock(out, CONFIG_NAME):  # not while a `config set` or a stage runs
            write_config(study.config)
    else:
        study = init_study(out, files, overrides=settings)
    try:
        with study:
            run = who_how(study, progress=progress)

            run.outputs["page"] = str(write_page(study))
    except Exception:
        if first:  # a failed first run leaves nothing behind (an interrupted one resumes)
            remove_new(out, before)
        raise
    return run
