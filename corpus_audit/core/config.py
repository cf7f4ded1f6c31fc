"""The study config (``study.toml``): typed sections, validated with errors that name the key.

A study directory holds one ``study.toml``. Every section is a dataclass below, and every key
is declared once, as one field: its type, its constraints (range, choices, multiple of, ...)
and its meaning in the annotation, its default after it
(``steps: Annotated[int, Range(ge=1), Help("...")] = 50``; the vocabulary and the one checker
are in :mod:`corpus_audit.core.config_fields`). Unknown keys, wrong types and values a
declaration does not allow raise :class:`ConfigError` naming ``section.key``, the value, what
is allowed, and the file; a section's ``rules()`` holds only the rules across its keys. The
help (:mod:`corpus_audit.core.config_help`) reads the same declarations, and a backend's
settings object is derived from them (:func:`derived_from`), not copied. Relative paths in
the file are resolved against the study directory. :func:`dump_toml` writes TOML with
:mod:`tomlkit` (every string escaped so that it reads back unchanged).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import tomllib
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from corpus_audit.core.config_corpus import (
    CorpusSection,
    EngineSection,
    IndicatorsSection,
    LexiconSection,
    NeighborsSection,
    SelectSection,
    StorageSection,
    StudySection,
)
from corpus_audit.core.config_fields import (
    check_fields,
    check_type,  # noqa: F401  (re-exported: image sources check their options with it)
    hints,
)
from corpus_audit.core.config_models import (
    AnalysisSection,
    GenerateSection,
    ImagesSection,
    LabelSection,
)
from corpus_audit.core.config_texts import (
    LlmSection,
    PstSection,
    RecaptionSection,
    TextsSection,
    VariantsSection,
)
from corpus_audit.core.config_values import (  # noqa: F401  (re-exported: what other modules import from here)
    API_KEY_NAME,
    CONFIG_NAME,
    DTYPES,
    MAX_RESAMPLES,
    MAX_THREADS,
    NSFW_POLICIES,
    PARITY_SIDES,
    PRECISIONS,
    parse_size,
)
from corpus_audit.core.errors import ConfigError  # noqa: F401  (re-exported: config.ConfigError)
from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.core.urls import credential_keys, credentials_refused


@dataclass
class StudyConfig:
    """The whole study config; ``root`` is the study directory (not written to the file)."""

    study: StudySection = field(default_factory=StudySection)
    corpus: CorpusSection = field(default_factory=CorpusSection)
    storage: StorageSection = field(default_factory=StorageSection)
    lexicon: LexiconSection = field(default_factory=LexiconSection)
    engine: EngineSection = field(default_factory=EngineSection)
    select: SelectSection = field(default_factory=SelectSection)
    indicators: IndicatorsSection = field(default_factory=IndicatorsSection)
    neighbors: NeighborsSection = field(default_factory=NeighborsSection)
    images: ImagesSection = field(default_factory=ImagesSection)
    label: LabelSection = field(default_factory=LabelSection)
    generate: GenerateSection = field(default_factory=GenerateSection)
    analysis: AnalysisSection = field(default_factory=AnalysisSection)
    pst: PstSection = field(default_factory=PstSection)
    texts: TextsSection = field(default_factory=TextsSection)
    llm: LlmSection = field(default_factory=LlmSection)
    variants: VariantsSection = field(default_factory=VariantsSection)
    recaption: RecaptionSection = field(default_factory=RecaptionSection)
    root: Path = field(default=Path("."), metadata={"file": False})

    def resolve(self, path: str) -> Path:
        """A path from the config, resolved against the study directory."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.root / p)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (what ``study.toml`` holds); an empty table declared
        ``omit_empty`` (a backend's options) is left out, so that a section's hash is what it
        was before the table existed."""
        return {
            f.name: section_dict(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.metadata.get("file", True)
        }

    def setting_values(self, *sections: str) -> dict[str, Any]:
        """``{"section.key": value}`` of every setting the names cover (a section: all its
        keys; ``section.key``: that one), values as ``study.toml`` holds them; what a stage
        run records so a later run and ``status`` can name the settings that changed."""
        data = self.to_dict()
        out: dict[str, Any] = {}
        for name in sections:
            section, _, key = name.partition(".")
            keys = [key] if key else list(data[section])
            for k in keys:  # an omitted empty table named alone: its value, {}
                out[f"{section}.{k}"] = data[section].get(k, getattr(getattr(self, section), k))
        return out

    def section_hash(self, *sections: str) -> str:
        """A short stable hash of the named sections (all when none), for provenance.

        A name may also be one setting, ``section.key`` (a stage that reads one key of another
        stage's section, like ``label`` reading ``images.max_pixels``).
        """
        data = self.to_dict()
        chosen = {}
        for name in sections or tuple(data):
            section, _, key = name.partition(".")
            chosen[name] = (
                data[section].get(key, getattr(getattr(self, section), key))
                if key
                else data[section]
            )
        blob = json.dumps(chosen, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def section_dict(section: Any) -> dict[str, Any]:
    """One section as plain data, its empty ``omit_empty`` tables left out."""
    data = dataclasses.asdict(section)
    for f in dataclasses.fields(section):
        if f.metadata.get("omit_empty") and not data[f.name]:
            del data[f.name]
    return data


@functools.cache
def section_classes() -> dict[str, type]:
    """``{section name: dataclass}`` of every section ``study.toml`` holds, in file order."""
    hints = typing.get_type_hints(StudyConfig)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(StudyConfig)
        if f.metadata.get("file", True)
    }


def section_name(cls: type) -> str:
    """The name in ``study.toml`` of the section class ``cls`` (``GenerateSection``: generate)."""
    return {c: n for n, c in section_classes().items()}[cls]


def derived_from(section: type, *names: str) -> Callable[[type], type]:
    """Class decorator: a backend's settings object derived from study.toml, not copied.

    The decorated class becomes a frozen dataclass whose fields are ``names``, in that
    order: a key of ``section`` (``"steps"``), a key of another section (``"engine.device"``,
    field ``device``), a key under another field name (``"base_url=api_base"``), or a field
    annotated in the class itself (a setting of the backend that study.toml does not hold,
    declared the same way: ``Annotated[int, Range(ge=0), Help(...)]``). Each derived field
    keeps its key's type, default, constraints and help, so a value is checked by the one
    checker (:func:`check_fields`) with the same message as in study.toml, naming
    ``section.key``. The class's ``rules()``, if any, then checks the rules across fields.
    ``cls.from_config(config)`` builds it from a :class:`StudyConfig`, from an instance of
    ``section`` when every derived key is one of its own, or from a mapping of those keys'
    names to values (``{"timeout_s": 30}``: the keys it lacks keep their defaults); the
    class's own fields keep their defaults. ``cls.config_keys`` maps each derived field to
    its ``section.key`` (what a backend's own message names).
    """

    def wrap(cls: type) -> type:
        own = typing.get_type_hints(cls, include_extras=True)
        annotations: dict[str, Any] = {}
        keys: dict[str, str] = {}
        sources: dict[str, tuple[str, str]] = {}
        for spec in names:
            name, _, dotted = spec.rpartition("=")
            home, _, key = dotted.rpartition(".")
            name = name or key
            if not home and key in own and name == key:
                annotations[name] = own[name]
                continue
            home = home or section_name(section)
            source = section_classes()[home]
            declared = {f.name: f for f in dataclasses.fields(source)}.get(key)
            if declared is None:
                raise TypeError(f"{cls.__name__}: {spec!r} is not a key of [{home}]")
            annotations[name] = hints(source)[key]
            if declared.default is not dataclasses.MISSING:
                setattr(cls, name, declared.default)
            else:
                setattr(cls, name, field(default_factory=declared.default_factory))
            keys[name] = f"{home}.{key}"
            sources[name] = (home, key)
        if set(own) - set(annotations):
            raise TypeError(
                f"{cls.__name__}: fields not named: {sorted(set(own) - set(annotations))}"
            )
        cls.__annotations__ = annotations

        def __post_init__(self: Any) -> None:  # noqa: N807
            check_fields(self, keys)
            rules = getattr(self, "rules", None)
            if rules is not None:
                rules()

        def from_config(kind: type, config: Any) -> Any:
            if isinstance(config, Mapping):
                return kind(**{f: config[k] for f, (_, k) in sources.items() if k in config})

            def section_of(home: str) -> Any:
                return getattr(config, home) if isinstance(config, StudyConfig) else config

            return kind(**{f: getattr(section_of(s), k) for f, (s, k) in sources.items()})

        cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
        cls.from_config = classmethod(from_config)  # type: ignore[attr-defined]
        cls.config_keys = dict(keys)  # type: ignore[attr-defined]
        return dataclass(frozen=True)(cls)

    return wrap


# Keys no release reads any more: a study.toml that still has one loads (the key is dropped and
# not written back); help, `set` and new configs do not know them.
RETIRED_KEYS = {
    "label.decode_workers": "the engine decodes ahead of the models in engine.threads threads",
}
# Keys under a new name: old name -> (new key in the same section, the old value converted).
RENAMED_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # attempts -> retries: one meaning of retries for every HTTP client
    "generate.api_max_attempts": (
        "api_max_retries",
        lambda n: n - 1 if isinstance(n, int) and not isinstance(n, bool) else n,
    ),
}


def _renamed(name: str, data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` (one section) with its renamed keys under their new names; both names given
    is an error naming the two."""
    out = dict(data)
    for key in data:
        old = f"{name}.{key}"
        if old in RENAMED_KEYS:
            new, convert = RENAMED_KEYS[old]
            if new in data:
                raise ConfigError(f"{source}: {old} is now {name}.{new}: give only {name}.{new}")
            out[new] = convert(out.pop(key))
    return out


def _build_section(cls: type, name: str, data: Any, source: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    data = _renamed(
        name, {k: v for k, v in data.items() if f"{name}.{k}" not in RETIRED_KEYS}, source
    )
    known = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in known:
            raise ConfigError(
                f"{source}: unknown key '{name}.{key}' (known: {', '.join(sorted(known))})"
            )
    section = cls(**data)
    try:
        section.validate()  # each key against its declaration, then the rules across keys
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return section


def config_from_dict(data: dict[str, Any], root: Path, source: str = "<config>") -> StudyConfig:
    """Build and validate a config from plain data (as parsed from TOML). A URL with a user
    name or password anywhere is refused first, by one line that does not quote it."""
    secret = credential_keys(data)
    if secret:
        raise ConfigError(credentials_refused(secret, source))
    sections = section_classes()
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name not in sections:
            raise ConfigError(
                f"{source}: unknown section [{name}] (known: {', '.join(sorted(sections))})"
            )
        kwargs[name] = _build_section(sections[name], name, value, source)
    return StudyConfig(**kwargs, root=Path(root))


def load_config(study_dir: Path | str) -> StudyConfig:
    """Read and validate ``<study_dir>/study.toml``."""
    root = Path(study_dir)
    path = root / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(f"{path}: no study config here (create one with `corpus-audit init`)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return config_from_dict(data, root, str(path))


def dump_toml(data: dict[str, Any]) -> str:
    """Plain config data (section -> key -> value) as TOML text, one line per key (tables and
    lists inline), written by :mod:`tomlkit`: every string is escaped so that a TOML reader
    gives it back unchanged (control characters, DEL, quotes, backslashes)."""
    doc = tomlkit.document()
    for section, values in data.items():
        table = tomlkit.table()
        for key, value in values.items():
            table.add(key, toml_item(value))
        if len(doc):
            doc.add(tomlkit.nl())
        doc.add(section, table)
    return tomlkit.dumps(doc)


def toml_item(value: Any) -> Any:
    """``value`` as a :mod:`tomlkit` item on one line (tables inline, lists on one line)."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for key, v in value.items():
            table.append(key, toml_item(v))
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(toml_item(v) for v in value)
        return array
    return tomlkit.item(value)


def toml_value(value: Any) -> str:
    """``value`` as TOML text (``"auto"``, ``0.9``, ``["a", "b"]``, ``{k = 1}``)."""
    return toml_item(value).as_string()


def write_config(config: StudyConfig) -> Path:
    """Write ``study.toml`` into the study directory (atomically) and return its path."""
    return write_text_atomic(config.root / CONFIG_NAME, dump_toml(config.to_dict()))
