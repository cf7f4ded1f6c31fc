"""``corpus-audit config show`` and ``config set``: read and edit ``study.toml`` with checks.

``show`` prints the effective config: every setting, defaults filled in, as TOML.

``set`` applies ``section.key=VALUE`` assignments to the settings the file holds, validates the
result exactly as a stage would load it (types, ranges, choices, unknown keys;
:func:`corpus_audit.core.config.config_from_dict`) and only then writes the file, atomically
(:mod:`corpus_audit.core.fileio`). A bad value is a :class:`ConfigError` naming the key, and the
file is not touched. The file is edited in place with :mod:`tomlkit`: only the assigned keys
change; the user's comments, blank lines and key order are kept, and a key the file does not
hold yet is added to its section (a section it does not hold, at the end). Every value is
written escaped so that the reader gives it back unchanged (control characters, DEL, quotes,
backslashes); the text written is read back with :mod:`tomllib` and validated before it
replaces the file. The whole edit holds the study's config lock
(:mod:`corpus_audit.core.study_lock`): concurrent ``config set`` calls queue and keep one
another's keys, and one made while a stage of the study runs is refused at once. Changing a
setting marks the stages that read it as changed in
``corpus-audit status``; nothing is rerun.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from corpus_audit.core.config import (
    CONFIG_NAME,
    config_from_dict,
    dump_toml,
    load_config,
    toml_item,
    toml_value,
)
from corpus_audit.core.config_help import setting
from corpus_audit.core.errors import ConfigError, printable
from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.core.study_lock import config_lock


def show_config(study_dir: Path | str) -> str:
    """The effective config of the study in ``study_dir`` as TOML (defaults filled in)."""
    return dump_toml(load_config(study_dir).to_dict())


def parse_assignment(text: str) -> tuple[str, Any]:
    """``section.key=VALUE`` -> (``section.key``, value). VALUE is read as a TOML value
    (``0.8``, ``true``, ``["keyword", "nn"]``, ``"quoted text"``); for a text setting an
    unquoted VALUE is the text itself (``label.classifier=clip``)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or "." not in key:
        raise ConfigError(f"{text!r}: expected section.key=VALUE (e.g. label.classifier=clip)")
    base, _ = table_key(key)
    found = setting(base)
    raw = raw.strip()
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of the command line (lone surrogates)
        raise ConfigError(f"{key}: the value is not valid UTF-8 text") from None
    if found.type == "str" and not raw.startswith(('"', "'")):
        return key, raw
    try:
        return key, tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        if table_key(key)[1] and not raw.startswith(('"', "'")):
            return key, raw  # a table's entry of a type only its backend knows: text
        raise ConfigError(
            f'{key}: {raw!r} is not a {found.type} value (TOML: 0.5, true, ["a"], "text")'
        ) from None


def _set(doc: tomlkit.TOMLDocument, section: str, name: str, item: Any) -> None:
    """Set ``[section] name`` in ``doc``: a key the file holds is replaced where it is (its
    comment kept); a new key goes right after the section's last key, not after the comment
    lines that introduce the next section; a new section goes to the end of the file."""
    if section not in doc:
        doc.add(section, tomlkit.table())
    table = doc[section]
    keys = list(table.keys())  # type: ignore[union-attr]
    if name in keys or not keys or not isinstance(table, tomlkit.items.Table):
        table[name] = item  # type: ignore[index]
        return
    insert_after = getattr(table.value, "_insert_after", None)  # tomlkit's, kept since 0.5
    if table.is_super_table() or insert_after is None:
        table[name] = item
        return
    insert_after(keys[-1], name, item)


def set_config(study_dir: Path | str, assignments: list[str]) -> list[tuple[str, Any, Any]]:
    """Apply ``assignments`` to ``<study_dir>/study.toml``; returns (key, old, new) for each.

    All or nothing: every assignment is parsed and the whole result validated (as written,
    read back) before the file is replaced; on any error the file is unchanged. Done under the
    study's config lock (:mod:`corpus_audit.core.study_lock`): concurrent edits queue, each
    keeping the others' keys, and a stage of the study running is a :class:`StudyError` at
    once (nothing changes under a run).
    """
    root = Path(study_dir)
    with config_lock(root, CONFIG_NAME):
        return _set_config(root, [parse_assignment(text) for text in assignments])


KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def table_key(key: str) -> tuple[str, str]:
    """``label.options.alpha`` -> (``label.options``, ``alpha``): one entry of a table
    setting (a backend's options); ``section.key`` -> (it, ``""``). An unknown key, or a
    third part on a setting that is not a table, is a :class:`ConfigError`."""
    section, _, rest = key.partition(".")
    name, _, entry = rest.partition(".")
    base = f"{section}.{name}"
    if setting(base).type != "table" and entry:  # an unknown key: named with the known ones
        raise ConfigError(f"{key}: {base} is not a table (section.key=VALUE)")
    return base, entry


def _plain(key: str, value: Any) -> None:
    """Refuse a value TOML would not give back as it is (None, bytes, a set, a date, an
    object; a table with keys that are not text), naming ``key``."""
    if isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _plain(key, item)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"{key}: a table's keys are text, not {type(k).__name__}")
            _plain(key, item)
        return
    raise ConfigError(
        f"{key}: {type(value).__name__} is not a setting value (text, a number, true/false, "
        "a list or a table of those)"
    )


def set_values(study_dir: Path | str, settings: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """:func:`set_config` with values instead of ``section.key=VALUE`` texts (the API's
    ``Study.set``): each key is ``section.key`` exactly (no ``=``, no newline: it is never
    parsed again) and each value plain data, both checked before the file is read; the
    setting's own type is then checked as for ``config set`` (a table or a date given for a
    text setting is refused, never stored as its text)."""
    pairs = []
    for key, value in settings.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise ConfigError(f"{printable(repr(key))[:200]}: a setting is named section.key")
        table_key(key)  # an unknown key: named with the known ones
        _plain(key, value)
        pairs.append((key, list(value) if isinstance(value, tuple) else value))
    root = Path(study_dir)
    with config_lock(root, CONFIG_NAME):
        return _set_config(root, pairs)


def _whole_tables(config: Any, pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``pairs`` with each table entry (``label.options.alpha``) folded into its whole table
    (``label.options``: the table the config holds, the entries set), in first-named order."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        base, entry = table_key(key)
        if not entry:
            out[key] = value
            continue
        section, _, name = base.partition(".")
        table = out.get(base, dict(getattr(getattr(config, section), name)))
        out[base] = {**table, entry: value}
    return list(out.items())


def _set_config(root: Path, pairs: list[tuple[str, Any]]) -> list[tuple[str, Any, Any]]:
    """:func:`set_config`'s work, done while the study's config lock is held."""
    path = root / CONFIG_NAME
    config = load_config(root)  # the file must be valid now, and exist
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    except tomlkit.exceptions.ParseError as exc:  # tomllib read it, tomlkit cannot edit it
        raise ConfigError(f"{path}: cannot be edited in place: {exc}") from None
    changes: list[tuple[str, Any, Any]] = []
    for key, value in _whole_tables(config, pairs):
        section, _, name = key.partition(".")
        changes.append((key, getattr(getattr(config, section), name), value))
        _set(doc, section, name, toml_item(value))
    written = tomlkit.dumps(doc)
    try:
        data = tomllib.loads(written)
    except tomllib.TOMLDecodeError as exc:  # never expected: tomlkit escapes every value
        raise ConfigError(f"{path}: the edited file would not be valid TOML: {exc}") from None
    config_from_dict(data, root, str(path))
    for key, _, value in changes:  # never expected to differ: tomlkit escapes every value
        section, _, name = key.partition(".")
        back = data[section][name]
        if toml_value(back) != toml_value(value):
            raise ConfigError(f"{path}: {key}: {value!r} would read back as {back!r}")
    write_text_atomic(path, written)
    return changes
