"""Image sources: one module per ``kind`` of ``images.sources`` entry, one registry.

:data:`SOURCES` maps a kind to its :class:`~corpus_audit.backends.image_sources.base.ImageSource`;
:func:`parse_source` turns a config entry into that kind's typed options (an unknown key, a
wrong type or a bad value is a :class:`ConfigError` naming ``images.sources[i].key``). It runs
when the config loads and again when the ``images`` stage starts (for configs built in code).
Importing this package imports no image or model library.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from corpus_audit.backends.image_sources.base import ImageSource, Record, Skip, SourceOptions, Unit
from corpus_audit.backends.image_sources.directory import DirSource
from corpus_audit.backends.image_sources.hf import HfSource
from corpus_audit.backends.image_sources.img2dataset import Img2datasetSource
from corpus_audit.backends.image_sources.parquet import ParquetSource
from corpus_audit.backends.image_sources.urls import UrlsSource
from corpus_audit.backends.image_sources.webdataset import WebDatasetSource
from corpus_audit.core.config import check_type
from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import Registry, has_members

__all__ = ["SOURCES", "ImageSource", "Record", "Skip", "SourceOptions", "Unit", "parse_source"]

SOURCES: Registry[ImageSource] = Registry(
    "image source",
    "corpus_audit.image_sources",
    expects=(
        "an image source (kind, options, prepare, units)",
        has_members(strings=("kind",), classes=("options",), methods=("prepare", "units")),
    ),
)
for _source in (
    DirSource(),
    WebDatasetSource(),
    Img2datasetSource(),
    ParquetSource(),
    HfSource(),
    UrlsSource(),
):
    SOURCES.register(_source.kind, _source)


def option_names(options: type[SourceOptions]) -> list[str]:
    """The keys a user may write in a source entry of these options."""
    return [f.name for f in dataclasses.fields(options) if f.metadata.get("user", True)]


def parse_source(index: int, entry: Any) -> SourceOptions:
    """The typed options of ``images.sources[index]``; :class:`ConfigError` naming the key."""
    key = f"images.sources[{index}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{key}: expected a table, got {type(entry).__name__}")
    kind = entry.get("kind")
    if kind not in SOURCES:
        raise ConfigError(f"{key}.kind: {kind!r} is not one of {sorted(SOURCES.names())}")
    cls = SOURCES.get(kind).options
    known = option_names(cls)
    for name in entry:
        if name not in known:
            raise ConfigError(
                f"{key}.{name}: unknown key for a {kind} source (known: {', '.join(known)})"
            )
    hints = typing.get_type_hints(cls)
    values = {name: check_type(f"{key}.{name}", v, hints[name]) for name, v in entry.items()}
    options = cls(**values, spec=dict(entry))
    options.validate(key)
    return options
