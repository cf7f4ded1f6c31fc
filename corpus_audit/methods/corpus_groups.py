"""Corpus groups: which corpus file's captions are counted together in the per-corpus results.

``corpus.groups`` maps a glob to a group name. A file belongs to the group of the first glob
(in the order of ``study.toml``) that matches its path or its name (``fnmatch`` rules,
case-sensitive); a file no glob matches is a group of its own, named by its file key (the
file name, or the shortest path tail that tells two equal names apart: select's
``sample_key``). ``corpus.hypernymized`` names the groups whose captions replace names by
hypernyms (CC3M): declared by the user, never guessed from the text.

Pure: the stage passes the corpus files in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePath

from corpus_audit.core.errors import ConfigError

#: a group whose name starts with this (case-insensitive) is compared with the paper's LAION
#: numbers (Seshadri et al. audit LAION-400M)
PAPER_GROUP_PREFIX = "laion"


@dataclass(frozen=True)
class FileGroup:
    """One corpus file's group: ``file_id`` (corpus_files), ``group`` name, whether the group
    is declared ``hypernymized``."""

    file_id: int
    group: str
    hypernymized: bool


def group_of(path: str, key: str, globs: Mapping[str, str]) -> str:
    """The group of the corpus file at ``path`` (file key ``key``): the first glob of
    ``globs`` matching the path or the file name, else ``key``."""
    name = PurePath(path).name
    for glob, group in globs.items():
        if fnmatchcase(path, glob) or fnmatchcase(name, glob):
            return group
    return key


def assign_groups(
    files: Iterable[tuple[int, str, str]],
    globs: Mapping[str, str],
    hypernymized: Iterable[str],
    *,
    source: str = "study.toml",
) -> list[FileGroup]:
    """The group of each ``(file_id, path, file key)`` of ``files``.

    Raises :class:`ConfigError` (naming ``source``) when ``hypernymized`` names a group no
    file belongs to: a typo there would silently flag nothing.
    """
    out = [FileGroup(i, group_of(p, k, globs), False) for i, p, k in files]
    declared = list(hypernymized)
    known = {f.group for f in out}
    unknown = [g for g in declared if g not in known]
    if unknown:
        raise ConfigError(
            f"{source}: corpus.hypernymized names {', '.join(map(repr, unknown))}, which is no "
            f"corpus group (the groups: {', '.join(sorted(known)) or 'none'})"
        )
    flagged = set(declared)
    return [FileGroup(f.file_id, f.group, f.group in flagged) for f in out]


def is_paper_group(group: str | None) -> bool:
    """Whether ``group`` is compared with the paper's LAION numbers (its name starts with
    ``laion``, any case)."""
    return bool(group) and str(group).lower().startswith(PAPER_GROUP_PREFIX)
