"""Nearest-neighbour search time: FAISS exact / approximate vs numpy brute force.

Usage::

    python benchmarks/bench_search.py [--n 1000000] [--queries 248] [--k 500] [--dim 384]
                                      [--nlist 1024] [--nprobe 8,16] [--hnsw] [--faiss-default]

``--n`` random unit vectors (float32, dim 384, as all-MiniLM-L6-v2 gives) and ``--queries``
random unit queries (248 = 62 occupations x 4 prompts); every method returns the top ``--k``
by inner product (= cosine). One global search, the worst case: the stage itself searches
each prompt only among its own occupation's captions, which is far smaller.

Rows:

- ``numpy brute force``: blocked matmul + argpartition (:func:`numpy_exact_search`), the
  simple baseline, and the oracle for recall.
- ``faiss flat``: ``IndexFlatIP`` with ``distance_compute_blas_threshold = 20``, as the stage
  runs it (exact). ``--faiss-default`` adds the library's default threshold for contrast
  (slow: ~18 s at 1 M).
- ``faiss ivf nprobe=P``: ``IndexIVFFlat(nlist)``, build (train + add) time separate, with
  recall@k against numpy.
- ``faiss hnsw`` (``--hnsw``): ``IndexHNSWFlat(32)``; its build is slow at 1 M.
- with CUDA: ``torch exact (cuda)`` (:func:`torch_exact_search`, vectors resident on the GPU,
  copy time separate) and ``faiss-gpu flat`` when faiss has GPU support.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def unit_vectors(
    n: int, dim: int, seed: int, *, centers: np.ndarray | None = None, block: int = 100_000
) -> np.ndarray:
    """``(n, dim)`` float32 random unit rows, generated block by block.

    With ``centers``: each row is a random center plus Gaussian noise (cosine to its center
    about 0.6), a stand-in for topical clusters in real caption embeddings.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for s in range(0, n, block):
        m = min(block, n - s)
        x = rng.standard_normal((m, dim), dtype=np.float32)
        if centers is not None:
            x = centers[rng.integers(0, len(centers), m)] + x * np.float32(1.3 / np.sqrt(dim))
        out[s : s + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=248)
    ap.add_argument("--k", type=int, default=500)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--nlist", type=int, default=1024)
    ap.add_argument("--nprobe", default="8,16,64")
    ap.add_argument("--hnsw", action="store_true")
    ap.add_argument("--faiss-default", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--data",
        choices=["random", "clustered"],
        default="random",
        help="uniform random unit vectors (worst case for IVF) or 2000 Gaussian clusters",
    )
    args = ap.parse_args(argv)

    from corpus_audit.backends.index import (
        IndexSpec,
        build_index,
        numpy_exact_search,
        recall_at_k,
        search,
    )

    t0 = time.perf_counter()
    centers = None
    if args.data == "clustered":
        centers = unit_vectors(2000, args.dim, args.seed + 2)
    x = unit_vectors(args.n, args.dim, args.seed, centers=centers)
    q = unit_vectors(args.queries, args.dim, args.seed + 1, centers=centers)
    print(
        f"# {args.n} x {args.dim} {args.data} unit vectors ({x.nbytes / 2**20:.0f} MiB, made in "
        f"{time.perf_counter() - t0:.1f} s), {args.queries} queries, top-{args.k}, "
        f"cpus={os.cpu_count()}",
        flush=True,
    )
    rows: list[
        tuple[str, float, float | None, float | None]
    ] = []  # name, search s, build s, recall

    def best_of(fn):
        times, res = [], None
        for _ in range(args.repeats):
            t = time.perf_counter()
            res = fn()
            times.append(time.perf_counter() - t)
        return min(times), res

    t_np, exact = best_of(lambda: numpy_exact_search(x, q, args.k))
    rows.append(("numpy brute force", t_np, None, 1.0))

    try:
        import faiss
    except ImportError:
        faiss = None
        print("# faiss is not installed here: faiss rows skipped")
    if faiss is not None:
        t = time.perf_counter()
        flat = build_index(x, IndexSpec("flat"))
        t_build = time.perf_counter() - t
        t_flat, res = best_of(lambda: search(flat, q, args.k, gpu=False))
        rows.append(
            ("faiss flat (blas threshold 20)", t_flat, t_build, recall_at_k(res.ids, exact.ids))
        )
        if args.faiss_default:
            faiss.cvar.distance_compute_blas_threshold = 128000
            t = time.perf_counter()
            flat.search(q, args.k)
            rows.append(("faiss flat (default threshold)", time.perf_counter() - t, t_build, None))
            faiss.cvar.distance_compute_blas_threshold = 20
        flat = None  # free it before the next index

        t = time.perf_counter()
        spec = IndexSpec("ivf", nlist=args.nlist, seed=args.seed)
        ivf = build_index(x, spec)
        t_build = time.perf_counter() - t
        for p in [int(v) for v in args.nprobe.split(",") if v]:
            sp = IndexSpec("ivf", nlist=args.nlist, nprobe=p)
            t_ivf, res = best_of(lambda sp=sp: search(ivf, q, args.k, spec=sp, gpu=False))
            rows.append(
                (
                    f"faiss ivf{args.nlist} nprobe={p}",
                    t_ivf,
                    t_build,
                    recall_at_k(res.ids, exact.ids),
                )
            )
        ivf = None

        if args.hnsw:
            t = time.perf_counter()
            hnsw = build_index(x, IndexSpec("hnsw"))
            t_build = time.perf_counter() - t
            t_h, res = best_of(lambda: search(hnsw, q, args.k, spec=IndexSpec("hnsw"), gpu=False))
            rows.append(("faiss hnsw32 ef=2k", t_h, t_build, recall_at_k(res.ids, exact.ids)))
            hnsw = None

    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        from corpus_audit.backends.index import torch_exact_search

        t = time.perf_counter()
        xg = torch.as_tensor(x, device="cuda")
        torch.cuda.synchronize()
        t_copy = time.perf_counter() - t
        torch_exact_search(xg, q, args.k)  # warm-up (kernels, cuBLAS handle)

        def gpu_search():
            r = torch_exact_search(xg, q, args.k)
            torch.cuda.synchronize()
            return r

        t_g, res = best_of(gpu_search)
        rows.append(("torch exact (cuda, fp32)", t_g, t_copy, recall_at_k(res.ids, exact.ids)))
        name = torch.cuda.get_device_name(0)
        print(f"# GPU: {name}")
        if faiss is not None and getattr(faiss, "get_num_gpus", lambda: 0)() > 0:
            t = time.perf_counter()
            gflat = faiss.index_cpu_to_all_gpus(build_index(x, IndexSpec("flat")))
            t_build = time.perf_counter() - t
            t_fg, res = best_of(lambda: gflat.search(q, args.k))
            rows.append(("faiss-gpu flat", t_fg, t_build, recall_at_k(res[1], exact.ids)))

    print(f"{'method':34s} {'search s':>9s} {'build s':>8s} {'recall@k':>9s} {'x numpy':>8s}")
    for name, s, b, r in rows:
        print(
            f"{name:34s} {s:9.3f} {'' if b is None else f'{b:8.1f}':>8s} "
            f"{'' if r is None else f'{r:9.4f}':>9s} {t_np / s:8.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
