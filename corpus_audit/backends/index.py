"""FAISS inner-product indexes over unit vectors: build, save, load memory-mapped, search.

Vectors are L2-normalised float32, so the inner product is the cosine similarity, in [-1, 1].

- ``flat`` (default): ``IndexFlatIP``, exact; results equal a brute-force computation.
  FAISS skips BLAS for query batches below ``distance_compute_blas_threshold`` (default
  128000, i.e. always for a few hundred prompts) and then runs ~10x slower; :func:`_faiss`
  sets it to 20 (ENGINEERING_NOTES: 17.9 s -> 1.5 s for 248 x top-500 over 1 M).
- ``ivf``: ``IndexIVFFlat`` (``nlist`` lists, ``nprobe`` probed); approximate, reported with
  its recall@k against exact search. Falls back to flat when there are too few vectors to
  train ``nlist`` centroids (fewer than 39 per list).
- ``hnsw``: ``IndexHNSWFlat`` (M = ``hnsw_m``), ``efSearch`` = max(ef_search, 2k); a poor fit for
  large k (recall 0.91 at top-500 in the notes), offered for completeness.

With a CUDA GPU: faiss-gpu when installed (the index is moved to the GPUs), else exact search
runs in torch on the GPU (:func:`torch_exact_search`). Results come back on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus_audit.core.fileio import atomic_path

INDEX_KINDS = ("flat", "ivf", "hnsw")
BLAS_THRESHOLD = 20
MIN_POINTS_PER_LIST = 39  # FAISS warns below this many training points per centroid


def _faiss() -> Any:
    """Import faiss and set the BLAS threshold (see the module docstring)."""
    import faiss

    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD
    return faiss


@dataclass
class IndexSpec:
    """How to index: ``kind`` in :data:`INDEX_KINDS` and its parameters."""

    kind: str = "flat"
    nlist: int = 1024
    nprobe: int = 16
    hnsw_m: int = 32
    ef_search: int = 0  # 0 -> 2 * k at search time
    seed: int = 0  # IVF k-means seed


@dataclass
class SearchResult:
    """Top-k per query: ``scores`` (cosine, descending) and ``ids`` (row numbers), ``(q, k)``."""

    scores: np.ndarray
    ids: np.ndarray
    kind: str  # the index kind that answered (flat when an approximate one fell back)


def effective_kind(spec: IndexSpec, n: int) -> str:
    """The kind actually built for ``n`` vectors (ivf needs enough points to train)."""
    if spec.kind == "ivf" and n < max(1, spec.nlist) * MIN_POINTS_PER_LIST:
        nlist = n // MIN_POINTS_PER_LIST
        return "ivf" if nlist >= 2 else "flat"
    return spec.kind


def build_index(x: np.ndarray, spec: IndexSpec | None = None) -> Any:
    """A CPU FAISS index over the rows of ``x`` (``(n, d)`` float32, unit rows)."""
    faiss = _faiss()
    spec = spec or IndexSpec()
    x = np.ascontiguousarray(x, dtype=np.float32)
    n, d = x.shape
    kind = effective_kind(spec, n)
    if kind == "flat":
        index = faiss.IndexFlatIP(d)
    elif kind == "ivf":
        nlist = min(spec.nlist, n // MIN_POINTS_PER_LIST)
        quantizer = faiss.IndexFlatIP(d)
        index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(spec.seed)
        train = x if n <= nlist * 256 else x[np.sort(rng.choice(n, nlist * 256, replace=False))]
        index.cp.seed = spec.seed
        index.train(train)
        index.nprobe = min(spec.nprobe, nlist)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(d, spec.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    else:
        raise ValueError(f"unknown index kind {kind!r} (one of {', '.join(INDEX_KINDS)})")
    if n:
        index.add(x)
    return index


def index_kind(index: Any) -> str:
    """``flat``, ``ivf`` or ``hnsw`` for an index built here (or loaded)."""
    faiss = _faiss()
    base = faiss.downcast_index(index)
    if isinstance(base, faiss.IndexIVF):
        return "ivf"
    if isinstance(base, faiss.IndexHNSW):
        return "hnsw"
    return "flat"


def save_index(index: Any, path: Path | str) -> Path:
    """Write ``index`` to ``path`` atomically (temp file + rename)."""
    faiss = _faiss()
    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))
    return Path(path)


def load_index(path: Path | str, *, mmap: bool = True) -> Any:
    """Read an index written by :func:`save_index`, memory-mapped (read-only) by default."""
    faiss = _faiss()
    flags = (faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY) if mmap else 0
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such index file")
    return faiss.read_index(str(path), flags)


def search(
    index: Any,
    queries: np.ndarray,
    k: int,
    *,
    spec: IndexSpec | None = None,
    gpu: bool | None = None,
) -> SearchResult:
    """Top-``k`` rows by inner product for each query; ``k`` is capped at ``index.ntotal``.

    ``gpu=None`` uses faiss-gpu when it sees a GPU (CPU otherwise); results are identical in
    kind (exact stays exact).
    """
    faiss = _faiss()
    spec = spec or IndexSpec()
    q = np.ascontiguousarray(queries, dtype=np.float32)
    k = min(int(k), int(index.ntotal))
    kind = index_kind(index)
    if k <= 0 or len(q) == 0:
        return SearchResult(
            np.empty((len(q), 0), np.float32), np.empty((len(q), 0), np.int64), kind
        )
    if kind == "hnsw":
        faiss.downcast_index(index).hnsw.efSearch = max(spec.ef_search, 2 * k)
    if kind == "ivf":
        ivf = faiss.extract_index_ivf(index)
        ivf.nprobe = min(spec.nprobe, ivf.nlist)
    use_gpu = faiss_gpu_available() if gpu is None else gpu
    if use_gpu and kind != "hnsw":
        index = faiss.index_cpu_to_all_gpus(index)
    scores, ids = index.search(q, k)
    return SearchResult(scores, ids.astype(np.int64), kind)


def faiss_gpu_available() -> bool:
    """Whether the installed faiss has GPU support and sees a GPU."""
    faiss = _faiss()
    get = getattr(faiss, "get_num_gpus", None)
    return bool(get and get() > 0)


def numpy_exact_search(
    x: np.ndarray, queries: np.ndarray, k: int, *, block: int = 65536
) -> SearchResult:
    """Brute force in numpy: blocked matmul + argpartition (the baseline and the test oracle).

    Memory: one ``(q, block)`` score block plus ``(q, 2k)`` candidates.
    """
    q = np.ascontiguousarray(queries, dtype=np.float32)
    n = len(x)
    k = min(int(k), n)
    best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_i = np.empty((len(q), 0), dtype=np.int64)
    for start in range(0, n, block):
        s = q @ np.asarray(x[start : start + block], dtype=np.float32).T
        kk = min(k, s.shape[1])
        part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
        cand_s = np.concatenate([best_s, np.take_along_axis(s, part, 1)], axis=1)
        cand_i = np.concatenate([best_i, part + start], axis=1)
        keep = np.argpartition(-cand_s, min(k, cand_s.shape[1]) - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(cand_s, keep, 1)
        best_i = np.take_along_axis(cand_i, keep, 1)
    order = np.argsort(-best_s, axis=1, kind="stable")
    return SearchResult(
        np.take_along_axis(best_s, order, 1), np.take_along_axis(best_i, order, 1), "numpy"
    )


def torch_exact_search(
    x: np.ndarray | Any, queries: np.ndarray, k: int, *, device: str = "cuda", block: int = 1 << 20
) -> SearchResult:
    """Exact top-k on a torch device (the GPU path when faiss-gpu is missing).

    ``x`` may be a numpy array (copied to the device block by block) or a device tensor.
    """
    import torch

    q = torch.as_tensor(np.ascontiguousarray(queries, dtype=np.float32), device=device)
    n = int(x.shape[0])
    k = min(int(k), n)
    best_s = torch.full((q.shape[0], 0), float("-inf"), device=device)
    best_i = torch.empty((q.shape[0], 0), dtype=torch.int64, device=device)
    for start in range(0, n, block):
        xb = x[start : start + block]
        xb = (
            xb
            if isinstance(xb, torch.Tensor)
            else torch.as_tensor(np.ascontiguousarray(xb), device=device)
        )
        s = q @ xb.T
        ts, ti = torch.topk(s, min(k, s.shape[1]), dim=1)
        cs = torch.cat([best_s, ts], dim=1)
        ci = torch.cat([best_i, ti + start], dim=1)
        best_s, pos = torch.topk(cs, min(k, cs.shape[1]), dim=1)
        best_i = torch.gather(ci, 1, pos)
    return SearchResult(best_s.cpu().numpy(), best_i.cpu().numpy(), "torch")


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Mean over queries of |approx top-k ∩ exact top-k| / k, in [0, 1] (1 = exact)."""
    if exact_ids.size == 0:
        return 1.0
    hits = [
        len(np.intersect1d(a[a >= 0], e, assume_unique=False)) / max(1, len(e))
        for a, e in zip(approx_ids, exact_ids, strict=True)
    ]
    return float(np.mean(hits))
