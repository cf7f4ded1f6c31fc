"""The ``generated_gender`` table: a model's perceived %female per occupation and prompt.

The result of a model-only audit (docs/model_only.md), written for every study with generated
or imported images (amplification studies too). Per (model, occupation, prompt): the images,
how many were labelled female, male and ambiguous and how many were dropped (face filter, or
no label yet), %female = 100 x female / (female + male) with a Wilson interval at
``analysis.confidence``, and beside it the labour statistic the package ships for the
occupation in the prompt's language (:mod:`corpus_audit.methods.lexicon.labour_map`). One more
row per (model, occupation, language), ``prompt_id`` NULL, pools the occupation's prompts.
Needs the temp table ``analysis_labelled`` (:func:`percent.prepare_labels`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.lexicon.labour_map import LabourStat, load_labour_map
from corpus_audit.methods.lexicon.study_prompts import DEFAULT_LANGUAGE, prompt_set_languages
from corpus_audit.methods.stats import percent, wilson_interval

TABLE = "generated_gender"
COUNTS = ("n_images", "n_female", "n_male", "n_ambiguous", "n_dropped")


def generated_gender_rows(
    study: Study, confidence: float, labour: dict[tuple, LabourStat] | None = None
) -> list[dict[str, Any]]:
    """Rows of ``generated_gender`` (per prompt, then the pooled rows), ordered by model,
    occupation, language, prompt (pooled first). ``labour`` defaults to the shipped map."""
    counts = dicts(study.sql("analyze/generated_gender"))
    if not counts:
        return []
    stats = load_labour_map() if labour is None else labour
    languages = (
        prompt_set_languages(study.config.lexicon.prompts, study.root)
        if any(r["language"] is None for r in counts)
        else {}
    )
    pooled: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(COUNTS, 0))
    per_prompt = []
    for r in counts:
        language = r["language"] or languages.get(r["prompt_set"], DEFAULT_LANGUAGE)
        key = (r["model_id"], r["occupation"], language)
        for c in COUNTS:
            pooled[key][c] += int(r[c])
        per_prompt.append(_row(key, r["prompt_id"], r, confidence, stats))
    rows = [_row(key, None, c, confidence, stats) for key, c in pooled.items()] + per_prompt
    rows.sort(
        key=lambda r: (
            r["model_id"],
            r["occupation"],
            r["language"],
            r["prompt_id"] is not None,
            r["prompt_id"] or "",
        )
    )
    return rows


def _row(
    key: tuple[str, str, str],
    prompt_id: str | None,
    counts: dict[str, Any],
    confidence: float,
    stats: dict[tuple, LabourStat],
) -> dict[str, Any]:
    model, occupation, language = key
    female, male = int(counts["n_female"]), int(counts["n_male"])
    lo, hi = wilson_interval(female, female + male, confidence)
    stat = stats.get((language, occupation.lower()))
    return {
        "model_id": model,
        "occupation": occupation,
        "prompt_id": prompt_id,
        "language": language,
        **{c: int(counts[c]) for c in COUNTS},
        "percent_female": percent(female, female + male),
        "ci_low": lo,
        "ci_high": hi,
        "labour_percent_female": stat.percent_female if stat else None,
        "labour_source": stat.source if stat else None,
    }


HEADLINE_ROWS = 12  # occupations the console shows (the farthest from parity)


def headline(study: Study, *, limit: int | None = HEADLINE_ROWS, pooled: bool = True) -> list[dict]:
    """The console's headline: the pooled rows (per model and occupation; ``pooled=False``:
    the per-prompt rows instead), the most skewed first (farthest from 50 %), at most
    ``limit`` of them (None: all); each with %female and interval as text, n (female + male),
    ambiguous, dropped and the labour %female."""
    if not study.table_exists(TABLE):
        return []
    rows = dicts(
        study.con.execute(
            "SELECT * FROM generated_gender WHERE (prompt_id IS NULL) = ? "
            "ORDER BY abs(coalesce(percent_female, 50) - 50) DESC, model_id, occupation, "
            "language, prompt_id",
            [pooled],
        )
    )
    out = []
    for r in rows[:limit]:
        pf = r["percent_female"]
        text = "-" if pf is None else f"{pf:.0f} [{r['ci_low']:.0f}, {r['ci_high']:.0f}]"
        labour = r["labour_percent_female"]
        out.append(
            {
                "model": r["model_id"],
                **({} if pooled else {"prompt": r["prompt_id"]}),
                "occupation": r["occupation"]
                + ("" if r["language"] == "en" else f" ({r['language']})"),
                "% female [CI]": text,
                "n": r["n_female"] + r["n_male"],
                "ambiguous": r["n_ambiguous"],
                "dropped": r["n_dropped"],
                "labour %": "-" if labour is None else f"{labour:.0f}",
            }
        )
    return out


def headline_note(study: Study, limit: int = HEADLINE_ROWS) -> list[str]:
    """One line when the headline leaves occupations out: how many, and where they all are."""
    if not study.table_exists(TABLE):
        return []
    n = study.count(TABLE, "prompt_id IS NULL")
    if n <= limit:
        return []
    return [
        f"{limit} of {n} occupations shown (the farthest from parity); every occupation and "
        "prompt: the table generated_gender (corpus-audit export)"
    ]
