"""``kind = "hf"``: a Hugging Face dataset saved with ``save_to_disk`` that has an ``Image``
column (or ``image_column``). Options: ``split`` (a DatasetDict's split; default all),
``image_column``, ``url_column``, ``key_column``. Images are read undecoded (their bytes, or
the file an ``Image`` cell points to)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.backends.image_sources.base import (
    KEY_COLUMNS,
    URL_COLUMNS,
    ColumnOptions,
    PlainSource,
    Record,
    Skip,
    SourceContext,
    Unit,
    existing_target,
    ext_of,
    image_payload,
    pick,
    row_links,
)
from corpus_audit.core.errors import ImageSourceError

BATCH_ROWS = 256


@dataclass
class HfOptions(ColumnOptions):
    split: str = ""  # a split of a saved DatasetDict; "" = every split


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
    url_col = pick(columns, options.url_column, URL_COLUMNS)
    key_col = pick(columns, options.key_column, KEY_COLUMNS)
    id_col = "caption_id" if "caption_id" in columns else None
    chosen = [image_col, url_col, key_col, id_col]
    return ds.select_columns([c for c in chosen if c]), chosen


def iter_hf(path: Path, options: HfOptions) -> Iterator[Record | Skip]:
    """Rows of a dataset saved with ``datasets.save_to_disk`` that has an ``Image`` column."""
    for split_name, full in _splits(path, options):
        ds, (image_col, url_col, key_col, id_col) = _columns(path, full, options)
        prefix = f"{split_name}/" if split_name else ""
        row = 0
        for batch in ds.iter(batch_size=BATCH_ROWS):
            for i in range(len(batch[image_col])):
                blob, inner = image_payload(batch[image_col][i])
                origin = f"{path}#{prefix}row={row}"
                row += 1
                file = Path(inner) if blob is None and inner and Path(inner).is_file() else None
                if blob is None and file is None:
                    yield Skip(origin, "no_image_bytes", "")
                    continue
                links = row_links(batch, i, (url_col, key_col, id_col))
                yield Record(origin=origin, ext=ext_of(inner), data=blob, file=file, **links)


class HfSource(PlainSource):
    kind = "hf"
    options = HfOptions

    def units(self, ctx: SourceContext, options: HfOptions) -> list[Unit]:  # type: ignore[override]
        target = existing_target(ctx, options)
        return [Unit(target, lambda: iter_hf(target, options))]
