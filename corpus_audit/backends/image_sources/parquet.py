"""``kind = "parquet"``: a parquet file / folder / glob with image bytes, in a binary column
or a ``{bytes, path}`` struct column as Hugging Face writes. Options: ``image_column``,
``url_column``, ``key_column`` (default: the first present of the usual names); a
``caption_id`` column links rows directly. Read in batches of 256 rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from corpus_audit.backends import storage
from corpus_audit.backends.image_sources.base import (
    IMAGE_COLUMNS,
    IMAGE_EXTS,
    ColumnOptions,
    PlainSource,
    Record,
    Skip,
    SourceContext,
    Unit,
    batch_rows,
    link_columns,
    matching_files,
    pick,
    short_error,
)
from corpus_audit.core.errors import ImageSourceError

BATCH_ROWS = 256


def parquet_file(path: Path | str) -> Any:
    """A ``pq.ParquetFile`` of a local path or of a store's URL (range requests)."""
    import pyarrow.parquet as pq

    if isinstance(path, str):
        return pq.ParquetFile(storage.open_input(path), pre_buffer=True)
    return pq.ParquetFile(path)


def iter_parquet(
    path: Path | str, options: ColumnOptions, pf: Any = None
) -> Iterator[Record | Skip]:
    """Rows of a parquet file with an image bytes column (read in batches of 256 rows);
    ``pf``: the file already opened (:func:`parquet_file`), else it is opened here."""
    if pf is None:
        try:
            pf = parquet_file(path)
        except Exception as exc:
            yield Skip(str(path), "unreadable_shard", short_error(exc))
            return
    columns = pf.schema_arrow.names
    image_col = pick(columns, options.image_column, IMAGE_COLUMNS)
    if image_col is None:
        raise ImageSourceError(
            f"{path}: no image column (looked for {options.image_column or IMAGE_COLUMNS}; "
            f"columns: {', '.join(columns)}); set image_column in the source"
        )
    url_col, key_col, id_col = link_columns(columns, options)
    wanted = [c for c in (image_col, url_col, key_col, id_col) if c]
    default_ext = f".{image_col.lower()}" if f".{image_col.lower()}" in IMAGE_EXTS else ".jpg"
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
            data = batch.to_pydict()
            links = (url_col, key_col, id_col)
            yield from batch_rows(data, image_col, links, f"{path}#", row, default_ext=default_ext)
            row += batch.num_rows
    except Exception as exc:  # a corrupt row group after good ones
        yield Skip(f"{path}#row={row}", "unreadable_shard", short_error(exc))


def has_image_column(path: Path | str, options: ColumnOptions) -> bool:
    """Whether a parquet file has an image column (img2dataset's parquet output does; its
    ``*_stats.parquet``-like side files do not). An unreadable schema counts as no."""
    try:
        names = parquet_file(path).schema_arrow.names
    except Exception:
        names = []
    return any(c in names for c in IMAGE_COLUMNS) or options.image_column in names


def file_unit(path: Path | str, options: ColumnOptions) -> Unit:
    return Unit(path, lambda: iter_parquet(path, options))


class ParquetSource(PlainSource):
    kind = "parquet"
    options = ColumnOptions

    def units(self, ctx: SourceContext, options: ColumnOptions) -> list[Unit]:  # type: ignore[override]
        return [file_unit(p, options) for p in matching_files(ctx, options, ("*.parquet",))]
