"""The study's prompts from ``lexicon.prompts``: templated sets and prompt tables together.

``lexicon.prompts`` is one prompt set or a list of them. Each entry is either

- a templated set (a ``.toml`` file, METHODS 1.2: ``builtin:prompts_en.toml``), rendered over
  the occupations of ``lexicon.occupations``; or
- a prompt table (MAGBIG / BAFIS, :mod:`corpus_audit.methods.lexicon.prompt_sets`):
  ``builtin:magbig/direct/de`` (one language), ``builtin:bafis/direct`` (every language of the
  file) or a ``.csv`` path; its occupations are its own (151 for the shipped tables), each
  with its category from ``lexicon.categories``.

``select`` writes every prompt into the ``prompts`` table (``prompt_id, prompt_set,
template_id, occupation, text``) and, for the prompt tables, one row per prompt into
``prompt_categories`` (``prompt_id, family, variant, language, category``), which the
``categories`` stage groups by. A prompt id that two entries both produce (the same set
listed twice, or ``builtin:magbig/direct`` next to ``builtin:magbig/direct/de``) is an error
naming both entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_audit.methods.lexicon import (
    LexiconError,
    Occupation,
    load_prompt_set,
    render_prompts,
    resolve_path,
)
from corpus_audit.methods.lexicon.prompt_sets import (
    is_prompt_table_spec,
    load_categories,
    load_occupation_prompts,
    parse_spec,
)

CATEGORY_ROW_COLUMNS = ("prompt_id", "family", "variant", "language", "category")


@dataclass
class StudyPrompts:
    """What ``select`` writes: rows of ``prompts`` and of ``prompt_categories``, and the files
    they came from (their contents go into select's fingerprint)."""

    prompts: list[dict[str, Any]] = field(default_factory=list)
    categories: list[dict[str, Any]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def prompt_set_specs(value: str | list[str]) -> list[str]:
    """``lexicon.prompts`` as a list of specs (a single string is a list of one)."""
    return [value] if isinstance(value, str) else list(value)


def prompt_files(value: str | list[str], base: Path | None, categories: str) -> list[Path]:
    """Every file the prompts depend on: the sets' files, plus the categories file when a
    prompt table is listed."""
    files = []
    for spec in prompt_set_specs(value):
        if is_prompt_table_spec(spec):
            files.append(parse_spec(spec, base).path)
        else:
            files.append(resolve_path(spec, base))
    if any(is_prompt_table_spec(s) for s in prompt_set_specs(value)):
        files.append(resolve_path(categories, base))
    return files


DEFAULT_LANGUAGE = "en"  # a prompt whose set states no language


def prompt_set_languages(value: str | list[str], root: Path) -> dict[str, str]:
    """The language of each templated prompt set of ``lexicon.prompts`` (``value``; relative
    paths from ``root``), by set name; prompt tables state theirs per row."""
    out: dict[str, str] = {}
    for spec in prompt_set_specs(value):
        if not is_prompt_table_spec(spec):
            prompt_set = load_prompt_set(spec, root)
            out[prompt_set.name] = prompt_set.language
    return out


def study_prompts(
    value: str | list[str],
    occupations: list[Occupation],
    base: Path | None,
    categories: str,
    only: list[str] | None = None,
) -> StudyPrompts:
    """Load every prompt set of ``lexicon.prompts`` (see the module docstring); ``only``
    (``lexicon.prompt_occupations``) keeps those occupations of the prompt tables. Raises
    :class:`LexiconError` naming the file (and line) of a bad set, the two entries that produce
    the same prompt id, or an ``only`` name that no listed prompt table has."""
    out = StudyPrompts(files=prompt_files(value, base, categories))
    wanted = {" ".join(o.lower().split()) for o in only or []}
    found: set[str] = set()
    cmap = None
    origin: dict[str, str] = {}
    for spec in prompt_set_specs(value):
        if is_prompt_table_spec(spec):
            cmap = cmap or load_categories(categories, base)
            table = load_occupation_prompts(spec, base, categories=cmap)
            found |= {p.occupation for p in table}
            table = [p for p in table if not wanted or p.occupation in wanted]
            rows = [p.prompts_row() for p in table]
            out.categories += [{c: getattr(p, c) for c in CATEGORY_ROW_COLUMNS} for p in table]
        else:
            rows = render_prompts(load_prompt_set(spec, base=base), occupations)
        for row in rows:  # ids are unique within one entry, so a repeat comes from two
            first = origin.get(str(row["prompt_id"]))
            if first is not None:
                raise LexiconError(
                    f"lexicon.prompts: {spec!r} and {first!r} both give prompt "
                    f"{row['prompt_id']!r} (a set listed twice?)"
                )
        origin.update((str(row["prompt_id"]), spec) for row in rows)
        out.prompts += rows
    unknown = sorted(wanted - found)
    if unknown:
        where = "the listed prompt tables" if found else "lexicon.prompts (no prompt table listed)"
        raise LexiconError(
            f"lexicon.prompt_occupations: {', '.join(map(repr, unknown))} not in {where}"
        )
    return out
