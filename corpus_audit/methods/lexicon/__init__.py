"""Lexicon data files and their loaders: occupations, prompt sets, gender terms, labour stats.

Every list the method depends on is a data file in ``corpus_audit/methods/lexicon/data`` (or a user
file named in ``study.toml``); this module only reads and validates them. Errors name the
file and the line or key at fault.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from corpus_audit.core.errors import LexiconError  # noqa: F401  (re-exported)
from corpus_audit.methods.lexicon.csvfile import read_rows, records

BUILTIN_PREFIX = "builtin:"


@dataclass(frozen=True)
class Occupation:
    """One lexicon entry.

    ``name`` is the canonical key (lower case), ``display`` how prompts write it (``CEO``),
    ``article`` its indefinite article, ``forms`` every lower-case surface form that counts
    as a mention (singular, plural, synonyms, multi-word forms with space and hyphen).
    """

    name: str
    article: str
    display: str
    forms: tuple[str, ...]


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt template; ``id`` is 1-based as in the paper (#1-#4)."""

    id: int
    text: str

    def render(self, occupation: Occupation) -> str:
        return self.text.format(article=occupation.article, occupation=occupation.display)


@dataclass(frozen=True)
class PromptSet:
    name: str
    templates: tuple[PromptTemplate, ...]
    language: str = "en"  # the TOML's ``language`` (the prompts' language code)

    def prompt_id(self, template_id: int, occupation: str) -> str:
        """Stable id of one prompt: ``<set>:<template_id>:<occupation>``."""
        return f"{self.name}:{template_id}:{occupation}"


@dataclass(frozen=True)
class AssociationTerms:
    """Terms of the gender-association rule (METHODS 4), all lower case.

    ``pronouns`` has the lists ``female``, ``male`` and ``neutral``; ``honorifics`` the lists
    ``female`` and ``male`` (single words); ``non_binary`` holds phrases (``they/them``);
    ``language`` is the wordfreq language code of the marked-words prior.
    """

    pronouns: dict[str, tuple[str, ...]]
    honorifics: dict[str, tuple[str, ...]]
    non_binary: tuple[str, ...]
    language: str

    def words(self) -> tuple[str, ...]:
        """Every pronoun and honorific: the words removed before marked words are compared."""
        lists = [*self.pronouns.values(), *self.honorifics.values()]
        return tuple(dict.fromkeys(w for words in lists for w in words))


@dataclass(frozen=True)
class GenderTerms:
    """Gender words and pronouns (lower case) and gender-guesser answers per gender."""

    words: dict[str, tuple[str, ...]]
    pronouns: dict[str, tuple[str, ...]]
    name_guesses: dict[str, tuple[str, ...]]


def resolve_path(spec: str, base: Path | None = None) -> Path:
    """A lexicon file: ``builtin:NAME`` from the package, else a path (relative to ``base``)."""
    if spec.startswith(BUILTIN_PREFIX):
        name = spec[len(BUILTIN_PREFIX) :]
        ref = resources.files("corpus_audit.methods.lexicon").joinpath("data", name)
        if not ref.is_file():
            raise LexiconError(f"{spec}: no such built-in lexicon file")
        return Path(str(ref))
    path = Path(spec).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.is_file():
        raise LexiconError(f"{path}: lexicon file not found")
    return path


# -- articles -------------------------------------------------------------------------------
_AN_LETTERS = set("aefhilmnorsx")  # letter names that start with a vowel sound: "an F", "an MBA"
_A_VOWEL_PREFIXES = ("uni", "use", "usu", "uti", "eu", "ewe", "one", "once", "ubi", "uro", "ura")
_AN_SILENT_H = ("hour", "honest", "honor", "honour", "heir")


def indefinite_article(phrase: str) -> str:
    """``a`` or ``an`` for ``phrase`` by the sound of its first word.

    Rule: acronyms written in capitals (``CEO``, ``MBA``) go by the name of their first
    letter (``a CEO``, ``an MBA``); words with a vowel letter but a consonant sound take ``a``
    (``a university``, ``a European``, ``a one-off``); silent-h words take ``an`` (``an hour``);
    otherwise ``an`` before a vowel letter and ``a`` before a consonant.
    """
    word = phrase.strip().split()[0] if phrase.strip() else ""
    if not word:
        raise ValueError("indefinite_article: empty phrase")
    bare = re.sub(r"[^A-Za-z]", "", word)
    if len(bare) >= 2 and bare.isupper():
        return "an" if bare[0].lower() in _AN_LETTERS else "a"
    low = bare.lower()
    if low.startswith(_AN_SILENT_H):
        return "an"
    if low.startswith(_A_VOWEL_PREFIXES):
        return "a"
    return "an" if low[:1] in "aeiou" else "a"


# -- occupations ----------------------------------------------------------------------------
def expand_forms(forms: list[str]) -> tuple[str, ...]:
    """Lower-case forms plus hyphen/space variants of multi-word forms, without duplicates."""
    out: list[str] = []
    for form in forms:
        f = " ".join(form.strip().lower().split())
        if not f:
            continue
        variants = [f]
        if " " in f:
            variants.append(f.replace(" ", "-"))
        if "-" in f:
            variants.append(f.replace("-", " "))
        for v in variants:
            if v not in out:
                out.append(v)
    return tuple(out)


def check_forms(path: Path, lineno: int, name: str, forms: tuple[str, ...]) -> None:
    """A surface form must contain a letter: ``'--`` or ``&`` would match punctuation in
    every caption (issue 23: a stray quote gave one occupation 701 captions instead of 11)."""
    for form in forms:
        if not any(ch.isalpha() for ch in form):
            raise LexiconError(f"{path}:{lineno}: form {form!r} of '{name}' has no letter")


def pipe_items(row: dict[str, str], column: str) -> list[str]:
    """The non-blank ``|``-separated items of ``row[column]`` (as written; none when the
    column is absent or empty)."""
    return [f for f in (row.get(column) or "").split("|") if f.strip()]


def unique_name(
    path: Path, lineno: int, row: dict[str, str], column: str, seen: dict[str, int]
) -> str:
    """The row's ``column`` as a key (lower case, single spaces): not empty and not in
    ``seen`` (key -> line), where it is then entered."""
    name = " ".join((row.get(column) or "").strip().lower().split())
    if not name:
        raise LexiconError(f"{path}:{lineno}: empty {column}")
    if name in seen:
        raise LexiconError(
            f"{path}:{lineno}: duplicate {column} '{name}' (first on line {seen[name]})"
        )
    seen[name] = lineno
    return name


def claim_forms(
    path: Path, lineno: int, name: str, forms: tuple[str, ...], owner: dict[str, str]
) -> None:
    """Enter ``forms`` as ``name``'s in ``owner`` (form -> entry); a form another entry owns
    is an error."""
    for form in forms:
        if owner.get(form, name) != name:
            raise LexiconError(
                f"{path}:{lineno}: form '{form}' of '{name}' already belongs to '{owner[form]}'"
            )
        owner[form] = name


def load_occupations(
    spec: str = "builtin:occupations_en.csv", base: Path | None = None
) -> list[Occupation]:
    """Read an occupations CSV (``occupation,article,display,forms``; see data/README.md).

    Raises :class:`LexiconError` on a missing column, an empty or duplicate occupation, or a
    surface form claimed by two occupations.
    """
    path = resolve_path(spec, base)
    header, rows = read_rows(path)  # strict: field count, quoting, UTF-8, BOM
    if "occupation" not in header:
        raise LexiconError(f"{path}: needs a header with at least the column 'occupation'")
    occupations: list[Occupation] = []
    seen: dict[str, int] = {}
    form_owner: dict[str, str] = {}
    for lineno, row in records(header, rows):
        name = unique_name(path, lineno, row, "occupation", seen)
        display = (row.get("display") or "").strip() or name
        article = (row.get("article") or "").strip().lower() or indefinite_article(display)
        if article not in {"a", "an", ""}:
            raise LexiconError(f"{path}:{lineno}: article '{article}' is not 'a' or 'an'")
        forms = expand_forms([name, *pipe_items(row, "forms")])
        check_forms(path, lineno, name, forms)
        claim_forms(path, lineno, name, forms, form_owner)
        occupations.append(Occupation(name, article, display, forms))
    if not occupations:
        raise LexiconError(f"{path}: no occupations")
    return occupations


def pick_occupations(all_occupations: list[Occupation], names: list[str]) -> list[Occupation]:
    """The lexicon entries named in ``names``; an unknown name raises :class:`LexiconError`."""
    by_name = {o.name: o for o in all_occupations}
    unknown = [n for n in names if n.lower() not in by_name]
    if unknown:
        raise LexiconError(f"unknown occupation(s): {', '.join(unknown)} (not in the lexicon)")
    return [by_name[n.lower()] for n in names]


# -- prompts --------------------------------------------------------------------------------
def load_prompt_set(spec: str = "builtin:prompts_en.toml", base: Path | None = None) -> PromptSet:
    """Read a prompt-set TOML (``name`` and ``[[template]]`` tables with ``id`` and ``text``)."""
    path = resolve_path(spec, base)
    data = read_toml(path)
    templates = data.get("template")
    if not isinstance(templates, list) or not templates:
        raise LexiconError(f"{path}: needs at least one [[template]] with id and text")
    out: list[PromptTemplate] = []
    for i, t in enumerate(templates, start=1):
        if not isinstance(t, dict) or "text" not in t:
            raise LexiconError(f"{path}: template {i} has no 'text'")
        text = str(t["text"])
        if "{occupation}" not in text:
            raise LexiconError(f"{path}: template {i} has no {{occupation}} placeholder")
        out.append(PromptTemplate(int(t.get("id", i)), text))
    ids = [t.id for t in out]
    if len(set(ids)) != len(ids):
        raise LexiconError(f"{path}: duplicate template ids {ids}")
    language = str(data.get("language", "en")).strip().lower() or "en"
    return PromptSet(str(data.get("name", path.stem)), tuple(out), language)


def render_prompts(prompt_set: PromptSet, occupations: list[Occupation]) -> list[dict[str, object]]:
    """Every (template, occupation) prompt as rows of the ``prompts`` table."""
    return [
        {
            "prompt_id": prompt_set.prompt_id(t.id, o.name),
            "prompt_set": prompt_set.name,
            "template_id": t.id,
            "occupation": o.name,
            "text": t.render(o),
        }
        for t in prompt_set.templates
        for o in occupations
    ]


# -- gender terms ---------------------------------------------------------------------------
def load_gender_terms(
    spec: str = "builtin:gender_terms_en.toml", base: Path | None = None
) -> GenderTerms:
    """Read gender words, pronouns and the name-guess mapping."""
    path = resolve_path(spec, base)
    data = read_toml(path)
    parts: dict[str, dict[str, tuple[str, ...]]] = {}
    for table in ("words", "pronouns", "names"):
        section = data.get(table)
        if not isinstance(section, dict) or set(section) != {"male", "female"}:
            raise LexiconError(f"{path}: [{table}] needs exactly the lists 'male' and 'female'")
        parts[table] = {
            g: tuple(str(w).strip().lower() for w in section[g]) for g in ("male", "female")
        }
    overlap = set(parts["words"]["male"] + parts["pronouns"]["male"]) & set(
        parts["words"]["female"] + parts["pronouns"]["female"]
    )
    if overlap:
        raise LexiconError(f"{path}: terms listed for both genders: {sorted(overlap)}")
    return GenderTerms(parts["words"], parts["pronouns"], parts["names"])


ASSOCIATION_SECTIONS = {
    "pronouns": ("female", "male", "neutral"),
    "honorifics": ("female", "male"),
}


def load_association_terms(
    spec: str = "builtin:association_terms_en.toml", base: Path | None = None
) -> AssociationTerms:
    """Read the terms of the gender-association rule (see data/README.md).

    Raises :class:`LexiconError` when a table or list is missing, a pronoun or honorific is
    not one word (letters, digits, ``_``), a term is listed twice, or there is no non-binary
    term.
    """
    path = resolve_path(spec, base)
    data = read_toml(path)
    parts: dict[str, dict[str, tuple[str, ...]]] = {}
    owner: dict[str, str] = {}
    for table, keys in ASSOCIATION_SECTIONS.items():
        section = data.get(table)
        if not isinstance(section, dict) or set(section) != set(keys):
            raise LexiconError(f"{path}: [{table}] needs exactly the lists {', '.join(keys)}")
        parts[table] = {}
        for key in keys:
            terms = _term_list(path, f"{table}.{key}", section[key])
            for term in terms:
                if not re.fullmatch(r"\w+", term):
                    raise LexiconError(
                        f"{path}: {table}.{key}: {term!r} is not one word (letters, digits, _)"
                    )
                if term in owner:
                    raise LexiconError(
                        f"{path}: {term!r} is listed in {owner[term]} and in {table}.{key}"
                    )
                owner[term] = f"{table}.{key}"
            parts[table][key] = terms
    section = data.get("non_binary")
    if not isinstance(section, dict) or set(section) != {"terms"}:
        raise LexiconError(f"{path}: [non_binary] needs exactly the list terms")
    non_binary = _term_list(path, "non_binary.terms", section["terms"])
    if not non_binary:
        raise LexiconError(f"{path}: non_binary.terms is empty")
    language = data.get("language", "en")
    if not isinstance(language, str) or not language.strip():
        raise LexiconError(f"{path}: language must be a language code such as 'en'")
    return AssociationTerms(
        parts["pronouns"], parts["honorifics"], non_binary, language.strip().lower()
    )


def _term_list(path: Path, where: str, value: object) -> tuple[str, ...]:
    """A TOML list of non-empty strings, lower-cased with inner white space collapsed."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LexiconError(f"{path}: {where} must be a list of strings")
    terms = tuple(" ".join(v.lower().split()) for v in value)
    if "" in terms:
        raise LexiconError(f"{path}: {where} has an empty term")
    return terms


def parse_percent_female(raw: str, where: str) -> float:
    """``raw``, a labour table's ``percent_female`` cell, as a share of women in [0, 100];
    :class:`LexiconError` naming ``where`` (``file:line``) when it is no number or out of range."""
    try:
        value = float(raw)
    except ValueError:
        raise LexiconError(f"{where}: percent_female {raw!r} is not a number") from None
    if not 0 <= value <= 100:
        raise LexiconError(f"{where}: percent_female {value} is not in [0, 100]")
    return value


def load_labor_stats(
    spec: str = "builtin:labor_stats_us_bls2024_pst.csv", base: Path | None = None
) -> dict[str, float | None]:
    """% women per occupation (0-100) from a ``occupation,percent_female[,note]`` CSV.

    An empty value whose note reads ``same as OTHER`` takes OTHER's value (the PST table gives
    accountant = auditor, cleaner = housekeeper); any other empty value is ``None`` (no
    statistic, e.g. ``chief``), so callers leave that occupation out of comparisons.
    """
    path = resolve_path(spec, base)
    values: dict[str, float | None] = {}
    same_as: dict[str, str] = {}
    header, rows = read_rows(path)
    if not {"occupation", "percent_female"} <= set(header):
        raise LexiconError(f"{path}: needs columns occupation, percent_female")
    for lineno, fields in rows:
        row = dict(zip(header, fields, strict=True))
        name = (row["occupation"] or "").strip().lower()
        raw = (row["percent_female"] or "").strip()
        note = (row.get("note") or "").strip().lower()
        if not raw:
            values[name] = None
            if note.startswith("same as "):
                same_as[name] = note[len("same as ") :].strip()
            continue
        values[name] = parse_percent_female(raw, f"{path}:{lineno}")
    for name, other in same_as.items():
        if other not in values:
            raise LexiconError(f"{path}: '{name}' is 'same as {other}', which is not in the file")
        values[name] = values[other]
    return values


def read_toml(path: Path) -> dict:
    try:
        # utf-8-sig: a byte-order mark (Excel, Notepad) is dropped, not a TOML error
        return tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LexiconError(f"{path}: not valid TOML: {exc}") from None
