"""Matching entries to the study's prompts (pure): :func:`study_prompts` lists the prompts an
import can name, :func:`resolve_entries` gives every entry one prompt and its index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corpus_audit.core.errors import ManifestError
from corpus_audit.core.store import Study
from corpus_audit.stages.import_images.manifest import Entry, normalise


@dataclass(frozen=True)
class StudyPrompt:
    prompt_id: str
    text: str
    occupation: str | None
    family: str | None = None
    variant: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class Item:
    """An entry matched to a study prompt: what will be imported."""

    entry: Entry
    model: str
    prompt: StudyPrompt
    index: int


# -- matching to the study (pure) -----------------------------------------------------------
def study_prompts(study: Study) -> list[StudyPrompt]:
    """The prompts an import can name: ``prompts`` (with their MAGBIG/BAFIS categories) and,
    in a PST study, ``pst_prompts``."""
    rows = study.con.execute(
        "SELECT p.prompt_id, p.text, p.occupation, c.family, c.variant, c.language "
        "FROM prompts p LEFT JOIN prompt_categories c USING (prompt_id) ORDER BY p.prompt_id"
    ).fetchall()
    out = [StudyPrompt(*r) for r in rows]
    if study.table_exists("pst_prompts"):
        out += [
            StudyPrompt(pid, text, occ)
            for pid, text, occ in study.con.execute(
                "SELECT prompt_id, text, occupation FROM pst_prompts ORDER BY prompt_id"
            ).fetchall()
        ]
    return out


def resolve_entries(entries: Sequence[Entry], prompts: Sequence[StudyPrompt]) -> list[Item]:
    """Match every entry to one study prompt and give it its index; the first problem is a
    :class:`ManifestError` naming the entry's file and line."""
    by_id = {p.prompt_id: p for p in prompts}
    by_text: dict[str, list[StudyPrompt]] = {}
    for p in prompts:
        by_text.setdefault(normalise(p.text), []).append(p)
    items: list[Item] = []
    seen_files: dict[Path, str] = {}
    seen_keys: dict[tuple[str, str, int], str] = {}
    counters: dict[tuple[str, str], int] = {}
    for e in entries:
        prompt = _match(e, by_id, by_text, prompts)
        if e.file in seen_files:
            raise ManifestError(
                f"{e.where}: file {e.file.name!r} is listed twice (first at {seen_files[e.file]})"
            )
        seen_files[e.file] = e.where
        model = str(e.model)
        if e.index is None:
            index = counters.get((model, prompt.prompt_id), 0)
            while (model, prompt.prompt_id, index) in seen_keys:
                index += 1
        else:
            index = e.index
        key = (model, prompt.prompt_id, index)
        if key in seen_keys:
            raise ManifestError(
                f"{e.where}: image {index} of model {model!r} for prompt {prompt.prompt_id!r} is "
                f"listed twice (first at {seen_keys[key]})"
            )
        seen_keys[key] = e.where
        counters[(model, prompt.prompt_id)] = index + 1
        items.append(Item(e, model, prompt, index))
    return items


def _match(
    e: Entry,
    by_id: dict[str, StudyPrompt],
    by_text: dict[str, list[StudyPrompt]],
    prompts: Sequence[StudyPrompt],
) -> StudyPrompt:
    if e.prompt_id is not None:
        found = by_id.get(e.prompt_id)
        if found is None:
            occupation = e.prompt_id.rsplit(":", 1)[-1]
            why = (
                ""
                if any(p.occupation == occupation for p in prompts)
                else f": no prompt of the study is for the occupation {occupation!r} "
                "(lexicon.occupations, lexicon.prompts)"
            )
            raise ManifestError(
                f"{e.where}: prompt_id {e.prompt_id!r} is not a prompt of the study{why}"
            )
        if e.prompt is not None and normalise(e.prompt) != normalise(found.text):
            raise ManifestError(
                f"{e.where}: prompt {e.prompt!r} differs from the text of {e.prompt_id!r} "
                f"({found.text!r})"
            )
        return found
    candidates = list(by_text.get(normalise(e.prompt or ""), []))
    if not candidates and e.prompt is not None and "_" in e.prompt:  # folder names: _ for space
        candidates = list(by_text.get(normalise(e.prompt.replace("_", " ")), []))
    if not candidates and e.prompt is None and e.hints.get("family"):
        candidates = [
            p
            for p in prompts
            if (p.family, p.variant, p.language, p.occupation)
            == tuple(e.hints.get(k) for k in ("family", "variant", "language", "occupation"))
        ]
    if len(candidates) > 1 and e.hints:
        narrowed = [
            p
            for p in candidates
            if all(
                getattr(p, k) in (None, e.hints[k])
                for k in ("family", "variant", "language", "occupation")
                if k in e.hints
            )
        ]
        candidates = narrowed or candidates
    if not candidates:
        shown = e.prompt if e.prompt is not None else e.hints
        raise ManifestError(
            f"{e.where}: prompt {shown!r} is not a prompt of the study (texts are matched "
            "exactly after whitespace normalisation; `select`, `prompts` or `pst_prompts` "
            "writes them)"
        )
    if len(candidates) > 1:
        ids = ", ".join(p.prompt_id for p in candidates[:4])
        raise ManifestError(
            f"{e.where}: prompt {e.prompt!r} matches several prompts of the study ({ids}): "
            "give prompt_id"
        )
    return candidates[0]
