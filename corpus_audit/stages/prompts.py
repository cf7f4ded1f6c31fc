"""Stage ``prompts``: the lexicon's prompts of a study without a corpus (``init --kind images``).

A model audited without its training data (docs/model_only.md) needs the prompts its images
answer, not a corpus: this stage renders ``lexicon.prompts`` over ``lexicon.occupations`` (the
templated sets, e.g. the paper's four templates x 62 occupations, and any MAGBIG/BAFIS prompt
table with its categories) exactly as ``select`` does in a study with a corpus
(:func:`corpus_audit.methods.lexicon.study_prompts.study_prompts`), into ``prompts`` and
``prompt_categories``. ``init --kind images`` runs it once, so images can be imported at once.
A rerun with the same prompts is skipped; other prompts replace both tables in one transaction
(images of prompts no longer listed stay in ``images``; ``analyze`` reads only listed prompts).
In a study with a corpus ``select`` writes these tables and this stage refuses to run.
"""

from __future__ import annotations

from typing import Any

from corpus_audit.core.errors import StageOrderError
from corpus_audit.core.kinds import study_kind
from corpus_audit.core.stage_runner import stage_body
from corpus_audit.core.store import StageRun, Study, clear_tables, dicts, insert_rows
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.methods.lexicon.study_prompts import (
    DEFAULT_LANGUAGE,
    prompt_set_languages,
    study_prompts,
)

NAME = "prompts"
TABLES = ("prompts", "prompt_categories")
_ORDER = {"prompts": "prompt_id", "prompt_categories": "prompt_id"}


@stage_body(NAME)
def prompts(study: Study, run: StageRun, *, progress: bool = True) -> StageRun:
    """Write ``prompts`` and ``prompt_categories`` from ``[lexicon]``; see the module docstring.
    Raises :class:`StageOrderError` in a study with a corpus (``select`` writes them there) and
    :class:`LexiconError` for a bad lexicon file (the study unchanged)."""
    if study_kind(study.config) != "images":
        raise StageOrderError(
            f"{study.root}: `prompts` is for a study without a corpus (init --kind images); in "
            "this study `select` writes the prompts"
        )
    lex = study.config.lexicon
    occupations = load_occupations(lex.occupations, base=study.root)
    found = study_prompts(
        lex.prompts, occupations, study.root, lex.categories, lex.prompt_occupations
    )
    new = {"prompts": found.prompts, "prompt_categories": found.categories}
    run.rows_in = run.rows_out = len(found.prompts)
    if all(_stored(study, t) == _sorted(rows, t) for t, rows in new.items()):
        run.skip(f"the {len(found.prompts)} prompts are already stored")
    else:
        with study.transaction() as con:
            for table, rows in new.items():  # table: one of TABLES, never config text
                clear_tables(con, table)
                insert_rows(con, table, rows)
    run.summary = _summary(study)
    run.provenance.update(
        prompts=len(found.prompts),
        prompt_sets=sorted({str(p["prompt_set"]) for p in found.prompts}),
        occupations=len({p["occupation"] for p in found.prompts}),
    )
    return run


def _stored(study: Study, table: str) -> list[tuple]:
    rows = study.con.execute(_STORED[table]).fetchall()
    return [tuple(str(v) for v in r) for r in rows]


def _sorted(rows: list[dict[str, Any]], table: str) -> list[tuple]:
    key = _ORDER[table]
    return [
        tuple(str(r.get(c)) for c in _COLUMNS[table]) for r in sorted(rows, key=lambda r: r[key])
    ]


_COLUMNS = {
    "prompts": ("prompt_id", "prompt_set", "template_id", "occupation", "text"),
    "prompt_categories": ("prompt_id", "family", "variant", "language", "category"),
}
#: the stored rows of each table, as _COLUMNS and _ORDER say
_STORED = {
    "prompts": "SELECT prompt_id, prompt_set, template_id, occupation, text FROM prompts "
    "ORDER BY prompt_id",
    "prompt_categories": "SELECT prompt_id, family, variant, language, category "
    "FROM prompt_categories ORDER BY prompt_id",
}


def _summary(study: Study) -> list[dict[str, Any]]:
    """Prompts per prompt set and language (a few lines; a templated set's language is its
    TOML's ``language``)."""
    rows = dicts(
        study.con.execute(
            "SELECT p.prompt_set, c.language, "
            "count(*) AS prompts, count(DISTINCT p.occupation) AS occupations "
            "FROM prompts p LEFT JOIN prompt_categories c USING (prompt_id) "
            "GROUP BY ALL ORDER BY p.prompt_set, c.language"
        )
    )
    languages = (
        prompt_set_languages(study.config.lexicon.prompts, study.root)
        if any(r["language"] is None for r in rows)
        else {}
    )
    for r in rows:
        r["language"] = r["language"] or languages.get(r["prompt_set"], DEFAULT_LANGUAGE)
    return rows
