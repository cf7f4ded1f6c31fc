"""Benchmark: texts/s of gender association and of calibrated marked words vs Python loops.

Usage::

    python benchmarks/bench_association.py [--repeat 4] [--groups 60] [--corpus FILE ...]
                                           [--baseline-texts N] [--json OUT.json]

What it does, in one process, on the real captions of ``../shared/data`` (LAION 10 k sample,
COCO val2017, CC3M validation: 50,847 captions with raw HTML), repeated ``--repeat`` times
(neither side deduplicates texts, so repeats cost both the same), or on ``--corpus`` parquet
files (column TEXT or caption):

1. **association**: :class:`corpus_audit.methods.texts.association.AssociationCounter` in batches of
   100 000 texts (RE2 cleaning and word split, one ``index_in``, one ``bincount``, RE2 count of
   non-binary terms) vs the **baseline**: a Python loop per text (``html.unescape``, ``re``
   tag/URL removal, ``re.split``, ``collections.Counter`` of the words, sums over the term
   lists, the rule in ``if``s). Both are checked equal on the baseline's texts.
2. **marked words**: :func:`corpus_audit.methods.texts.marked_words.marked_words` vs the **baseline**:
   a Python loop that tokenises each text with ``re``, counts words per (group, side) and for
   the corpus with ``Counter``, keeps the first 3 example texts per word, then computes the
   prior, z and calibration word by word with ``math``. Texts are split into ``--groups``
   groups (stand-ins for occupations: row number modulo the count) and labelled
   female/male/none by the explicit indicators (gender words and pronouns, computed once,
   untimed). The two sets of marked words and their z are compared.

Loading wordfreq's list and the lexicon is done before timing. The machine's CPUs are shared
while others work: rerun for numbers you report.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPORA = (
    "laion400m_sample_10k.parquet",
    "coco_val2017_captions.parquet",
    "cc3m_val_captions.parquet",
)
BATCH = 100_000

_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:[\t\n\f\r /][^<>]*)?>")
_URL = re.compile(r"(?:[Hh][Tt][Tt][Pp][Ss]?://|[Ww][Ww][Ww]\.)[^\t\n\f\r ]*")
_SPLIT = re.compile(r"[^\w]+")
_LETTER = re.compile(r"[^\W\d_]")


def load_texts(paths: list[Path]) -> list[str | None]:
    import pyarrow.parquet as pq

    texts: list[str | None] = []
    for path in paths:
        table = pq.read_table(path)
        column = "TEXT" if "TEXT" in table.column_names else "caption"
        texts += table.column(column).to_pylist()
    return texts


# -- baselines: plain Python --------------------------------------------------------------------
def py_words(text: str | None) -> list[str]:
    if text is None:
        return []
    if "&" in text:
        text = html.unescape(text)
    text = _URL.sub(" ", _TAG.sub(" ", text)).replace("İ", "i").lower()
    return [w for w in _SPLIT.split(text) if w]


def baseline_association(texts: list[str | None], terms) -> list[tuple]:
    """Per text: (f pron, m pron, n pron, f hon, m hon, non-binary terms, association)."""
    nb_patterns = [re.compile(rf"(?<!\w){re.escape(t)}(?!\w)") for t in terms.non_binary]
    lists = [
        terms.pronouns["female"],
        terms.pronouns["male"],
        terms.pronouns["neutral"],
        terms.honorifics["female"],
        terms.honorifics["male"],
    ]
    out = []
    for text in texts:
        words = Counter(py_words(text))
        c = [sum(words[w] for w in terms_list) for terms_list in lists]
        cleaned = "" if text is None else _URL.sub(" ", _TAG.sub(" ", html.unescape(text))).lower()
        nb = sum(len(p.findall(cleaned)) for p in nb_patterns)
        f, m, n = c[0] + c[3], c[1] + c[4], c[2]
        if nb and n > m and n > f:
            label = "non_binary"
        elif (f > m and f > n) or (not nb and f > m):
            label = "female"
        elif (m > f and m > n) or (not nb and m > f):
            label = "male"
        else:
            label = "none"
        out.append((*c, nb, label))
    return out


def baseline_marked_words(groups, texts, labels, drop, general, z_threshold=1.96, top=20):
    """{(group, word): z} of the calibrated marked words, default settings, Python loops."""
    counts: dict[tuple, Counter] = defaultdict(Counter)
    examples: dict[tuple, list[int]] = defaultdict(list)
    corpus: Counter[str] = Counter()
    for i, (group, text, label) in enumerate(zip(groups, texts, labels, strict=True)):
        words = [w for w in py_words(text) if len(w) >= 2 and _LETTER.search(w) and w not in drop]
        corpus.update(words)
        if label in ("female", "male"):
            counts[(group, label)].update(words)
            for w in set(words):
                ex = examples[(group, label, w)]
                if len(ex) < 3:
                    ex.append(i)
    total = sum(corpus.values())
    g_total = sum(general.get(w, 0.0) for w in corpus)
    top_words = {w for w, _ in sorted(corpus.items(), key=lambda kv: (-kv[1], kv[0]))[:top]}
    out = {}
    for group in sorted({g for g, _ in counts}):
        yf_all, ym_all = counts[(group, "female")], counts[(group, "male")]
        nf, nm = sum(yf_all.values()), sum(ym_all.values())
        if not nf or not nm:
            continue
        a0 = nf + nm
        for w in set(yf_all) | set(ym_all):
            a = a0 * (0.8 * corpus[w] / total + 0.2 * general.get(w, 0.0) / g_total)
            yf, ym = yf_all[w], ym_all[w]
            delta = math.log((yf + a) / (nf + a0 - yf - a)) - math.log(
                (ym + a) / (nm + a0 - ym - a)
            )
            z = delta / math.sqrt(1 / (yf + a) + 1 / (ym + a))
            freq = general.get(w, 0.0)
            common = freq > 0 and math.log10(freq) + 9 >= 6.0
            if abs(z) > z_threshold and not common and w not in top_words:
                out[(group, w)] = z
    return out


# -- the run ----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict:
    import pyarrow as pa

    from corpus_audit.methods.gender_text import WordMatcher, clean_markup, label_of
    from corpus_audit.methods.lexicon import load_association_terms, load_gender_terms
    from corpus_audit.methods.texts.association import AssociationCounter
    from corpus_audit.methods.texts.marked_words import general_frequencies, marked_words

    paths = [Path(p) for p in args.corpus] or [args.data / n for n in CORPORA]
    base = load_texts(paths)
    texts = base * args.repeat
    n = len(texts)
    out: dict = {"texts": n, "corpus": [str(p) for p in paths], "repeat": args.repeat}
    print(f"{n:,} texts ({len(base):,} real captions x {args.repeat})", file=sys.stderr)

    terms = load_association_terms()
    gender_terms = load_gender_terms()
    general = general_frequencies("en")
    counter = AssociationCounter(terms)
    arr = pa.array(texts, pa.string())
    nb = min(args.baseline_texts or n, n)

    # 1. association
    t0 = time.perf_counter()
    frames = [counter.count(arr.slice(lo, BATCH)) for lo in range(0, n, BATCH)]
    dt = time.perf_counter() - t0
    t0 = time.perf_counter()
    base_rows = baseline_association(texts[:nb], terms)
    dt_base = time.perf_counter() - t0
    import pandas as pd

    ours = pd.concat(frames, ignore_index=True).iloc[:nb]
    same = [tuple(r) for r in ours.itertuples(index=False)] == base_rows
    out.update(
        association_texts_per_s=round(n / dt, 1),
        association_baseline_texts=nb,
        association_baseline_texts_per_s=round(nb / dt_base, 1),
        association_speedup=round((n / dt) / (nb / dt_base), 2),
        association_equal=same,
        associated_share=round(float((ours["association"] != "none").mean()), 4),
    )

    # 2. marked words (labels: explicit indicators, untimed; groups: row modulo --groups)
    labels_base = [label_of(t) for t in WordMatcher(gender_terms).match(clean_markup(base))]
    labels = labels_base * args.repeat
    groups = [f"g{i % args.groups:02d}" for i in range(n)]
    drop = set(terms.words()) | {w for g in ("female", "male") for w in gender_terms.words[g]}
    t0 = time.perf_counter()
    res = marked_words(groups, arr, labels, drop_words=drop)
    dt_mw = time.perf_counter() - t0
    t0 = time.perf_counter()
    base_mw = baseline_marked_words(groups, texts, labels, drop, general)
    dt_mw_base = time.perf_counter() - t0
    got = {(r.occupation, r.word): r.z for r in res.words.itertuples()}
    max_dz = max((abs(got[k] - base_mw[k]) for k in got.keys() & base_mw.keys()), default=0.0)
    out.update(
        groups=args.groups,
        marked_words_texts_per_s=round(n / dt_mw, 1),
        marked_words_baseline_texts_per_s=round(n / dt_mw_base, 1),
        marked_words_speedup=round(dt_mw_base / dt_mw, 2),
        marked_words_rows=len(res.words),
        marked_words_same_set=got.keys() == base_mw.keys(),
        marked_words_max_abs_z_difference=float(max_dz),
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--corpus", nargs="*", default=[], help="parquet files instead of the data")
    ap.add_argument("--repeat", type=int, default=4, help="copies of the texts (default 4)")
    ap.add_argument("--groups", type=int, default=60, help="occupation stand-ins (default 60)")
    ap.add_argument(
        "--baseline-texts", type=int, default=0, help="texts for the association baseline (0: all)"
    )
    ap.add_argument("--json", type=Path, help="write the numbers here as JSON")
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.groups < 1 or args.baseline_texts < 0:
        ap.error("--repeat and --groups must be >= 1, --baseline-texts >= 0")
    out = run(args)
    print(
        f"association:  {out['association_texts_per_s']:>12,.0f} texts/s   baseline (Python loop, "
        f"Counter): {out['association_baseline_texts_per_s']:>10,.0f} texts/s   "
        f"ratio {out['association_speedup']:.1f} x   same output: {out['association_equal']}"
    )
    print(
        f"marked words: {out['marked_words_texts_per_s']:>12,.0f} texts/s   baseline (Python loop, "
        f"Counter): {out['marked_words_baseline_texts_per_s']:>10,.0f} texts/s   "
        f"ratio {out['marked_words_speedup']:.1f} x   same words: {out['marked_words_same_set']} "
        f"(max |dz| {out['marked_words_max_abs_z_difference']:.1e}, "
        f"{out['marked_words_rows']} rows, {out['groups']} groups)"
    )
    print(json.dumps(out, indent=1), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
