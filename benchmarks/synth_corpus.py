"""Write a synthetic LAION-like parquet corpus, deterministically from a seed, in bounded memory.

Usage::

    python benchmarks/synth_corpus.py OUT_DIR [--rows 10000000] [--files 8] [--seed 0]

What it looks like (LAION-400M metadata columns, upper case):

- ``SAMPLE_ID`` (int64), ``URL``, ``TEXT``, ``HEIGHT``, ``WIDTH`` (int32), ``LICENSE``,
  ``NSFW`` (str), ``similarity`` (float32): the extra columns are there so readers that
  project only the columns they need are measured fairly.
- ``TEXT``: words drawn with their empirical frequencies from the 10 k real LAION captions
  bundled in ``corpus_audit/demo_data`` (tokens that would match an occupation removed), so
  the vocabulary, casing, punctuation and stray HTML entities are real. Word counts follow a
  log-normal law (mean about 75 characters) with a long tail (0.2 % of rows 60-400 words,
  up to about 2.5 kB). Every caption is different (no dictionary-encoding shortcut).
- ``--mention-rate`` (default 4.5 %) of the captions get one occupation form from the built-in
  lexicon (lower, Title, UPPER, possessive), a tenth of those a second one; near misses
  (``internal``, ``cookie``, ``cookbook``, ``teaching``...) keep their natural frequency plus
  some injected ones. 0.5 % of captions are wrapped in ``<a href='...'>...</a>``; 0.2 % are
  null and 0.1 % empty.

Rows are written in row groups of ``--chunk-rows`` (default 250 000), one chunk in memory at a
time (about 100 MB), so any ``--rows`` fits. Same arguments = byte-identical files.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
VOCAB_SOURCE = REPO / "corpus_audit" / "demo_data" / "laion400m_sample_10k.parquet"
NEAR_MISSES = [
    "internal",
    "international",
    "cookie",
    "cookies",
    "cookbook",
    "teaching",
    "doctorate",
    "managerial",
    "nursery",
    "painting",
    "authority",
    "studentship",
    "singers-songwriters",
    "pilotless",
    "engineered",
    "chefs-d'oeuvre",
]
HTML_OPEN = "<a href='http://www.example-shop.com/item/12345'>"
HTML_CLOSE = "</a>"


def _vocabulary(forms: list[str]) -> tuple[list[str], np.ndarray]:
    """Real LAION tokens (no occupation forms) and their probabilities."""
    table = pq.read_table(VOCAB_SOURCE, columns=["TEXT"])
    counts: Counter[str] = Counter()
    for text in table.column("TEXT").to_pylist():
        if text:
            counts.update(text.split())
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, forms)) + r")\b")
    words = sorted(w for w in counts if not pattern.search(w.lower()))
    freq = np.array([counts[w] for w in words], dtype=np.float64)
    return words, freq / freq.sum()


def _mention_variants(forms: list[str]) -> list[str]:
    """Surface variants of every form: as is, Title, UPPER, possessive."""
    out: list[str] = []
    for f in forms:
        out += [f, f.title(), f.upper(), f + "'s", f.title() + "'s"]
    return out


def _chunk(rng: np.random.Generator, n: int, first_id: int, tables: dict, args) -> pa.Table:
    """One chunk of ``n`` rows starting at sample id ``first_id``."""
    vocab: pa.Array = tables["vocab"]
    n_base, n_mention = tables["n_base"], tables["n_mention"]
    # words per caption: log-normal body + a long tail
    nwords = np.clip(np.rint(rng.lognormal(np.log(10.0), 0.55, n)), 1, 400).astype(np.int64)
    tail = rng.random(n) < 0.002
    nwords[tail] = rng.integers(60, 401, int(tail.sum()))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nwords, out=offsets[1:])
    flat = rng.choice(n_base, size=int(offsets[-1]), p=tables["p"]).astype(np.int64)
    starts = offsets[:-1]
    # occupation mentions at a random position, a tenth with a second one at another position
    mention = rng.random(n) < args.mention_rate
    rows = np.flatnonzero(mention)
    pos = starts[rows] + rng.integers(0, nwords[rows])
    flat[pos] = n_base + rng.integers(0, n_mention, rows.size)
    second = rows[(rng.random(rows.size) < 0.1) & (nwords[rows] >= 2)]
    pos2 = starts[second] + rng.integers(0, nwords[second])
    flat[pos2] = n_base + rng.integers(0, n_mention, second.size)
    # injected near misses
    near = np.flatnonzero(rng.random(n) < 0.01)
    flat[starts[near] + rng.integers(0, nwords[near])] = tables["near_first"] + rng.integers(
        0, len(NEAR_MISSES), near.size
    )
    # HTML wrappers on captions of >= 3 words (open tag first, close tag last)
    html = np.flatnonzero((rng.random(n) < 0.005) & (nwords >= 3))
    flat[starts[html]] = tables["html_open"]
    flat[offsets[html + 1] - 1] = tables["html_close"]
    lists = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int64()).cast(pa.int32()), vocab.take(pa.array(flat))
    )
    text = pc.binary_join(lists, " ")
    u = rng.random(n)
    null = u < 0.002
    empty = (u >= 0.002) & (u < 0.003)
    text = pc.if_else(pa.array(empty), pa.scalar("", pa.string()), text)
    text = pc.if_else(pa.array(null), pa.scalar(None, pa.string()), text)
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    url = pc.binary_join_element_wise(
        "https://img",
        pc.cast(pa.array(ids % 97), pa.string()),
        ".example-cdn.com/p/",
        pc.cast(pa.array(ids * 2654435761 % 1_000_000_007), pa.string()),
        ".jpg",
        "",
    )
    return pa.table(
        {
            "SAMPLE_ID": pa.array(ids),
            "URL": url,
            "TEXT": text,
            "HEIGHT": pa.array(rng.integers(200, 1200, n).astype(np.int32)),
            "WIDTH": pa.array(rng.integers(200, 1200, n).astype(np.int32)),
            "LICENSE": pa.array(np.where(rng.random(n) < 0.9, "?", "creativecommons")),
            "NSFW": pa.array(np.where(rng.random(n) < 0.95, "UNLIKELY", "UNSURE")),
            "similarity": pa.array(rng.uniform(0.28, 0.45, n).astype(np.float32)),
        }
    )


def write_corpus(
    out: Path,
    rows: int,
    files: int = 8,
    seed: int = 0,
    chunk_rows: int = 250_000,
    mention_rate: float = 0.045,
    progress: bool = True,
) -> list[Path]:
    """Write ``rows`` rows into ``files`` parquet files under ``out``; returns their paths."""
    from corpus_audit.methods.lexicon import load_occupations

    forms = [f for o in load_occupations() for f in o.forms]
    words, p = _vocabulary(forms)
    variants = _mention_variants(forms)
    vocab = pa.array(words + variants + NEAR_MISSES + [HTML_OPEN, HTML_CLOSE], pa.string())
    n_base = len(words)
    tables = {
        "vocab": vocab,
        "p": p,
        "n_base": n_base,
        "n_mention": len(variants),
        "near_first": n_base + len(variants),
        "html_open": n_base + len(variants) + len(NEAR_MISSES),
        "html_close": n_base + len(variants) + len(NEAR_MISSES) + 1,
    }
    args = argparse.Namespace(mention_rate=mention_rate)
    out.mkdir(parents=True, exist_ok=True)
    per_file = [rows // files + (1 if i < rows % files else 0) for i in range(files)]
    paths, first_id, done, t0 = [], 0, 0, time.time()
    for i, n_file in enumerate(per_file):
        path = out / f"part-{i:05d}.parquet"
        rng = np.random.default_rng([seed, i])
        writer = None
        left = n_file
        while left > 0:
            n = min(chunk_rows, left)
            table = _chunk(rng, n, first_id, tables, args)
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table, row_group_size=chunk_rows)
            first_id += n
            left -= n
            done += n
            if progress:
                rate = done / max(time.time() - t0, 1e-9)
                print(f"\r{done:,}/{rows:,} rows ({rate:,.0f} rows/s)", end="", file=sys.stderr)
        if writer is not None:
            writer.close()
            paths.append(path)
    if progress:
        print(file=sys.stderr)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="output directory (created)")
    ap.add_argument("--rows", type=int, default=10_000_000, help="total rows (default 10 M)")
    ap.add_argument("--files", type=int, default=8, help="number of parquet files")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk-rows", type=int, default=250_000, help="rows per row group / chunk")
    ap.add_argument(
        "--mention-rate",
        type=float,
        default=0.045,
        help="share of captions given an occupation mention, in [0, 1]",
    )
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.files < 1 or args.chunk_rows < 1:
        ap.error("--rows, --files and --chunk-rows must be >= 1")
    paths = write_corpus(
        args.out,
        args.rows,
        args.files,
        args.seed,
        args.chunk_rows,
        args.mention_rate,
        progress=not args.quiet,
    )
    print(f"wrote {args.rows:,} rows in {len(paths)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
