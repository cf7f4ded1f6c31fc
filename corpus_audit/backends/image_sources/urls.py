"""``kind = "urls"`` (no path): download the wanted captions' URLs with img2dataset, then read
its output as an ``img2dataset`` source linked by ``caption_id``.

The wanted captions that have a URL are written to ``<study>/downloads/urls.parquet``
(caption_id, url, caption) and handed to ``img2dataset.download`` with
``save_additional_columns=["caption_id"]`` in incremental mode (a rerun resumes). Options:
``image_size`` (512 px), ``resize_mode`` (keep_ratio), ``processes_count`` (2),
``thread_count`` (16), ``timeout`` (10 s), ``retries`` (0), ``number_sample_per_shard``
(10000), ``output`` (``<study>/downloads/img2dataset``, or a store's URL such as
``s3://bucket/downloads/``: img2dataset writes there through fsspec with the store's own
environment (``AWS_ENDPOINT_URL`` for a non-AWS endpoint), and the shards are then read back
from the store with the study's ``[storage]`` options).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.backends.image_sources.base import (
    LINK_MODES,
    ColumnOptions,
    SourceContext,
    SourceOptions,
)
from corpus_audit.core.errors import ConfigError, ImageSourceError
from corpus_audit.core.urls import is_url


@dataclass
class UrlOptions(SourceOptions):
    link: str = "caption_id"  # the export writes caption_id into every record
    image_size: int = 512  # px, img2dataset's image_size
    resize_mode: str = "keep_ratio"
    processes_count: int = 2
    thread_count: int = 16
    timeout: int = 10  # seconds per download
    retries: int = 0
    number_sample_per_shard: int = 10000
    output: str = ""  # img2dataset's output folder or a store's URL; "" = <study>/downloads/...

    def validate(self, key: str) -> None:
        if self.link not in LINK_MODES:
            raise ConfigError(f"{key}.link: {self.link!r} is not auto, caption_id, url or row")
        for name in ("image_size", "processes_count", "thread_count", "timeout"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{key}.{name}: {getattr(self, name)} must be >= 1")


def export_url_list(study: Any, wanted: dict[int, tuple[str | None, str | None]]) -> Path:
    """Write ``<study>/downloads/urls.parquet`` (caption_id, url, caption) of the wanted
    captions that have a URL; returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = sorted(cid for cid, (url, _) in wanted.items() if url)
    texts = dict(study.sql("images/caption_texts", ids=ids).fetchall())
    table = pa.table(
        {
            "caption_id": pa.array(ids, pa.int64()),
            "url": [wanted[i][0] for i in ids],
            "caption": [texts.get(i, "") for i in ids],
        }
    )
    path = study.path("downloads", "urls.parquet")
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path


def download_urls(study: Any, index: int, options: UrlOptions, url_list: Path) -> Path | str:
    """Run img2dataset on ``url_list`` (resumable: incremental mode) and return its output
    folder (a store's URL as written). Raises :class:`ImageSourceError` telling how to
    install it when it is missing."""
    try:
        import img2dataset
    except ImportError:
        raise ImageSourceError(
            f"images.sources[{index}] (kind = 'urls'): downloading needs img2dataset, which is "
            "not installed: `pip install 'corpus_audit[download]'` (or `pip install img2dataset`; "
            "then rerun `corpus-audit images`), or "
            f"download {url_list} yourself and add a source with kind = 'img2dataset'"
        ) from None
    output: Path | str
    if is_url(options.output):
        output = options.output
    else:
        output = (
            study.config.resolve(options.output)
            if options.output
            else study.path("downloads", "img2dataset", "x").parent
        )
        output.mkdir(parents=True, exist_ok=True)
    img2dataset.download(
        url_list=str(url_list),
        input_format="parquet",
        url_col="url",
        caption_col="caption",
        save_additional_columns=["caption_id"],
        output_format="webdataset",
        output_folder=str(output),
        image_size=options.image_size,
        resize_mode=options.resize_mode,
        processes_count=options.processes_count,
        thread_count=options.thread_count,
        timeout=options.timeout,
        retries=options.retries,
        number_sample_per_shard=options.number_sample_per_shard,
        incremental_mode="incremental",
        enable_wandb=False,
        distributor="multiprocessing",
    )
    return output


class UrlsSource:
    kind = "urls"
    options = UrlOptions

    def prepare(self, ctx: SourceContext, options: UrlOptions) -> ColumnOptions:  # type: ignore[override]
        """Download, then the options of an ``img2dataset`` source over the output."""
        url_list = export_url_list(ctx.study, ctx.wanted)
        output = download_urls(ctx.study, ctx.index, options, url_list)
        spec = {**options.spec, "kind": "img2dataset", "path": str(output)}
        spec.setdefault("link", "caption_id")
        return ColumnOptions(
            kind="img2dataset",
            path=str(output),
            link=options.link,
            corpus_file=options.corpus_file,
            spec=spec,
        )

    def units(self, ctx: SourceContext, options: SourceOptions) -> list:
        raise AssertionError("a urls source is read as img2dataset after prepare()")

    def download_stats(self, ctx: SourceContext, options: SourceOptions) -> list[dict[str, Any]]:
        return []
