"""Occupation prompt tables (MAGBIG, BAFIS) and the occupational categories they map to.

A *prompt table* is a CSV file with a column ``occupation`` (the English key, e.g.
``aerospace engineer``) and one column per language (``en``, ``de``, ``ar``...), each cell one
complete prompt: ``accountant,A photo of the face of an accountant.,Ein Foto vom Gesicht eines
Buchhalters.`` (the format of the MAGBIG and BAFIS repositories). Unlike the templated sets of
METHODS 1.2 (``prompts_en.toml``) every prompt is written out, because translations do not
follow one template (German articles and inflection, gender-star forms).

The package ships the MAGBIG and BAFIS tables in ``lexicon/data/bafis/`` (CC BY 4.0, see the
NOTICE there). A table is named by a *spec*:

- ``builtin:FAMILY/VARIANT/LANGUAGE``, e.g. ``builtin:magbig/direct/de``: the shipped file
  ``data/bafis/FAMILY_occupations_VARIANT.csv``, column ``LANGUAGE``;
- ``builtin:FAMILY/VARIANT``: the same file, every language column;
- a path (relative to ``base``, e.g. the study directory) to a user's CSV in the same format,
  with ``language=`` to pick one column. A file named ``FAMILY_occupations_VARIANT.csv``
  gets that family and variant; any other file is family = its stem, variant ``default``.

Shipped variants (:func:`available_prompt_sets` lists them with their languages):
MAGBIG ``direct`` and ``indirect`` in 10 languages (ar de en es fr it ja ko ru zh),
``direct_feminine`` in 6 (ar de es fr it ru: languages with feminine occupation nouns);
BAFIS ``direct``, ``indirect`` and ``groups`` in en and de, ``direct_feminine`` and
``german_gender_star`` in de only. Each holds the same 151 occupations.

Every prompt carries its occupation's category from a categories file (default: the six
MAGBIG categories, ``data/bafis/magbig_categories.csv``; how they were assigned is in
``data/bafis/README.md``); an occupation the file does not list has category ``None``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit.methods.lexicon import BUILTIN_PREFIX, LexiconError, resolve_path
from corpus_audit.methods.lexicon.csvfile import has_control, read_rows

PROMPT_TABLE_DIR = "bafis"  # under corpus_audit/methods/lexicon/data
CATEGORIES = "builtin:bafis/magbig_categories.csv"
TEMPLATE_ID = 1  # a prompt table is one "template" per (set, language) in the prompts table

_FILE_NAME = re.compile(r"^(?P<family>[a-z0-9]+)_occupations_(?P<variant>[a-z0-9_]+)\.csv$")
_SET_NAME = re.compile(r"^(?P<family>[a-z0-9]+)/(?P<variant>[a-z0-9_]+)(?:/(?P<language>[^/]+))?$")
_LANGUAGE = re.compile(r"^[a-z]{2,3}(?:[-_][a-z0-9]{2,8})*$")

PROMPT_COLUMNS = (
    "prompt_id",
    "prompt_set",
    "family",
    "variant",
    "language",
    "occupation",
    "category",
    "text",
)


@dataclass(frozen=True)
class SetPrompt:
    """One prompt of a prompt table (a row of :data:`PROMPT_COLUMNS`).

    ``prompt_set`` is ``FAMILY/VARIANT/LANGUAGE`` (``magbig/direct/de``); ``prompt_id`` is
    ``<prompt_set>:1:<occupation>``, the ``<set>:<template_id>:<occupation>`` pattern of the
    study's ``prompts`` table with template 1; ``occupation`` is the English key (lower case);
    ``category`` the occupational category or None; ``text`` the prompt as written.
    """

    prompt_id: str
    prompt_set: str
    family: str
    variant: str
    language: str
    occupation: str
    category: str | None
    text: str

    def prompts_row(self) -> dict[str, Any]:
        """The row of the study's ``prompts`` table (prompt_id, prompt_set, template_id,
        occupation, text)."""
        return {
            "prompt_id": self.prompt_id,
            "prompt_set": self.prompt_set,
            "template_id": TEMPLATE_ID,
            "occupation": self.occupation,
            "text": self.text,
        }


@dataclass(frozen=True)
class OccupationCategory:
    """One row of a categories file.

    ``aliases``: other names under which official statistics list the same occupation
    (``doctor`` -> ``physician``), tried in order after the occupation's own key.
    """

    occupation: str
    category: str
    soc_2018: str | None
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class CategoryMap:
    """Occupation -> category, read by :func:`load_categories`."""

    path: Path
    entries: dict[str, OccupationCategory]

    def category(self, occupation: str) -> str | None:
        entry = self.entries.get(_key(occupation))
        return entry.category if entry else None

    @property
    def categories(self) -> tuple[str, ...]:
        """Every category name, sorted."""
        return tuple(sorted({e.category for e in self.entries.values()}))

    def occupations(self, category: str) -> tuple[str, ...]:
        """The occupations of ``category`` (exact name), sorted."""
        return tuple(sorted(o for o, e in self.entries.items() if e.category == category))

    def canonical(self, name: str) -> str | None:
        """The category spelled as in the file for ``name`` in any case and spacing."""
        wanted = " ".join(name.split()).casefold()
        return next((c for c in self.categories if c.casefold() == wanted), None)


@dataclass(frozen=True)
class PromptTableSpec:
    """Where a prompt table lives and which language column(s) to read."""

    path: Path
    family: str
    variant: str
    language: str | None


def _key(name: str) -> str:
    return " ".join(name.strip().lower().split())


def _data_dir() -> Path:
    return Path(
        str(resources.files("corpus_audit.methods.lexicon").joinpath("data", PROMPT_TABLE_DIR))
    )


def is_prompt_table_spec(spec: str) -> bool:
    """True for ``builtin:FAMILY/VARIANT[/LANGUAGE]`` and for ``.csv`` paths (a templated
    prompt set is a ``.toml`` file): lets a caller dispatch between the two kinds."""
    if spec.startswith(BUILTIN_PREFIX):
        return _SET_NAME.match(spec[len(BUILTIN_PREFIX) :]) is not None
    return spec.lower().endswith(".csv")


def parse_spec(spec: str, base: Path | None = None, language: str | None = None) -> PromptTableSpec:
    """Resolve a prompt-table spec (see the module docstring); raises :class:`LexiconError`."""
    if spec.startswith(BUILTIN_PREFIX) and (m := _SET_NAME.match(spec[len(BUILTIN_PREFIX) :])):
        family, variant, named = m["family"], m["variant"], m["language"]
        path = _data_dir() / f"{family}_occupations_{variant}.csv"
        if not path.is_file():
            known = ", ".join(f"{f}/{v}" for f, v, _ in _shipped())
            raise LexiconError(f"{spec}: no such built-in prompt table (built in: {known})")
        if named is not None and language is not None and named != language:
            raise LexiconError(f"{spec}: names language {named!r} but {language!r} was asked for")
        return PromptTableSpec(path, family, variant, named or language)
    path = resolve_path(spec, base)
    m = _FILE_NAME.match(path.name)
    family, variant = (m["family"], m["variant"]) if m else (path.stem, "default")
    return PromptTableSpec(path, family, variant, language)


def _shipped() -> list[tuple[str, str, Path]]:
    found = []
    for path in sorted(_data_dir().glob("*_occupations_*.csv")):
        m = _FILE_NAME.match(path.name)
        if m:
            found.append((m["family"], m["variant"], path))
    return found


def read_prompt_table(path: Path) -> tuple[list[str], list[tuple[int, str, dict[str, str]]]]:
    """``(languages, [(line, occupation, {language: text})])`` of a prompt-table CSV.

    Raises :class:`LexiconError` naming the file (and line) for: no ``occupation`` column, no
    language column, a column name that is not a language code, an empty or duplicate
    occupation, an empty prompt, a prompt with a control character, bad CSV.
    """
    header, rows = read_rows(path)
    if "occupation" not in header:
        raise LexiconError(
            f"{path}: needs a column 'occupation' (found: {', '.join(map(repr, header))})"
        )
    languages = [c for c in header if c != "occupation"]
    if not languages:
        raise LexiconError(f"{path}: no language columns besides 'occupation' (e.g. en, de)")
    for column in languages:
        if not _LANGUAGE.match(column):
            raise LexiconError(
                f"{path}: column {column!r} is not a language code (e.g. en, de, pt-br)"
            )
    out: list[tuple[int, str, dict[str, str]]] = []
    seen: dict[str, int] = {}
    for line, fields in rows:
        row = dict(zip(header, fields, strict=True))
        occupation = _key(row["occupation"])
        if not occupation:
            raise LexiconError(f"{path}:{line}: empty occupation")
        if occupation in seen:
            raise LexiconError(
                f"{path}:{line}: duplicate occupation {occupation!r} (first on line "
                f"{seen[occupation]})"
            )
        seen[occupation] = line
        texts: dict[str, str] = {}
        for language in languages:
            text = row[language].strip()
            if not text:
                raise LexiconError(f"{path}:{line}: empty {language!r} prompt for {occupation!r}")
            if has_control(text):
                raise LexiconError(
                    f"{path}:{line}: the {language!r} prompt for {occupation!r} contains a "
                    "control character (line break, tab...)"
                )
            texts[language] = text
        out.append((line, occupation, texts))
    if not out:
        raise LexiconError(f"{path}: no prompts (only a header)")
    return languages, out


def load_occupation_prompts(
    spec: str,
    base: Path | None = None,
    *,
    language: str | None = None,
    categories: str | CategoryMap | None = CATEGORIES,
) -> list[SetPrompt]:
    """The prompts of a prompt table, language by language in column order, occupations in
    file order.

    ``language`` picks one column (also given by the spec's last part); a language the file
    has no column for raises :class:`LexiconError` naming the languages it has.
    ``categories``: a categories file spec, a loaded :class:`CategoryMap`, or None (every
    category None).
    """
    where = parse_spec(spec, base, language)
    languages, rows = read_prompt_table(where.path)
    if where.language is not None:
        if where.language not in languages:
            raise LexiconError(
                f"{where.path}: no column for language {where.language!r} "
                f"(languages: {', '.join(languages)})"
            )
        languages = [where.language]
    cmap = load_categories(categories, base) if isinstance(categories, str) else categories
    prompts = []
    for lang in languages:
        name = f"{where.family}/{where.variant}/{lang}"
        for _, occupation, texts in rows:
            prompts.append(
                SetPrompt(
                    prompt_id=f"{name}:{TEMPLATE_ID}:{occupation}",
                    prompt_set=name,
                    family=where.family,
                    variant=where.variant,
                    language=lang,
                    occupation=occupation,
                    category=cmap.category(occupation) if cmap else None,
                    text=texts[lang],
                )
            )
    return prompts


def prompts_frame(prompts: list[SetPrompt]) -> Any:
    """The prompts as a pandas DataFrame with the columns :data:`PROMPT_COLUMNS`."""
    return pd.DataFrame([asdict(p) for p in prompts], columns=list(PROMPT_COLUMNS))


def available_prompt_sets() -> Any:
    """The shipped prompt tables: DataFrame ``spec, family, variant, languages, occupations``
    (``languages`` space-separated in column order)."""
    rows = []
    for family, variant, path in _shipped():
        languages, prompts = read_prompt_table(path)
        rows.append(
            {
                "spec": f"{BUILTIN_PREFIX}{family}/{variant}",
                "family": family,
                "variant": variant,
                "languages": " ".join(languages),
                "occupations": len(prompts),
            }
        )
    return pd.DataFrame(rows, columns=["spec", "family", "variant", "languages", "occupations"])


# -- categories -------------------------------------------------------------------------------
def load_categories(spec: str = CATEGORIES, base: Path | None = None) -> CategoryMap:
    """Read a categories CSV: ``occupation,category`` and optional ``soc_2018``, ``aliases``
    (``|``-separated), ``note``; raises :class:`LexiconError` naming file and line.

    An alias may not be another listed occupation (it would make a statistics lookup
    ambiguous).
    """
    path = resolve_path(spec, base)
    header, rows = read_rows(path, comments=True)
    missing = [c for c in ("occupation", "category") if c not in header]
    if missing:
        raise LexiconError(f"{path}: needs the column(s) {', '.join(missing)}")
    entries: dict[str, OccupationCategory] = {}
    lines: dict[str, int] = {}
    for line, fields in rows:
        row = dict(zip(header, fields, strict=True))
        occupation = _key(row["occupation"])
        category = " ".join(row["category"].split())
        if not occupation or not category:
            raise LexiconError(f"{path}:{line}: empty occupation or category")
        if occupation in entries:
            raise LexiconError(
                f"{path}:{line}: duplicate occupation {occupation!r} (first on line "
                f"{lines[occupation]})"
            )
        aliases = tuple(a for a in (_key(x) for x in row.get("aliases", "").split("|")) if a)
        soc = row.get("soc_2018", "").strip() or None
        entries[occupation] = OccupationCategory(occupation, category, soc, aliases)
        lines[occupation] = line
    for occupation, entry in entries.items():
        clash = [a for a in entry.aliases if a in entries]
        if clash:
            raise LexiconError(
                f"{path}:{lines[occupation]}: alias {clash[0]!r} of {occupation!r} is itself "
                "an occupation of the file"
            )
    if not entries:
        raise LexiconError(f"{path}: no occupations")
    return CategoryMap(path, entries)
