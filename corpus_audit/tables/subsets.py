"""The training subsets after the cut: which captions (and images) each subset holds.

``samples`` holds, per subset (strategy, occupation, prompt), its captions in rank order. What
``N`` (``select.sample_size`` per occupation, ``neighbors.k`` per prompt) counts is
``select.sample_unit``:

- ``labelled_images`` (default, the paper's: every training %female in its tables is over
  exactly 500 labelled images): ``samples`` ranks ``ceil(N x select.overdraw)`` candidates and
  the subset is its first ``N`` captions, in rank order, whose training image passed the face
  filter and got a confident (female/male) label. The cut is taken in rank order over one
  fixed ranked list, never redrawn, so it is reproducible and does not depend on which images
  happened to fail. A subset with fewer than ``N`` labelled images says why
  (:func:`shortfall_lines`): images still ``pending`` (run ``label``), ``candidates`` all used
  while the corpus has more captions (raise ``select.overdraw``), or the ``corpus`` has no
  more.
- ``captions``: the subset is its first ``N`` captions, whatever became of their images (T is
  then over fewer labelled images than ``N``, and noisier).

With ``indicators.no_indicator_sample = "split"`` (default, the paper's) a ``no_indicators``
subset is the indicator-free part of its occupation's keyword subset after the cut (fewer
than ``N`` images, as in the paper), not a cut of its own. ``nn_no_indicators`` is a search
of its own among indicator-free captions, cut at ``k`` like ``nn``.

"Labelled" uses the labels the analysis uses (``analysis.classifier``, relabelled at
``analysis.threshold`` when set; :func:`corpus_audit.tables.labelled.prepare_labels`). The
SQL is ``sql/subsets/cut.sql`` and ``sql/subsets/status.sql``; the ``analyze`` stage stores
the members in the table ``training_subsets``, ``generate`` takes the captions used as prompts
from them, ``status`` and the report show the shortfall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.core.store import Study, dicts, drop_tables
from corpus_audit.tables.labelled import choose_classifier, prepare_labels

PER_OCCUPATION = ("keyword", "no_indicators")
SHORTFALL_TEXT = {
    "pending": "images not labelled yet (run `label`)",
    "no_images": "no training image registered (run `images`)",
    "candidates": "every candidate used, the corpus has more captions (raise select.overdraw)",
    "corpus": "the corpus has no more captions",
}


@dataclass(frozen=True)
class CutRule:
    """How the subsets are cut: ``unit`` (labelled_images | captions), the two sizes and
    whether ``no_indicators`` is the split of the keyword subset."""

    unit: str
    n_occupation: int
    n_prompt: int
    split: bool

    @classmethod
    def from_config(cls, config: Any) -> CutRule:
        return cls(
            config.select.sample_unit,
            config.select.sample_size,
            config.neighbors.k,
            config.indicators.no_indicator_sample == "split",
        )

    @property
    def what(self) -> str:
        return "labelled training images" if self.unit == "labelled_images" else "captions"


def cut(study: Study, rule: CutRule) -> None:
    """Create the temp tables ``subset_candidates`` and ``subset_members`` (needs the temp
    table ``analysis_labelled``; see ``sql/subsets/cut.sql``)."""
    study.sql(
        "subsets/cut",
        n_occupation=rule.n_occupation,
        n_prompt=rule.n_prompt,
        unit=rule.unit,
        split=rule.split,
    )


def cut_study(study: Study) -> str | None:
    """Prepare the analysis labels and cut the subsets on the study's connection; returns the
    classifier whose labels were used (None when there are no labels)."""
    classifier = choose_classifier(study)
    prepare_labels(study, classifier, study.config.analysis.threshold)
    cut(study, CutRule.from_config(study.config))
    return classifier


def drop(con: duckdb.DuckDBPyConnection) -> None:
    """Remove the temp tables :func:`cut` made."""
    drop_tables(con, "subset_members", "subset_candidates")


def status_rows(study: Study, rule: CutRule) -> list[dict[str, Any]]:
    """One row per subset (needs :func:`cut` first); see ``sql/subsets/status.sql``."""
    return dicts(study.sql("subsets/status", unit=rule.unit))


def shortfall_lines(
    rows: Sequence[dict[str, Any]],
    rule: CutRule,
    prompt_templates: dict[str, int] | None = None,
    limit: int = 8,
) -> list[str]:
    """One line per strategy with subsets short of N: how many, the worst ones and why."""
    lines = []
    templates = prompt_templates or {}
    for strategy in sorted({r["strategy"] for r in rows}):
        mine = [r for r in rows if r["strategy"] == strategy]
        if rule.split and strategy == "no_indicators":
            continue  # the split of the keyword subset has no N of its own
        short = [r for r in mine if r["shortfall"]]
        if not short:
            continue
        n = rule.n_occupation if strategy in PER_OCCUPATION else rule.n_prompt
        have = "members" if rule.unit == "captions" else "labelled"
        short.sort(key=lambda r: (r[have], r["occupation"], r["prompt_id"] or ""))
        shown = []
        for r in short[:limit]:
            name = r["occupation"]
            if r["prompt_id"] is not None:
                name += f" #{templates.get(r['prompt_id'], r['prompt_id'])}"
            shown.append(f"{name} {r[have]}")
        more = f", ... ({len(short) - limit} more)" if len(short) > limit else ""
        reasons = sorted({r["shortfall"] for r in short})
        why = "; ".join(
            f"{sum(r['shortfall'] == k for r in short)} {SHORTFALL_TEXT[k]}" for k in reasons
        )
        lines.append(
            f"{strategy}: {len(short)} of {len(mine)} subsets have fewer than {n} {rule.what}: "
            f"{', '.join(shown)}{more} ({why})"
        )
    return lines


def study_shortfall(study: Study) -> list[str]:
    """:func:`shortfall_lines` of a study as it is now (the temp tables are dropped after)."""
    if not study.count("samples"):
        return []

    rule = CutRule.from_config(study.config)
    try:
        cut_study(study)
        rows = status_rows(study, rule)
    except CorpusAuditError as exc:  # e.g. several classifiers and none chosen
        return [f"training subsets: not cut ({exc})"]
    finally:
        drop(study.con)
        study.con.execute("DROP TABLE IF EXISTS analysis_labelled")
    templates = dict(study.con.execute("SELECT prompt_id, template_id FROM prompts").fetchall())
    return shortfall_lines(rows, rule, templates)
