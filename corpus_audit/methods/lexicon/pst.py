"""Prompt sets of the Paired Stereotype Test (METHODS 2) as data: roles, templates, expansion.

Two data files, both replaceable by a user's own (another language, other roles):

- **roles** (``builtin:pst/roles_en.csv``), one row per role with the columns
  ``role`` (canonical key, lower case), ``stereotype`` (``male`` | ``female``: the gender the
  role is stereotyped as), ``occupation`` (``yes`` | ``no``: in the paired-occupation lists),
  ``power`` (``high`` | ``low`` | empty: a power role), ``display`` (how prompts write it,
  ``CEO``; empty = the role), ``forms`` (``|``-separated lower-case surface forms that count
  as a mention in a caption: singular, plural, spelling variants; the role itself is always
  one), and the optional ``male_forms`` / ``female_forms`` (forms that carry a gender by
  themselves: ``salesman``, ``seamstress``) and ``not_forms`` (phrases holding a form that
  do not mean the role: ``secretary of state``, ``point guard``); the last three are used by
  the caption-side score only.
- **templates** (``builtin:pst/templates_en.toml``): ``[templates]`` ``single`` (``{role}``),
  ``paired`` (``{left}``, ``{right}``), ``power`` (``{occupation}``, ``{left}``, ``{right}``);
  ``[fair]`` ``paired`` (and optionally ``power``) with the same placeholders; ``[feedback]``
  texts of the FairCritic's writers (see :mod:`corpus_audit.methods.pst.critic`).

:func:`expand_prompts` turns them into one :class:`PstPrompt` per prompt:

- **paired**: every male-stereotyped occupation x every female-stereotyped occupation, in both
  orders (``order`` = ``male_left`` | ``female_left``): 20 x 20 x 2 = 800 with the built-in
  lists;
- **power**: every occupation that is not itself a power role (the built-in lists drop
  manager, supervisor, CEO and assistant: 36 remain) x every high x every low power role x 2
  orders: 36 x 4 x 4 x 2 = 1,152; ``order`` names the stereotype of the role on the left
  (high roles are male-stereotyped in the built-in file, so ``male_left`` = high on the left);
- **fair** variants (``variant = "fair"``): one per paired prompt (and per power prompt when
  the template file has ``[fair] power``), same roles and order, same id with ``fair``;
- **single**: one per role that appears bare in a paired or power prompt: the 40 occupations
  and the 4 power roles not among them (leader, employee, worker, intern), 44 with the
  built-in lists, so every role of the paired and the power test has its single-person
  counterpart for the single-vs-paired gap. ``power_singles="occupation_role"`` adds one
  single per (power occupation, power role) ("one carpenter manager", 288 more): the exact
  single counterpart of each power prompt's person, at 288 x the images per prompt.

Prompt ids are stable and readable: ``<set>:<kind>:<variant>:<roles...>`` with the roles
left to right (power prompts put the occupation first), e.g.
``pst:paired:plain:carpenter:editor``, ``pst:power:fair:baker:manager:intern``,
``pst:single:plain:nurse``. Errors raise :class:`~corpus_audit.methods.lexicon.LexiconError` naming
the file and the line (CSV) or key (TOML).
"""

from __future__ import annotations

import string
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from corpus_audit.methods.lexicon import (
    LexiconError,
    check_forms,
    claim_forms,
    expand_forms,
    pipe_items,
    read_toml,
    resolve_path,
    unique_name,
)
from corpus_audit.methods.lexicon.csvfile import read_rows, records

GENDERS = ("male", "female")
KINDS = ("single", "paired", "power")
VARIANTS = ("plain", "fair")
# Prompts one roles file and templates file may expand to (docs/reliability.md, "Bounds"): the
# paired and power sets grow with products of the role counts, and each prompt is generated
# and scored (the built-in files give 2,796 with the default settings).
MAX_PROMPTS = 100_000

ROLE_COLUMNS = ("role", "stereotype", "occupation", "power", "display", "forms")
PLACEHOLDERS = {
    "single": {"role"},
    "paired": {"left", "right"},
    "power": {"occupation", "left", "right"},
}
FEEDBACK_KEYS = ("intro", "role", "join", "end", "instruction", "finding")

# Columns of prompts_frame(): what the study's PST prompt table will hold.
PROMPT_COLUMNS = (
    "prompt_id",  # stable id, see the module docstring
    "prompt_set",  # the template file's `name` (built-in: 'pst')
    "kind",  # single | paired | power
    "variant",  # plain | fair
    "text",  # the exact prompt text
    "left_role",  # role of the person on the left (single: the one person)
    "left_stereotype",  # male | female
    "right_role",  # role on the right (NULL for single)
    "right_stereotype",  # male | female (NULL for single)
    "occupation",  # power prompts (and occupation_role singles): the shared occupation
    "order",  # male_left | female_left: the stereotype of the left role (NULL for single)
)


@dataclass(frozen=True)
class PstRole:
    """One role of the test.

    ``name``: canonical key (lower case); ``stereotype``: ``male`` | ``female``;
    ``occupation``: in the paired-occupation lists; ``power``: ``high`` | ``low`` | None;
    ``display``: as prompts write it; ``forms``: lower-case surface forms (hyphen/space
    variants added); ``gendered_forms``: gender -> forms that carry that gender;
    ``not_forms``: phrases that contain a form but do not mean the role.
    """

    name: str
    stereotype: str
    occupation: bool
    power: str | None
    display: str
    forms: tuple[str, ...]
    gendered_forms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    not_forms: tuple[str, ...] = ()


@dataclass(frozen=True)
class PstTemplates:
    """Templates of one language: ``plain``/``fair`` map a kind to its text; ``feedback``
    holds the FairCritic writer texts and ``nouns`` (gender -> noun, ``man``/``woman``)."""

    name: str
    language: str
    plain: dict[str, str]
    fair: dict[str, str]
    feedback: dict[str, str]
    nouns: dict[str, str]
    path: str


@dataclass(frozen=True)
class PstPrompt:
    """One prompt (a row of :data:`PROMPT_COLUMNS`)."""

    prompt_id: str
    prompt_set: str
    kind: str
    variant: str
    text: str
    left_role: str
    left_stereotype: str
    right_role: str | None = None
    right_stereotype: str | None = None
    occupation: str | None = None
    order: str | None = None

    def role_of(self, side: str) -> tuple[str, str]:
        """``(role, stereotype)`` of the person on ``side`` (``left``/``right``/``single``)."""
        if side in ("left", "single"):
            return self.left_role, self.left_stereotype
        if side == "right" and self.right_role is not None and self.right_stereotype:
            return self.right_role, self.right_stereotype
        raise ValueError(f"{self.prompt_id}: no person on side {side!r}")

    def row(self) -> dict[str, Any]:
        return asdict(self)


# -- roles ------------------------------------------------------------------------------------
def _yes_no(path: Path, lineno: int, value: str) -> bool:
    low = value.strip().lower()
    if low in ("yes", "true", "1"):
        return True
    if low in ("no", "false", "0", ""):
        return False
    raise LexiconError(f"{path}:{lineno}: occupation {value!r} is not yes or no")


def _gendered(path: Path, lineno: int, row: dict[str, str | None]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for gender in GENDERS:
        raw = pipe_items(row, f"{gender}_forms")
        if raw:
            out[gender] = expand_forms(raw)
    return out


def _role_name(path: Path, lineno: int, row: dict[str, str], seen: dict[str, int]) -> str:
    """The row's role name (lower case, single spaces): not empty, no ':', not seen before."""
    name = unique_name(path, lineno, row, "role", seen)
    if ":" in name:  # a first row with ':' fails here, so no later duplicate of it gets this far
        raise LexiconError(f"{path}:{lineno}: role '{name}' contains ':' (prompt ids use it)")
    return name


def _role_kind(path: Path, lineno: int, name: str, row: dict[str, str]) -> tuple:
    """``(stereotype, power, occupation)`` of the row, each checked."""
    stereotype = (row.get("stereotype") or "").strip().lower()
    if stereotype not in GENDERS:
        raise LexiconError(
            f"{path}:{lineno}: stereotype {stereotype!r} of '{name}' is not male or female"
        )
    power = (row.get("power") or "").strip().lower() or None
    if power not in (None, "high", "low"):
        raise LexiconError(f"{path}:{lineno}: power {power!r} is not high, low or empty")
    occupation = _yes_no(path, lineno, row.get("occupation") or "")
    if not occupation and power is None:
        raise LexiconError(f"{path}:{lineno}: '{name}' is neither an occupation nor a power role")
    return stereotype, power, occupation


def _role_forms(
    path: Path, lineno: int, name: str, row: dict[str, str], owner: dict[str, str]
) -> tuple:
    """``(forms, gendered forms, not_forms)`` of the row; every form claimed in ``owner`` for
    ``name`` (a form another role owns, or one both neutral and gendered, is an error)."""
    forms = expand_forms([name, *pipe_items(row, "forms")])
    gendered = _gendered(path, lineno, row)
    every_form = forms + tuple(f for fs in gendered.values() for f in fs)
    check_forms(path, lineno, name, every_form)
    claim_forms(path, lineno, name, every_form, owner)
    both = set(gendered.get("male", ())) & set(gendered.get("female", ()))
    if both or set(forms) & {f for fs in gendered.values() for f in fs}:
        raise LexiconError(
            f"{path}:{lineno}: a form of '{name}' is listed as neutral and gendered, "
            "or as both genders"
        )
    not_forms = expand_forms(pipe_items(row, "not_forms"))
    if set(not_forms) & set(owner):
        raise LexiconError(f"{path}:{lineno}: a not_forms phrase of '{name}' is also a form")
    return forms, gendered, not_forms


def load_roles(spec: str = "builtin:pst/roles_en.csv", base: Path | None = None) -> list[PstRole]:
    """Read a PST roles CSV (columns in the module docstring), in file order.

    Raises :class:`LexiconError` (``file:line: problem``) on a missing column, an empty or
    duplicate role, a stereotype other than male/female, a power other than high/low/empty,
    a bad occupation flag, a form claimed by two roles, or a file with no male- or no
    female-stereotyped occupation (the paired test needs both).
    """
    path = resolve_path(spec, base)
    # strict: field count, quoting (an unterminated quote is an error), UTF-8, a BOM dropped,
    # a field over csv's 128 KiB limit an error naming the line
    header, rows = read_rows(path)
    missing = [c for c in ROLE_COLUMNS if c not in header]
    if missing:
        raise LexiconError(f"{path}:1: missing column(s) {', '.join(missing)}")
    roles: list[PstRole] = []
    seen: dict[str, int] = {}
    owner: dict[str, str] = {}
    for lineno, row in records(header, rows):
        name = _role_name(path, lineno, row, seen)
        stereotype, power, occupation = _role_kind(path, lineno, name, row)
        forms, gendered, not_forms = _role_forms(path, lineno, name, row, owner)
        display = (row.get("display") or "").strip() or name
        roles.append(
            PstRole(name, stereotype, occupation, power, display, forms, gendered, not_forms)
        )
    for gender in GENDERS:
        if not any(r.occupation and r.stereotype == gender for r in roles):
            raise LexiconError(
                f"{path}: no {gender}-stereotyped occupation (the paired test needs both)"
            )
    return roles


# -- templates --------------------------------------------------------------------------------
def _fields(text: str) -> set[str]:
    """The placeholders of ``text``; a format spec or conversion (``{role:d}``,
    ``{role:>20000000}``, ``{role!r}``) is a :class:`ValueError`: the texts are only ever
    filled with plain strings, and a width would make prompts of any size."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(f"malformed braces ({exc})") from None
    for _, name, spec, conversion in parsed:
        if name is not None and (spec or conversion):
            shown = "{" + name + (f"!{conversion}" if conversion else "") + f":{spec}" * bool(spec)
            raise ValueError(f"placeholder {shown}}} has a format spec or conversion (not allowed)")
    return {f for _, f, _, _ in parsed if f is not None}


# The placeholders the [feedback] texts that are filled in may use (pst/critic.py).
FEEDBACK_PLACEHOLDERS = {
    "role": {"role", "over", "under", "percent"},
    "finding": {"role", "over", "under", "percent"},
    "instruction": {"prompt", "findings"},
}


def _check_template(path: Path, key: str, text: object, kind: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise LexiconError(f"{path}: {key} must be a non-empty string")
    try:
        found = _fields(text)
    except ValueError as exc:
        raise LexiconError(f"{path}: {key}: {exc}") from None
    want = PLACEHOLDERS[kind]
    if found != want:
        extra, lack = sorted(found - want), sorted(want - found)
        detail = "; ".join(
            part
            for part in (
                f"unknown placeholder(s) {', '.join('{' + e + '}' for e in extra)}"
                if extra
                else "",
                f"missing {', '.join('{' + m + '}' for m in lack)}" if lack else "",
            )
            if part
        )
        raise LexiconError(f"{path}: {key}: {detail}")
    return text


def load_templates(
    spec: str = "builtin:pst/templates_en.toml", base: Path | None = None
) -> PstTemplates:
    """Read a PST templates TOML (see the module docstring); errors name the file and key."""
    path = resolve_path(spec, base)
    data = read_toml(path)
    plain_table = data.get("templates")
    if not isinstance(plain_table, dict):
        raise LexiconError(f"{path}: needs a [templates] table with single, paired and power")
    plain = {k: _check_template(path, f"templates.{k}", plain_table.get(k), k) for k in KINDS}
    unknown = sorted(set(plain_table) - set(KINDS))
    if unknown:
        raise LexiconError(f"{path}: [templates] has unknown key(s) {', '.join(unknown)}")
    fair_table = data.get("fair")
    if not isinstance(fair_table, dict) or "paired" not in fair_table:
        raise LexiconError(f"{path}: needs a [fair] table with at least 'paired'")
    unknown = sorted(set(fair_table) - {"paired", "power"})
    if unknown:
        raise LexiconError(f"{path}: [fair] has unknown key(s) {', '.join(unknown)}")
    fair = {k: _check_template(path, f"fair.{k}", v, k) for k, v in fair_table.items()}
    feedback_table = data.get("feedback")
    if not isinstance(feedback_table, dict):
        raise LexiconError(f"{path}: needs a [feedback] table ({', '.join(FEEDBACK_KEYS)})")
    feedback = {}
    for key in FEEDBACK_KEYS:
        value = feedback_table.get(key)
        if not isinstance(value, str):
            raise LexiconError(f"{path}: feedback.{key} must be a string")
        if key in FEEDBACK_PLACEHOLDERS:  # filled in by str.format: checked here, not later
            try:
                extra = sorted(_fields(value) - FEEDBACK_PLACEHOLDERS[key])
            except ValueError as exc:
                raise LexiconError(f"{path}: feedback.{key}: {exc}") from None
            if extra:
                allowed = ", ".join("{" + p + "}" for p in sorted(FEEDBACK_PLACEHOLDERS[key]))
                raise LexiconError(
                    f"{path}: feedback.{key}: unknown placeholder(s) "
                    f"{', '.join('{' + e + '}' for e in extra)} (allowed: {allowed})"
                )
        feedback[key] = value
    nouns = feedback_table.get("nouns")
    if not isinstance(nouns, dict) or set(nouns) != set(GENDERS):
        raise LexiconError(f"{path}: [feedback.nouns] needs exactly 'male' and 'female'")
    return PstTemplates(
        str(data.get("name", path.stem)),
        str(data.get("language", "")),
        plain,
        fair,
        feedback,
        {g: str(nouns[g]) for g in GENDERS},
        str(path),
    )


# -- expansion --------------------------------------------------------------------------------
def _order(left: PstRole) -> str:
    return f"{left.stereotype}_left"


def _prompt_id(name: str, kind: str, variant: str, *roles: str) -> str:
    return ":".join((name, kind, variant, *roles))


@dataclass(frozen=True)
class _Groups:
    """The roles of one expansion, grouped: occupations, high- and low-power roles, and the
    occupations without a power level (the ``power`` kind's occupations)."""

    roles: list[PstRole]
    occupations: list[PstRole]
    high: list[PstRole]
    low: list[PstRole]
    power_occupations: list[PstRole]

    @classmethod
    def of(cls, roles: list[PstRole]) -> _Groups:
        occupations = [r for r in roles if r.occupation]
        return cls(
            roles,
            occupations,
            [r for r in roles if r.power == "high"],
            [r for r in roles if r.power == "low"],
            [r for r in occupations if r.power is None],
        )

    @property
    def bare(self) -> list[PstRole]:
        """The roles of the single prompts: occupations, then bare power roles."""
        return self.occupations + [r for r in self.roles if r.power and not r.occupation]


def _check_options(kinds: tuple[str, ...], power_singles: str) -> None:
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"kinds: unknown kind(s) {', '.join(unknown)} (known: {', '.join(KINDS)})")
    if power_singles not in ("role", "occupation_role"):
        raise ValueError(f"power_singles: {power_singles!r} is not role or occupation_role")


def _planned(g: _Groups, kinds: tuple[str, ...], variants: list, power_singles: str) -> int:
    """How many prompts the expansion makes (checked against :data:`MAX_PROMPTS` first)."""
    n_male = sum(r.stereotype == "male" for r in g.occupations)
    single = len(g.bare) + (power_singles == "occupation_role") * len(g.power_occupations) * (
        len(g.high) + len(g.low)
    )
    paired = len(variants) * 2 * n_male * (len(g.occupations) - n_male)
    power_tables = sum("power" in table for _, table in variants)
    power = power_tables * len(g.power_occupations) * 2 * len(g.high) * len(g.low)
    return ("single" in kinds) * single + ("paired" in kinds) * paired + ("power" in kinds) * power


def _single_prompts(g: _Groups, templates: PstTemplates, power_singles: str) -> list[PstPrompt]:
    name, out = templates.name, []
    for r in g.bare:
        text = templates.plain["single"].format(role=r.display)
        pid = _prompt_id(name, "single", "plain", r.name)
        out.append(PstPrompt(pid, name, "single", "plain", text, r.name, r.stereotype))
    if power_singles == "occupation_role":
        for occ in g.power_occupations:
            for r in g.high + g.low:
                text = templates.plain["single"].format(role=f"{occ.display} {r.display}")
                pid = _prompt_id(name, "single", "plain", occ.name, r.name)
                out.append(
                    PstPrompt(
                        pid, name, "single", "plain", text, r.name, r.stereotype,
                        occupation=occ.name,
                    )
                )  # fmt: skip
    return out


def _paired_prompts(g: _Groups, name: str, variants: list) -> list[PstPrompt]:
    males = [r for r in g.occupations if r.stereotype == "male"]
    females = [r for r in g.occupations if r.stereotype == "female"]
    pairs = [(m, f) for m in males for f in females] + [(f, m) for m in males for f in females]
    out = []
    for variant, table in variants:
        for left, right in pairs:
            text = table["paired"].format(left=left.display, right=right.display)
            out.append(
                PstPrompt(
                    _prompt_id(name, "paired", variant, left.name, right.name),
                    name, "paired", variant, text,
                    left.name, left.stereotype, right.name, right.stereotype,
                    None, _order(left),
                )
            )  # fmt: skip
    return out


def _power_prompts(g: _Groups, name: str, variants: list) -> list[PstPrompt]:
    pairs = [(h, lo) for h in g.high for lo in g.low] + [(lo, h) for h in g.high for lo in g.low]
    out = []
    for variant, table in variants:
        if "power" not in table:
            continue
        for occ in g.power_occupations:
            for left, right in pairs:
                text = table["power"].format(
                    occupation=occ.display, left=left.display, right=right.display
                )
                out.append(
                    PstPrompt(
                        _prompt_id(name, "power", variant, occ.name, left.name, right.name),
                        name, "power", variant, text,
                        left.name, left.stereotype, right.name, right.stereotype,
                        occ.name, _order(left),
                    )
                )  # fmt: skip
    return out


def expand_prompts(
    roles: list[PstRole],
    templates: PstTemplates,
    *,
    kinds: tuple[str, ...] = KINDS,
    fair: bool = True,
    power_singles: str = "role",
) -> list[PstPrompt]:
    """Every prompt of ``kinds`` (see the module docstring for the sets and their counts).

    ``fair``: add the fairness variant of every kind the template file has one for.
    ``power_singles``: ``role`` (a single prompt per bare power role) or ``occupation_role``
    (also one per occupation + power role, e.g. "one carpenter manager").
    """
    _check_options(kinds, power_singles)
    groups = _Groups.of(roles)
    variants = [("plain", templates.plain)] + ([("fair", templates.fair)] if fair else [])
    count = _planned(groups, kinds, variants, power_singles)
    if count > MAX_PROMPTS:
        raise LexiconError(
            f"{templates.path}: with its roles file these templates expand to {count:,} "
            f"prompts, above the maximum {MAX_PROMPTS:,} (each is generated and scored); use "
            "fewer roles, or fewer pst.kinds"
        )
    out: list[PstPrompt] = []
    if "single" in kinds:
        out += _single_prompts(groups, templates, power_singles)
    if "paired" in kinds:
        out += _paired_prompts(groups, templates.name, variants)
    if "power" in kinds:
        out += _power_prompts(groups, templates.name, variants)
    return out


def prompts_frame(prompts: list[PstPrompt]) -> pd.DataFrame:
    """The prompts as a DataFrame with the columns :data:`PROMPT_COLUMNS`, in order."""
    return pd.DataFrame([p.row() for p in prompts], columns=list(PROMPT_COLUMNS))


def load_prompts(
    roles: str = "builtin:pst/roles_en.csv",
    templates: str = "builtin:pst/templates_en.toml",
    base: Path | None = None,
    **options: Any,
) -> list[PstPrompt]:
    """:func:`expand_prompts` of two lexicon files (``builtin:...`` or paths)."""
    return expand_prompts(load_roles(roles, base), load_templates(templates, base), **options)
