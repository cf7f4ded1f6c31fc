"""The prompts and occupations of the LLM-written texts (``llm_texts`` stage; "More of the
Same", Mickel et al.): data files, read and checked here.

- a **prompt file** (TOML; ``builtin:more_of_the_same/prompts_en.toml``): ``name``,
  ``language``, ``[genders]`` (gender -> the words ``{gender}`` becomes: ``female = "woman"``)
  and ``[[prompts]]`` with ``id``, ``unspecified`` and optionally ``specified`` templates
  (``{occupation}``, ``{gender}``);
- an **occupations file** (CSV; ``builtin:more_of_the_same/occupations_en.csv``): an
  ``occupation`` column, optionally ``percent_female`` (the labour statistic, read by
  :func:`corpus_audit.methods.lexicon.load_labor_stats`) and ``display`` (how prompts write it).

:func:`expand` turns both into the (occupation, prompt, gender) pairs the stage draws.
Errors (:class:`LexiconError`) name the file and the key or line.
"""

from __future__ import annotations

import csv
import string
from dataclasses import dataclass
from pathlib import Path

from corpus_audit.core.errors import LexiconError
from corpus_audit.methods.lexicon import read_toml, resolve_path

GENDERS = ("female", "male", "non_binary")  # what a specified prompt may specify


@dataclass(frozen=True)
class LlmPrompt:
    """One prompt: ``id`` (biography, persona), its templates (``specified`` may be empty)."""

    id: str
    unspecified: str
    specified: str


@dataclass(frozen=True)
class LlmPromptSet:
    name: str
    language: str
    genders: dict[str, str]  # gender -> the words in {gender}
    prompts: tuple[LlmPrompt, ...]


@dataclass(frozen=True)
class PairSpec:
    """One (occupation, prompt, gender) the stage draws; ``gender`` None = unspecified."""

    occupation: str
    prompt_id: str
    gender: str | None
    text: str  # the user message


def load_llm_prompts(
    spec: str = "builtin:more_of_the_same/prompts_en.toml", base: Path | None = None
) -> LlmPromptSet:
    path = resolve_path(spec, base)
    data = read_toml(path)
    genders = data.get("genders", {})
    if not isinstance(genders, dict):
        raise LexiconError(f"{path}: [genders] must be a table")
    for gender, words in genders.items():
        if gender not in GENDERS:
            raise LexiconError(f"{path}: genders.{gender}: not one of {', '.join(GENDERS)}")
        if not isinstance(words, str) or not words.strip():
            raise LexiconError(f"{path}: genders.{gender}: expected the words of the prompt")
    prompts = []
    seen = set()
    for i, entry in enumerate(data.get("prompts") or []):
        where = f"{path}: prompts[{i}]"
        if not isinstance(entry, dict):
            raise LexiconError(f"{where}: expected a table")
        unknown = set(entry) - {"id", "unspecified", "specified"}
        if unknown:
            raise LexiconError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        pid = entry.get("id")
        if not isinstance(pid, str) or not pid.strip() or pid in seen:
            raise LexiconError(f"{where}: needs a unique id")
        seen.add(pid)
        unspecified = entry.get("unspecified", "")
        specified = entry.get("specified", "")
        for key, text, allowed in (
            ("unspecified", unspecified, {"occupation"}),
            ("specified", specified, {"occupation", "gender"}),
        ):
            if not isinstance(text, str):
                raise LexiconError(f"{where}.{key}: expected a string")
            _check_fields(f"{where}.{key}", text, allowed)
        if not unspecified and not specified:
            raise LexiconError(f"{where}: needs an unspecified or a specified template")
        if specified and not genders:
            raise LexiconError(f"{where}: a specified template needs a [genders] table")
        prompts.append(LlmPrompt(pid, unspecified, specified))
    if not prompts:
        raise LexiconError(f"{path}: no [[prompts]]")
    language = data.get("language", "en")
    return LlmPromptSet(
        str(data.get("name", path.stem)), str(language), dict(genders), tuple(prompts)
    )


def _check_fields(where: str, text: str, allowed: set[str]) -> None:
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as exc:
        raise LexiconError(f"{where}: {exc}") from None
    if text and "occupation" not in fields:
        raise LexiconError(f"{where}: the template has no {{occupation}}")
    bad = fields - allowed
    if bad:
        raise LexiconError(f"{where}: unknown field {{{sorted(bad)[0]}}}")


def load_llm_occupations(
    spec: str = "builtin:more_of_the_same/occupations_en.csv", base: Path | None = None
) -> list[tuple[str, str]]:
    """``(occupation, display)`` in file order (``display``: the column, else the name)."""
    path = resolve_path(spec, base)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or "occupation" not in reader.fieldnames:
            raise LexiconError(f"{path}: needs an occupation column")
        for lineno, row in enumerate(reader, start=2):
            name = (row["occupation"] or "").strip().lower()
            if not name:
                raise LexiconError(f"{path}:{lineno}: empty occupation")
            if name in seen:
                raise LexiconError(f"{path}:{lineno}: occupation {name!r} listed twice")
            seen.add(name)
            out.append((name, (row.get("display") or "").strip() or name))
    if not out:
        raise LexiconError(f"{path}: no occupations")
    return out


def expand(
    prompts: LlmPromptSet,
    occupations: list[tuple[str, str]],
    genders: list[str] | tuple[str, ...] = GENDERS,
) -> list[PairSpec]:
    """Every (occupation, prompt, gender) to draw: per occupation and prompt the unspecified
    one, then the specified ones for ``genders`` (those the prompt file has words for)."""
    out = []
    for occupation, display in occupations:
        for p in prompts.prompts:
            if p.unspecified:
                out.append(
                    PairSpec(occupation, p.id, None, p.unspecified.format(occupation=display))
                )
            if p.specified:
                for g in genders:
                    if g in prompts.genders:
                        text = p.specified.format(occupation=display, gender=prompts.genders[g])
                        out.append(PairSpec(occupation, p.id, g, text))
    return out
