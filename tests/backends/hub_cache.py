"""A Hugging Face Hub cache built offline, in huggingface_hub's own layout, for the tests:

    <cache>/datasets--<org>--<name>/blobs/<sha256 of the content>
    <cache>/datasets--<org>--<name>/snapshots/<commit>/<path>   -> ../../blobs/<sha256>
    <cache>/datasets--<org>--<name>/refs/<revision>              (holds <commit>)

``refs/convert/parquet`` (the Hub's parquet export) is the file ``refs/refs/convert/parquet``,
as huggingface_hub writes a revision's name under ``refs/``. Nothing here talks to the Hub:
huggingface_hub itself resolves these folders with ``local_files_only``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def add_snapshot(
    cache: Path, repo_id: str, files: dict[str, bytes], revision: str = "main"
) -> Path:
    """Cache ``files`` (path in the repository -> content) as the snapshot of ``repo_id``'s
    ``revision``; returns the snapshot folder."""
    repo = cache / f"datasets--{repo_id.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        digest = hashlib.sha256(data).hexdigest()
        blob = repo / "blobs" / digest
        blob.write_bytes(data)
        link = snapshot / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    ref = repo / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)
    return snapshot


def drop_blob(snapshot: Path, rel: str) -> None:
    """Delete the blob a snapshot file links to (an interrupted or pruned download)."""
    link = snapshot / rel
    (link.parent / os.readlink(link)).unlink()


def image_parquet(rows: dict[str, list], image_column: str) -> bytes:
    """A parquet file as ``datasets`` writes it: ``image_column`` an ``Image`` feature
    (cells ``{bytes, path}``, the features in the schema's metadata). ``rows[image_column]``
    holds image file paths; their bytes are embedded unchanged (the cell's path is the file's
    name, as the Hub's parquet files hold)."""
    import io

    import datasets

    cells = [{"bytes": Path(p).read_bytes(), "path": Path(p).name} for p in rows[image_column]]
    features = datasets.Features(
        {
            **{k: datasets.Value("int64") for k in rows if k != image_column},
            image_column: datasets.Image(),
        }
    )
    ds = datasets.Dataset.from_dict({**rows, image_column: cells}, features=features)
    buf = io.BytesIO()
    ds.to_parquet(buf)
    return buf.getvalue()
