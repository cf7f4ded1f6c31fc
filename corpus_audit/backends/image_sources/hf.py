"""``kind = "hf"``: a Hugging Face dataset with an ``Image`` column (or ``image_column``).

``path`` is one of:

- a Hub dataset by name, ``hf://datasets/<org>/<name>[@<revision>]``: its parquet files
  (Image cells are ``{bytes, path}`` structs there), or those of the Hub's parquet export
  (``refs/convert/parquet``) for a dataset stored in another format; with ``HF_HUB_OFFLINE``
  set they are read from the local Hub cache (:mod:`corpus_audit.backends.hub`, the resolver
  the corpus uses too). ``config`` and ``split`` choose among them; each file is one unit.
- a folder saved with ``save_to_disk``: a local path (read with ``datasets``), or a store's
  URL (``s3://bucket/ds``), whose arrow files are streamed by range requests.

Options: ``split`` (default: every split), ``config`` (Hub datasets; default: all),
``image_column`` (default: the first ``Image``-typed column of the features, else one named
``image``), ``url_column``, ``key_column``. Images are read undecoded (their bytes, or the
local file an ``Image`` cell points to)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.backends import hub, storage
from corpus_audit.backends.image_sources.base import (
    IMAGE_COLUMNS,
    ColumnOptions,
    PlainSource,
    Record,
    Skip,
    SourceContext,
    Unit,
    batch_rows,
    existing_target,
    link_columns,
    pick,
    short_error,
)
from corpus_audit.backends.image_sources.parquet import iter_parquet, parquet_file
from corpus_audit.core.errors import CorpusAuditError, ImageSourceError
from corpus_audit.core.urls import scheme

BATCH_ROWS = 256


@dataclass
class HfOptions(ColumnOptions):
    split: str = ""  # a split (of a saved DatasetDict, of a Hub dataset); "" = every split
    config: str = ""  # a Hub dataset's config (hf:// paths); "" = every config


def image_feature(features: dict[str, Any], names: list[str], wanted: str) -> str | None:
    """The image column: ``wanted`` if set (and present), else the first column whose
    ``datasets`` feature is an ``Image``, else ``image`` / the usual names; None if none."""
    if wanted:
        return wanted if wanted in names else None
    for name, feature in features.items():
        if isinstance(feature, dict) and feature.get("_type") == "Image" and name in names:
            return name
    return "image" if "image" in names else pick(names, None, IMAGE_COLUMNS)


def _hf_features(schema: Any) -> dict[str, Any]:
    """The ``datasets`` features written into a parquet / arrow schema's metadata."""
    raw = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(raw)["info"]["features"] if raw else {}
    except (ValueError, KeyError, TypeError):
        return {}
    return features if isinstance(features, dict) else {}


def iter_hub_file(path: Path | str, options: HfOptions) -> Iterator[Record | Skip]:
    """Rows of one parquet file of a Hub dataset, its image column found by feature type."""
    try:
        pf = parquet_file(path)
    except Exception as exc:
        yield Skip(str(path), "unreadable_shard", short_error(exc))
        return
    schema = pf.schema_arrow
    column = image_feature(_hf_features(schema), schema.names, options.image_column)
    if column is None:
        raise ImageSourceError(
            f"{path}: no Image column (columns: {', '.join(schema.names)}); set image_column"
        )
    yield from iter_parquet(path, dataclasses.replace(options, image_column=column), pf)


def hub_units(url: str, options: HfOptions) -> list[Unit]:
    """One unit per parquet file of the Hub dataset ``url`` (of ``config`` / ``split``)."""
    try:
        files = hub.data_files(url, split=options.split, config=options.config)
    except CorpusAuditError as exc:
        raise ImageSourceError(str(exc)) from None
    located = [f if scheme(f) else Path(f) for f in files]  # hf:// online, cached offline
    return [Unit(f, lambda f=f: iter_hub_file(f, options)) for f in located]


# -- a save_to_disk folder on a store ------------------------------------------------------------
def _read_json(url: str) -> Any:
    """A small JSON object on a store; None when there is no such object."""
    if storage.size_or_none(url) is None:
        return None
    with storage.open_input(url) as fh:
        return json.loads(fh.read().decode("utf-8"))


def _child(url: str, name: str) -> str:
    """``url/name``, carrying ``url``'s store options."""
    return storage.bind(f"{str(url).rstrip('/')}/{name}", getattr(url, "options", None))


def saved_splits(url: str, options: HfOptions) -> list[tuple[str, str]]:
    """``(split name, folder URL)`` of a ``save_to_disk`` folder on a store."""
    try:
        dd = _read_json(_child(url, "dataset_dict.json"))
        if dd is None:
            if _read_json(_child(url, "state.json")) is None:
                raise ImageSourceError(f"{url}: not a dataset saved with save_to_disk")
            return [("", url)]
    except CorpusAuditError as exc:
        raise ImageSourceError(str(exc)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImageSourceError(f"{url}: unreadable dataset_dict.json ({exc})") from None
    splits = list(dd.get("splits", [])) if isinstance(dd, dict) else []
    if options.split and options.split not in splits:
        raise ImageSourceError(f"{url}: no split {options.split!r} (splits: {splits})")
    return [(s, _child(url, s)) for s in splits if not options.split or s == options.split]


def iter_saved_remote(folder: str, split: str, options: HfOptions) -> Iterator[Record | Skip]:
    """Rows of one split of a ``save_to_disk`` folder on a store: its arrow stream files
    (``state.json``), streamed; the image column from ``dataset_info.json``'s features."""
    import pyarrow as pa

    try:
        state = _read_json(_child(folder, "state.json")) or {}
        info = _read_json(_child(folder, "dataset_info.json")) or {}
        files = [_child(folder, d["filename"]) for d in state["_data_files"]]
    except (CorpusAuditError, ValueError, KeyError, TypeError) as exc:
        yield Skip(str(folder), "unreadable_shard", short_error(exc))
        return
    features = info.get("features", {}) if isinstance(info, dict) else {}
    prefix = f"{split}/" if split else ""
    row = 0
    for file in files:
        try:
            reader = pa.ipc.open_stream(storage.open_input(file, stream=True))
            names = reader.schema.names
            image_col = image_feature(features, names, options.image_column)
            if image_col is None:
                raise ImageSourceError(
                    f"{folder}: no Image column (columns: {', '.join(names)}); set image_column"
                )
            cols = link_columns(names, options)
            for batch in reader:
                yield from batch_rows(batch.to_pydict(), image_col, cols, f"{folder}#{prefix}", row)
                row += batch.num_rows
        except ImageSourceError:
            raise
        except (CorpusAuditError, pa.ArrowException, OSError) as exc:
            yield Skip(f"{file}#row={row}", "unreadable_shard", short_error(exc))
            return


def _splits(path: Path, options: HfOptions) -> list[tuple[str, Any]]:
    """(split name, Dataset) pairs to read; ImageSourceError for what cannot be read."""
    try:
        import datasets
    except ImportError:
        raise ImageSourceError(
            f"{path}: reading a Hugging Face dataset needs the datasets package: "
            "pip install datasets"
        ) from None
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise ImageSourceError(f"{path}: not a dataset saved with save_to_disk: {exc}") from None
    if not isinstance(loaded, datasets.DatasetDict):
        return [("", loaded)]
    if not options.split:
        return list(loaded.items())
    if options.split not in loaded:
        raise ImageSourceError(f"{path}: no split {options.split!r} (splits: {list(loaded)})")
    return [(options.split, loaded[options.split])]


def _columns(path: Path, ds: Any, options: HfOptions) -> tuple[Any, list[str | None]]:
    """The dataset with undecoded images and only the columns read: image, url, key, id."""
    import datasets

    columns = list(ds.column_names)
    image_col = options.image_column or next(
        (c for c, f in ds.features.items() if isinstance(f, datasets.Image)), None
    )
    if image_col is None or image_col not in columns:
        raise ImageSourceError(
            f"{path}: no Image column (columns: {', '.join(columns)}); set image_column"
        )
    ds = ds.cast_column(image_col, datasets.Image(decode=False))
    chosen = [image_col, *link_columns(columns, options)]
    return ds.select_columns([c for c in chosen if c]), chosen


def iter_hf(path: Path, options: HfOptions) -> Iterator[Record | Skip]:
    """Rows of a dataset saved with ``datasets.save_to_disk`` that has an ``Image`` column."""
    for split_name, full in _splits(path, options):
        ds, (image_col, url_col, key_col, id_col) = _columns(path, full, options)
        prefix = f"{split_name}/" if split_name else ""
        row = 0
        for batch in ds.iter(batch_size=BATCH_ROWS):
            cols = (url_col, key_col, id_col)
            yield from batch_rows(batch, image_col, cols, f"{path}#{prefix}", row, local_files=True)
            row += len(batch[image_col])


class HfSource(PlainSource):
    kind = "hf"
    options = HfOptions

    def units(self, ctx: SourceContext, options: HfOptions) -> list[Unit]:  # type: ignore[override]
        target = existing_target(ctx, options)
        if isinstance(target, str) and scheme(target) == "hf":
            return hub_units(target, options)
        if isinstance(target, str):  # a save_to_disk folder on a store: one unit per split
            return [
                Unit(
                    _child(url, "state.json"),
                    lambda u=url, s=split: iter_saved_remote(u, s, options),
                )
                for split, url in saved_splits(target, options)
            ]
        return [Unit(target, lambda: iter_hf(target, options))]
