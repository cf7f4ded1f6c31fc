"""Stage ``images``: register the training images of the selected captions.

Each entry of ``images.sources`` (study.toml) is a table with a ``kind`` and its options:

===============  ==========================================================================
kind             what ``path`` is
===============  ==========================================================================
``dir``          a folder of image files named by key (``<key>.jpg``), searched recursively;
                 an img2dataset-style ``<key>.json`` beside a file is read for url/caption_id
``webdataset``   a ``.tar`` shard, a folder of shards or a glob (members ``<key>.jpg``,
                 ``<key>.txt``, ``<key>.json``)
``img2dataset``  an img2dataset output folder in any of its formats (webdataset ``.tar``,
                 ``parquet`` with image bytes, or ``files``); its ``*_stats.json`` are kept
``parquet``      a parquet file / folder / glob with image bytes (binary column or
                 ``{bytes, path}`` struct as Hugging Face writes)
``hf``           a Hugging Face dataset saved with ``save_to_disk`` with an ``Image`` column
``urls``         (no path) download the selected captions' URLs with img2dataset
===============  ==========================================================================

Linking a record to a caption (``link`` option, default ``auto``): a ``caption_id`` field in
the record (our own URL export writes it through img2dataset's ``save_additional_columns``);
else the record's ``url`` matched against ``captions.url``; else, for ``dir`` sources, the file
name as the caption_id. ``link = "row"`` with ``corpus_file = PATH`` reads the key as the row
number in that corpus file (img2dataset run directly on the corpus with its default 10,000
samples per shard numbers records so). Other options: ``image_column``, ``url_column``,
``key_column`` (parquet/hf), ``split`` (hf), and for ``urls``: ``image_size`` (512),
``resize_mode`` (keep_ratio), ``processes_count`` (2), ``thread_count`` (16), ``timeout`` (10),
``retries`` (0), ``output`` (``<study>/downloads/img2dataset``).

Only captions of the training subsets (``samples``; ``images.scope = "captions"``: every
selected caption) are registered, one image per caption: ``image_id = 'train:<caption_id>'``.
Image bytes from shards, parquet and datasets are written under ``<study>/images/train/`` by
names made from the caption_id, never from member names, so a tar member named
``../../x.jpg`` cannot write outside the study (such members are skipped and recorded in
``image_skips`` as ``unsafe_name``). Files of ``dir`` sources are referenced where they are.
Images are not decoded here; the ``label`` stage records undecodable ones as ``unreadable``.
"""

from __future__ import annotations

import fnmatch
import glob as globlib
import json
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from corpus_audit.errors import ImageSourceError, StageOrderError
from corpus_audit.stage_state import require_inputs
from corpus_audit.store import StageRun, Study

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff"}
MAX_MEMBER_BYTES = 128 * 1024 * 1024  # a single image larger than this is skipped (too_large)
INSERT_BATCH = 1000
IMAGE_COLUMNS = ("jpg", "jpeg", "png", "webp", "image", "image_bytes", "img", "bytes")
URL_COLUMNS = ("url", "URL", "image_url")
KEY_COLUMNS = ("key", "__key__")


@dataclass
class Record:
    """One image of a source: where its bytes are and what links it to a caption."""

    origin: str  # human-readable reference, e.g. 'shard.tar:000001.jpg'
    ext: str  # lower-case suffix with dot, e.g. '.jpg'
    data: bytes | None = None  # image bytes (shards, parquet, datasets)
    file: Path | None = None  # or an existing file (dir sources)
    key: str | None = None
    url: str | None = None
    caption_id: int | None = None


@dataclass
class Skip:
    """An item of a source that cannot be used, recorded in ``image_skips``."""

    item: str
    reason: str
    detail: str = ""


@dataclass
class SourceCounts:
    records: int = 0
    registered: int = 0
    already: int = 0
    unmatched: int = 0
    duplicate: int = 0
    skipped: int = 0


# -- helpers ---------------------------------------------------------------------------------
def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _expand(path: str, study: Study, patterns: tuple[str, ...]) -> list[Path]:
    """Files matching ``patterns`` for a file, folder (recursive) or glob ``path``."""
    target = study.config.resolve(path)
    if target.is_file():
        return [target]
    if target.is_dir():
        found = [
            p
            for p in sorted(target.rglob("*"))
            if p.is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns)
        ]
        return found
    matches = sorted(Path(p) for p in globlib.glob(str(target)) if Path(p).is_file())
    return matches


def safe_member_name(name: str) -> str | None:
    """The member name if it is a plain relative path, else None (absolute, ``..``, drive)."""
    if not name or "\x00" in name or "\\" in name:
        return None
    pure = PurePosixPath(name)
    if pure.is_absolute() or any(part == ".." for part in pure.parts):
        return None
    return name


def _split_member(name: str) -> tuple[str, str]:
    """webdataset convention: key = path up to the first dot of the basename; ext = the rest."""
    parent, _, base = name.rpartition("/")
    stem, dot, rest = base.partition(".")
    key = f"{parent}/{stem}" if parent else stem
    return key, (dot + rest).lower()


def _meta_fields(meta: dict[str, Any]) -> tuple[int | None, str | None, str | None]:
    caption_id = _as_int(meta.get("caption_id"))
    url = next((meta[c] for c in URL_COLUMNS if isinstance(meta.get(c), str)), None)
    key = meta.get("key") if isinstance(meta.get("key"), str) else None
    return caption_id, url, key


# -- source readers --------------------------------------------------------------------------
def iter_tar(path: Path) -> Iterator[Record | Skip]:
    """Records of one webdataset shard, read in stream mode; nothing is extracted to disk."""
    group_key: str | None = None
    group: dict[str, Any] = {}

    def flush() -> Iterator[Record | Skip]:
        if group_key is None:
            return
        images = [(ext, data, name) for ext, (data, name) in group.items() if ext in IMAGE_EXTS]
        meta: dict[str, Any] = {}
        if ".json" in group:
            try:
                loaded = json.loads(group[".json"][0].decode("utf-8"))
                meta = loaded if isinstance(loaded, dict) else {}
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                yield Skip(f"{path.name}:{group['.json'][1]}", "bad_metadata", str(exc)[:200])
        if not images:
            return
        ext, data, name = images[0]
        caption_id, url, key = _meta_fields(meta)
        yield Record(
            origin=f"{path}:{name}",
            ext=ext,
            data=data,
            key=key or group_key.rsplit("/", 1)[-1],
            url=url,
            caption_id=caption_id,
        )

    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                name = member.name
                if safe_member_name(name) is None:
                    yield Skip(f"{path}:{name}", "unsafe_name", "absolute or '..' member path")
                    continue
                if not member.isfile():
                    if not member.isdir():
                        yield Skip(
                            f"{path}:{name}", "not_a_file", f"tar member type {member.type!r}"
                        )
                    continue
                if member.size > MAX_MEMBER_BYTES:
                    yield Skip(f"{path}:{name}", "too_large", f"{member.size} bytes")
                    continue
                key, ext = _split_member(name)
                if key != group_key:
                    yield from flush()
                    group_key, group = key, {}
                if ext in IMAGE_EXTS or ext in {".json", ".txt"}:
                    fh = tar.extractfile(member)
                    group[ext] = (fh.read() if fh is not None else b"", name)
            yield from flush()
    except (tarfile.TarError, OSError, EOFError) as exc:
        yield Skip(str(path), "unreadable_shard", f"{type(exc).__name__}: {exc}"[:300])


def iter_dir(root: Path) -> Iterator[Record | Skip]:
    """Image files under ``root`` (recursive, sorted); ``<key>.json`` beside them is read."""
    for file in sorted(root.rglob("*")):
        if file.suffix.lower() not in IMAGE_EXTS:
            continue
        if not file.is_file():
            yield Skip(str(file), "not_a_file", "not a regular file")
            continue
        meta: dict[str, Any] = {}
        sidecar = file.with_suffix(".json")
        if sidecar.is_file():
            try:
                loaded = json.loads(sidecar.read_text(encoding="utf-8"))
                meta = loaded if isinstance(loaded, dict) else {}
            except (UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
                yield Skip(str(sidecar), "bad_metadata", str(exc)[:200])
        caption_id, url, key = _meta_fields(meta)
        yield Record(
            origin=str(file),
            ext=file.suffix.lower(),
            file=file,
            key=key or file.stem,
            url=url,
            caption_id=caption_id,
        )


def _pick(columns: list[str], wanted: str | None, candidates: tuple[str, ...]) -> str | None:
    if wanted:
        return wanted if wanted in columns else None
    return next((c for c in candidates if c in columns), None)


def _image_payload(value: Any) -> tuple[bytes | None, str | None]:
    """(bytes, path) from a binary cell or a ``{bytes, path}`` struct cell."""
    if value is None:
        return None, None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value), None
    if isinstance(value, dict):
        data = value.get("bytes")
        return (bytes(data) if data is not None else None), value.get("path")
    return None, None


def _ext_of(path: str | None) -> str:
    suffix = Path(path).suffix.lower() if path else ""
    return suffix if suffix in IMAGE_EXTS else ".jpg"


def iter_parquet(path: Path, spec: dict[str, Any]) -> Iterator[Record | Skip]:
    """Rows of a parquet file with an image bytes column (read in batches of 256 rows)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        yield Skip(str(path), "unreadable_shard", f"{type(exc).__name__}: {exc}"[:300])
        return
    columns = pf.schema_arrow.names
    image_col = _pick(columns, spec.get("image_column"), IMAGE_COLUMNS)
    if image_col is None:
        raise ImageSourceError(
            f"{path}: no image column (looked for {spec.get('image_column') or IMAGE_COLUMNS}; "
            f"columns: {', '.join(columns)}); set image_column in the source"
        )
    url_col = _pick(columns, spec.get("url_column"), URL_COLUMNS)
    key_col = _pick(columns, spec.get("key_column"), KEY_COLUMNS)
    id_col = "caption_id" if "caption_id" in columns else None
    wanted = [c for c in (image_col, url_col, key_col, id_col) if c]
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=256, columns=wanted):
            data = batch.to_pydict()
            for i in range(batch.num_rows):
                blob, inner = _image_payload(data[image_col][i])
                origin = f"{path}#row={row}"
                row += 1
                if blob is None:
                    yield Skip(origin, "no_image_bytes", "")
                    continue
                ext = f".{image_col.lower()}"
                yield Record(
                    origin=origin,
                    ext=_ext_of(inner) if inner else (ext if ext in IMAGE_EXTS else ".jpg"),
                    data=blob,
                    key=str(data[key_col][i]) if key_col and data[key_col][i] is not None else None,
                    url=data[url_col][i] if url_col else None,
                    caption_id=_as_int(data[id_col][i]) if id_col else None,
                )
    except Exception as exc:  # a corrupt row group after good ones
        yield Skip(f"{path}#row={row}", "unreadable_shard", f"{type(exc).__name__}: {exc}"[:300])


def iter_hf(path: Path, spec: dict[str, Any]) -> Iterator[Record | Skip]:
    """Rows of a dataset saved with ``datasets.save_to_disk`` that has an ``Image`` column."""
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
    if isinstance(loaded, datasets.DatasetDict):
        split = spec.get("split")
        if split:
            if split not in loaded:
                raise ImageSourceError(f"{path}: no split {split!r} (splits: {list(loaded)})")
            parts = [(split, loaded[split])]
        else:
            parts = list(loaded.items())
    else:
        parts = [("", loaded)]
    for split_name, ds in parts:
        columns = list(ds.column_names)
        image_col = spec.get("image_column") or next(
            (c for c, f in ds.features.items() if isinstance(f, datasets.Image)), None
        )
        if image_col is None or image_col not in columns:
            raise ImageSourceError(
                f"{path}: no Image column (columns: {', '.join(columns)}); set image_column"
            )
        ds = ds.cast_column(image_col, datasets.Image(decode=False))
        url_col = _pick(columns, spec.get("url_column"), URL_COLUMNS)
        key_col = _pick(columns, spec.get("key_column"), KEY_COLUMNS)
        id_col = "caption_id" if "caption_id" in columns else None
        keep = [c for c in (image_col, url_col, key_col, id_col) if c]
        ds = ds.select_columns(keep)
        row = 0
        for batch in ds.iter(batch_size=256):
            for i in range(len(batch[image_col])):
                blob, inner = _image_payload(batch[image_col][i])
                origin = f"{path}#{split_name + '/' if split_name else ''}row={row}"
                row += 1
                file = None
                if blob is None and inner and Path(inner).is_file():
                    file = Path(inner)
                if blob is None and file is None:
                    yield Skip(origin, "no_image_bytes", "")
                    continue
                key = batch[key_col][i] if key_col else None
                yield Record(
                    origin=origin,
                    ext=_ext_of(inner),
                    data=blob,
                    file=file,
                    key=str(key) if key is not None else None,
                    url=batch[url_col][i] if url_col else None,
                    caption_id=_as_int(batch[id_col][i]) if id_col else None,
                )


def read_stats(folder: Path) -> list[dict[str, Any]]:
    """img2dataset's ``*_stats.json`` files under ``folder`` as rows of ``download_stats``."""
    rows = []
    for file in sorted(folder.rglob("*_stats.json")):
        try:
            stats = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(stats, dict):
            continue
        rows.append(
            {
                "shard": str(file),
                "count": _as_int(stats.get("count")),
                "successes": _as_int(stats.get("successes")),
                "failed_to_download": _as_int(stats.get("failed_to_download")),
                "failed_to_resize": _as_int(stats.get("failed_to_resize")),
                "status_dict": json.dumps(stats.get("status_dict") or {}, sort_keys=True),
            }
        )
    return rows


# -- the URL download ------------------------------------------------------------------------
def export_url_list(study: Study, wanted: dict[int, tuple[str | None, str | None]]) -> Path:
    """Write ``<study>/downloads/urls.parquet`` (caption_id, url, caption) of the wanted
    captions that have a URL; returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ids = sorted(cid for cid, (url, _) in wanted.items() if url)
    texts = dict(
        study.con.execute(
            "SELECT caption_id, text FROM captions WHERE caption_id IN (SELECT unnest(?))", [ids]
        ).fetchall()
    )
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


def download_urls(study: Study, index: int, spec: dict[str, Any], url_list: Path) -> Path:
    """Run img2dataset on ``url_list`` (resumable: incremental mode) and return its output
    folder. Raises :class:`ImageSourceError` telling how to install it when it is missing."""
    try:
        import img2dataset
    except ImportError:
        raise ImageSourceError(
            f"images.sources[{index}] (kind = 'urls'): downloading needs img2dataset, which is "
            "not installed: `pip install 'corpus_audit[download]'` (or `pip install img2dataset`; "
            "then rerun `corpus-audit images`), or "
            f"download {url_list} yourself and add a source with kind = 'img2dataset'"
        ) from None
    output = (
        study.config.resolve(spec["output"])
        if spec.get("output")
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
        image_size=int(spec.get("image_size", 512)),
        resize_mode=str(spec.get("resize_mode", "keep_ratio")),
        processes_count=int(spec.get("processes_count", 2)),
        thread_count=int(spec.get("thread_count", 16)),
        timeout=int(spec.get("timeout", 10)),
        retries=int(spec.get("retries", 0)),
        number_sample_per_shard=int(spec.get("number_sample_per_shard", 10000)),
        incremental_mode="incremental",
        enable_wandb=False,
        distributor="multiprocessing",
    )
    return output


# -- the stage -------------------------------------------------------------------------------
def _wanted(study: Study, scope: str) -> dict[int, tuple[str | None, str | None]]:
    """caption_id -> (url, occupation when the caption is sampled for exactly one)."""
    if scope == "samples":
        rows = study.con.execute(
            """
            SELECT s.caption_id, any_value(c.url),
                   CASE WHEN count(DISTINCT s.occupation) = 1 THEN min(s.occupation) END
            FROM samples s JOIN captions c USING (caption_id)
            GROUP BY s.caption_id
            """
        ).fetchall()
    else:
        rows = study.con.execute(
            """
            SELECT c.caption_id, any_value(c.url),
                   CASE WHEN count(DISTINCT m.occupation) = 1 THEN min(m.occupation) END
            FROM captions c LEFT JOIN mentions m USING (caption_id)
            GROUP BY c.caption_id
            """
        ).fetchall()
    return {int(cid): (url, occ) for cid, url, occ in rows}


class _Linker:
    """Maps a record to the wanted caption ids it belongs to."""

    def __init__(self, study: Study, index: int, spec: dict[str, Any], wanted: dict) -> None:
        self.mode = spec.get("link", "auto")
        if self.mode not in {"auto", "caption_id", "url", "row"}:
            raise ImageSourceError(
                f"images.sources[{index}].link: {self.mode!r} is not auto, caption_id, url or row"
            )
        self.kind = spec["kind"]
        self.wanted = wanted
        self.by_url: dict[str, list[int]] = {}
        for cid, (url, _) in wanted.items():
            if url:
                self.by_url.setdefault(url, []).append(cid)
        self.by_row: dict[int, int] = {}
        if self.mode == "row":
            corpus_file = spec.get("corpus_file")
            if not corpus_file:
                raise ImageSourceError(
                    f"images.sources[{index}]: link = 'row' needs corpus_file (the corpus file "
                    "the keys number the rows of)"
                )
            target = study.config.resolve(corpus_file).resolve()
            rows = study.con.execute(
                "SELECT source_file, row_in_file, caption_id FROM captions"
            ).fetchall()
            exact = [(r, c) for f, r, c in rows if Path(f).resolve() == target]
            if not exact:
                exact = [(r, c) for f, r, c in rows if Path(f).name == target.name]
            if not exact:
                raise ImageSourceError(
                    f"images.sources[{index}].corpus_file: {target}: no selected captions come "
                    "from this file"
                )
            self.by_row = {int(r): int(c) for r, c in exact}

    def link(self, rec: Record) -> list[int]:
        mode = self.mode
        if mode in ("auto", "caption_id") and rec.caption_id is not None:
            return [rec.caption_id] if rec.caption_id in self.wanted else []
        if mode in ("auto", "url") and rec.url:
            return self.by_url.get(rec.url, [])
        if mode == "caption_id" or (mode == "auto" and self.kind == "dir"):
            cid = _as_int(rec.key)
            return [cid] if cid is not None and cid in self.wanted else []
        if mode == "row":
            row = _as_int(rec.key)
            cid = self.by_row.get(row) if row is not None else None
            return [cid] if cid is not None and cid in self.wanted else []
        return []


def _shards(study: Study, spec: dict[str, Any]) -> list[tuple[str, Path]]:
    """(reader kind, path) units of one source; ``dir`` is one unit (rescanned each run)."""
    kind = spec["kind"]
    target = study.config.resolve(spec["path"])
    if kind in ("webdataset", "parquet"):
        pattern = ("*.tar", "*.tar.gz", "*.tgz") if kind == "webdataset" else ("*.parquet",)
        found = _expand(spec["path"], study, pattern)
        if not found:
            raise ImageSourceError(f"{target}: no {kind} files here ({', '.join(pattern)})")
        return [(kind, p) for p in found]
    if not target.exists():
        raise ImageSourceError(f"{target}: no such {kind} source (file or folder)")
    if kind == "dir":
        if not target.is_dir():
            raise ImageSourceError(f"{target}: a dir source must be a folder")
        return [("dir", target)]
    if kind == "hf":
        return [("hf", target)]
    # img2dataset output: whichever format it holds
    tars = _expand(str(target), study, ("*.tar",))
    if tars:
        return [("webdataset", p) for p in tars]
    parquets = [
        p
        for p in _expand(str(target), study, ("*.parquet",))
        if not p.name.endswith("_stats.parquet")
    ]
    parquets_with_images = []
    for p in parquets:
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(p).names
        except Exception:
            names = []
        if any(c in names for c in IMAGE_COLUMNS) or spec.get("image_column") in names:
            parquets_with_images.append(p)
    if parquets_with_images:
        return [("parquet", p) for p in parquets_with_images]
    return [("dir", target)]


def _records(reader: str, path: Path, spec: dict[str, Any]) -> Iterator[Record | Skip]:
    if reader == "webdataset":
        return iter_tar(path)
    if reader == "parquet":
        return iter_parquet(path, spec)
    if reader == "hf":
        return iter_hf(path, spec)
    return iter_dir(path)


def _image_path(study: Study, caption_id: int, ext: str) -> Path:
    """Where bytes of caption ``caption_id`` are written: inside the study, by id only."""
    ext = ext if ext in IMAGE_EXTS else ".img"
    path = study.path("images", "train", f"{caption_id % 1000:03d}", f"{caption_id}{ext}")
    if not study.inside(path):  # cannot happen with an int id; kept as the invariant
        raise ImageSourceError(f"{path}: refusing to write outside the study directory")
    return path


def _store_path(study: Study, path: Path) -> str:
    """Relative to the study dir when inside it, else absolute."""
    resolved = path.resolve()
    try:
        return resolved.relative_to(study.root.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _flush(study: Study, rows: list[tuple], skips: list[tuple], shard_row: tuple | None) -> None:
    if not rows and not skips and shard_row is None:
        return
    with study.transaction() as con:
        if rows:
            con.executemany(
                "INSERT INTO images (image_id, source, caption_id, occupation, path, origin) "
                "VALUES (?, 'training', ?, ?, ?, ?)",
                rows,
            )
        if skips:
            con.executemany("INSERT INTO image_skips VALUES (?, ?, ?, ?)", skips)
        if shard_row is not None:
            con.execute(
                "INSERT INTO image_shards VALUES (?, ?, ?, ?, CAST(current_timestamp AS TIMESTAMP))",
                list(shard_row),
            )


def images(study: Study, *, progress: bool = True) -> StageRun:
    """Register training images from ``images.sources``, linked to the wanted captions.

    Resumable: finished shards are listed in ``image_shards`` and skipped; images already
    registered are skipped; a killed run loses at most the last ``INSERT_BATCH`` records.
    """
    from tqdm.auto import tqdm

    cfg = study.config.images
    with study.stage("images") as run:
        if not cfg.sources:
            run.skipped = True
            run.messages.append(
                "no image sources configured (images.sources in study.toml): training images "
                "are not registered"
            )
            return run
        require_inputs(study, "images")
        if study.count("captions") == 0:
            raise StageOrderError(
                "images: no selected captions yet; run `corpus-audit select DIR` first"
            )
        wanted = _wanted(study, cfg.scope)
        if not wanted:
            raise StageOrderError(
                "images: the training subsets (samples) are empty; run select first, or set "
                "images.scope = 'captions'"
            )
        registered = {
            int(r[0])
            for r in study.con.execute(
                "SELECT caption_id FROM images WHERE source = 'training' AND caption_id IS NOT NULL"
            ).fetchall()
        }
        done_shards = {
            (s, p)
            for s, p in study.con.execute("SELECT source, shard FROM image_shards").fetchall()
        }
        run.rows_in = 0
        bar = tqdm(desc="images", unit="img", disable=not progress, leave=False)
        sources_meta = []
        try:
            for index, spec in enumerate(cfg.sources):
                spec = dict(spec)
                source_name = f"sources[{index}]:{spec['kind']}"
                counts = SourceCounts()
                if spec["kind"] == "urls":
                    url_list = export_url_list(study, wanted)
                    output = download_urls(study, index, spec, url_list)
                    spec = {**spec, "kind": "img2dataset", "path": str(output)}
                    spec.setdefault("link", "caption_id")
                linker = _Linker(study, index, spec, wanted)
                for reader, shard in _shards(study, spec):
                    if (source_name, str(shard)) in done_shards:
                        continue
                    shard_counts = SourceCounts()
                    rows: list[tuple] = []
                    skips: list[tuple] = []
                    failed = False
                    for item in _records(reader, shard, spec):
                        if isinstance(item, Skip):
                            skips.append((source_name, item.item, item.reason, item.detail))
                            shard_counts.skipped += 1
                            run.drop(item.reason)
                            failed = failed or item.reason == "unreadable_shard"
                            continue
                        shard_counts.records += 1
                        bar.update(1)
                        ids = linker.link(item)
                        if not ids:
                            shard_counts.unmatched += 1
                            continue
                        stored: str | None = None
                        for cid in ids:
                            if cid in registered:
                                shard_counts.already += 1
                                continue
                            if stored is None:
                                if item.data is not None:
                                    target = _image_path(study, cid, item.ext)
                                    _write_atomic(target, item.data)
                                    stored = _store_path(study, target)
                                else:
                                    assert item.file is not None
                                    stored = _store_path(study, item.file)
                            rows.append((f"train:{cid}", cid, wanted[cid][1], stored, item.origin))
                            registered.add(cid)
                            shard_counts.registered += 1
                        if len(rows) + len(skips) >= INSERT_BATCH:
                            _flush(study, rows, skips, None)
                            rows, skips = [], []
                    mark = None
                    if reader != "dir" and not failed:
                        mark = (
                            source_name,
                            str(shard),
                            shard_counts.records,
                            shard_counts.registered,
                        )
                    _flush(study, rows, skips, mark)
                    for name in ("records", "registered", "already", "unmatched", "skipped"):
                        setattr(counts, name, getattr(counts, name) + getattr(shard_counts, name))
                if spec["kind"] == "img2dataset":
                    stats = read_stats(study.config.resolve(spec["path"]))
                    if stats:
                        with study.transaction() as con:
                            con.execute(
                                "DELETE FROM download_stats WHERE source = ?", [source_name]
                            )
                            con.executemany(
                                "INSERT INTO download_stats VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [
                                    (
                                        source_name,
                                        s["shard"],
                                        s["count"],
                                        s["successes"],
                                        s["failed_to_download"],
                                        s["failed_to_resize"],
                                        s["status_dict"],
                                    )
                                    for s in stats
                                ],
                            )
                        total = sum(s["count"] or 0 for s in stats)
                        ok = sum(s["successes"] or 0 for s in stats)
                        run.messages.append(
                            f"{source_name}: img2dataset downloaded {ok} of {total} "
                            f"({total - ok} failed; see table download_stats)"
                        )
                run.rows_in += counts.records
                run.rows_out += counts.registered
                run.drop("no_matching_caption", counts.unmatched)
                run.summary.append(
                    {
                        "source": source_name,
                        "path": spec.get("path", ""),
                        "records": counts.records,
                        "registered": counts.registered,
                        "already": counts.already,
                        "unmatched": counts.unmatched,
                        "skipped": counts.skipped,
                    }
                )
                sources_meta.append({k: v for k, v in spec.items()})
        finally:
            bar.close()
        missing = len(wanted) - len(registered & set(wanted))
        run.messages.append(
            f"{len(registered & set(wanted))} of {len(wanted)} wanted captions have an image "
            f"({missing} without)"
        )
        run.provenance.update({"sources": sources_meta, "scope": cfg.scope})
        if run.rows_out == 0:
            run.skipped = True
    return run
