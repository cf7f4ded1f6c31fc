"""Benchmark: the `analyze` stage at paper scale, and its bootstrap vs naive image resampling.

Usage::

    python benchmarks/bench_analysis.py [--occupations 62] [--images 500] [--models 2]
                                        [--replicates 1000] [--json OUT.json]

What it does, in one process:

1. builds a study database with synthetic tables at the paper's shape: ``--occupations``
   occupations x 4 prompts, ``--images`` labelled generated images per (model, prompt) and
   training images per subset (keyword, no_indicators, nn per prompt, nn_no_indicators per
   prompt), labels drawn at random per occupation (fixed seed);
2. times the whole ``analyze`` stage (SQL %female over every set, amplification for every
   (model, strategy, occupation, prompt), t-tests, bootstrap, table writes): labelled
   images/s;
3. bootstrap engines on the same pairs, side by side: corpus_audit's (one Binomial(n, p)
   draw per image set and replicate, shared sets drawn once) vs the simple baseline that
   resamples each set's n image labels with replacement; reports both times, the speed-up,
   and the largest difference between their interval endpoints (they estimate the same
   distribution, so it is Monte-Carlo noise);
4. the misclassification correction (docs/analysis.md): adds human validation labels to
   ``--validated`` images per (source, label) stratum (the human label is the classifier's,
   flipped for 8 % of them), reruns ``analyze`` (now also the corrected %female, amplification
   and bootstrap that resamples the validation sample too) and reports its time over that of
   a warm rerun without validation labels (``corrected.ratio``; that run corrects nothing).

The machine's CPUs are shared while others work: rerun for numbers you report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STRATEGIES = ("keyword", "no_indicators", "nn", "nn_no_indicators")


def build_study(root: Path, occupations: int, images: int, models: int, seed: int = 0):
    """A study whose tables hold the synthetic sets (see the module docstring)."""
    from corpus_audit.commands.demo import demo_corpus
    from corpus_audit.core.pipeline import init_study

    study = init_study(root, demo_corpus()[:1])
    con = study.con
    occ = [f"occ{i:02d}" for i in range(occupations)]
    rng = np.random.default_rng(seed)
    share = {o: float(rng.uniform(0.05, 0.95)) for o in occ}
    con.execute("CREATE TEMP TABLE occ_share (occupation VARCHAR, share DOUBLE)")
    con.executemany("INSERT INTO occ_share VALUES (?, ?)", list(share.items()))
    con.execute(
        """
        INSERT INTO prompts
        SELECT 'paper:' || t || ':' || occupation, 'paper', t, occupation, 'prompt ' || t
        FROM occ_share, range(1, 5) r(t)
        """
    )
    # Training: caption ids per (strategy, occupation[, prompt]); one image per caption.
    con.execute(
        """
        CREATE TEMP TABLE sets AS
        SELECT s.strategy, o.occupation, p.prompt_id, o.share,
               row_number() OVER () AS set_no
        FROM occ_share o
        CROSS JOIN (VALUES ('keyword'), ('no_indicators'), ('nn'), ('nn_no_indicators')) s(strategy)
        LEFT JOIN prompts p ON p.occupation = o.occupation AND s.strategy LIKE 'nn%'
        """
    )
    con.execute(
        f"""
        INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank, score)
        SELECT strategy, occupation, prompt_id, set_no * 100000 + k, k + 1, NULL
        FROM sets, range({images}) r(k)
        """
    )
    con.execute(  # the captions the samples name (the analysis checks they exist)
        """
        INSERT INTO captions (caption_id, text, url, source_file, row_in_file)
        SELECT DISTINCT caption_id, 'caption', NULL, 'bench', caption_id FROM samples
        """
    )
    con.execute(
        """
        INSERT INTO images (image_id, source, caption_id, path)
        SELECT DISTINCT 'train:' || caption_id, 'training', caption_id, 'x.png' FROM samples
        """
    )
    con.execute(
        f"""
        INSERT INTO images (image_id, source, prompt_id, occupation, path, model_id, seed)
        SELECT 'gen:m' || m || ':' || prompt_id || ':' || k, 'generated', prompt_id, occupation,
               'x.png', 'model' || m, k
        FROM prompts, range({models}) a(m), range({images}) b(k)
        """
    )
    con.execute("SELECT setseed(0.5)")
    con.execute(
        """
        INSERT INTO labels (image_id, classifier, p_female, label, threshold)
        SELECT i.image_id, 'clip', 0.5, CASE WHEN random() < o.share THEN 'female' ELSE 'male'
               END, 0.9
        FROM images i
        JOIN (SELECT DISTINCT caption_id, occupation FROM samples) s
          ON s.caption_id = i.caption_id
        JOIN occ_share o ON o.occupation = s.occupation
        UNION ALL
        SELECT i.image_id, 'clip', 0.5,
               CASE WHEN random() < least(0.99, o.share * 0.8) THEN 'female' ELSE 'male' END, 0.9
        FROM images i JOIN occ_share o USING (occupation) WHERE i.source = 'generated'
        """
    )
    return study


def naive_bootstrap(pairs, replicates: int, confidence: float, seed: int):
    """Baseline: resample each image set's label vector with replacement, per replicate."""
    rng = np.random.default_rng(seed)
    draws = {}
    for p in pairs:
        for rate in (p.training, p.generated):
            if rate.key in draws:
                continue
            k = int(round(rate.percent * rate.n / 100))
            labels = np.zeros(rate.n)
            labels[:k] = 1
            idx = rng.integers(0, rate.n, size=(replicates, rate.n))
            draws[rate.key] = 100 * labels[idx].mean(axis=1)
    by_prompt = {}
    for p in pairs:
        if not p.excluded:
            by_prompt.setdefault(p.prompt, []).append(
                np.abs(draws[p.generated.key] - 50) - np.abs(draws[p.training.key] - 50)
            )
    alpha = (1 - confidence) / 2
    return {
        prompt: tuple(np.quantile(np.mean(a, axis=0), [alpha, 1 - alpha]))
        for prompt, a in by_prompt.items()
    }


def time_corrected(study, per_stratum: int) -> dict:
    """Rerun ``analyze`` without validation labels (warm, the baseline), add validation
    labels (see the module docstring), rerun it, and time both."""
    from corpus_audit.stages.analyze import analyze

    study.config.analysis.correction_min_validated += 1  # a config change: a real rerun
    t0 = time.perf_counter()
    assert not analyze(study, progress=False).skipped
    plain_s = time.perf_counter() - t0
    study.con.execute("SELECT setseed(0.25)")
    study.con.execute(
        """
        INSERT INTO human_labels (image_id, annotator, label, source_file)
        SELECT image_id, 'bench',
               CASE WHEN random() < 0.08 THEN (CASE label WHEN 'female' THEN 'male'
                    ELSE 'female' END) ELSE label END, 'bench'
        FROM (
            SELECT l.image_id, l.label,
                   row_number() OVER (PARTITION BY i.source, i.model_id, l.label
                                      ORDER BY hash(l.image_id)) AS k
            FROM labels l JOIN images i USING (image_id)
        )
        WHERE k <= $n
        """,
        {"n": per_stratum},
    )
    t0 = time.perf_counter()
    run = analyze(study, progress=False)
    dt = time.perf_counter() - t0
    return {
        "validated": study.count("human_labels"),
        "sources": run.provenance["correction"]["sources"],
        "analyze_without_validation_s": round(plain_s, 2),
        "analyze_s": round(dt, 2),
        "ratio": round(dt / plain_s, 2),
        "changes": run.provenance["correction"]["changes"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--occupations", type=int, default=62)
    ap.add_argument("--images", type=int, default=500, help="images per set")
    ap.add_argument("--models", type=int, default=2)
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--validated", type=int, default=100, help="per (source, label) stratum")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()

    from corpus_audit.methods.amplification import Rate, make_pair, summarize
    from corpus_audit.stages.analyze import analyze

    out: dict = {"args": vars(args)}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        study = build_study(Path(tmp) / "study", args.occupations, args.images, args.models)
        study.config.analysis.bootstrap = args.replicates
        out["build_s"] = round(time.perf_counter() - t0, 2)
        labelled = study.count("labels")
        t0 = time.perf_counter()
        run = analyze(study, progress=False)
        dt = time.perf_counter() - t0
        out["analyze_s"] = round(dt, 2)
        out["labelled_images"] = labelled
        out["analyze_images_per_s"] = round(labelled / dt)
        out["amplification_rows"] = run.rows_out
        rows = study.con.execute(
            "SELECT occupation, template_id, training_pf, training_n, generated_pf, generated_n "
            "FROM amplification WHERE model_id = 'model0' AND strategy = 'keyword'"
        ).fetchall()
        out["corrected"] = time_corrected(study, args.validated)
        study.close()

    pairs = [
        make_pair(o, t, Rate(("t", o), tp, tn), Rate(("g", o, t), gp, gn))
        for o, t, tp, tn, gp, gn in rows
    ]
    t0 = time.perf_counter()
    per_prompt, _ = summarize(pairs, replicates=args.replicates, seed=1)
    ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = naive_bootstrap(pairs, args.replicates, 0.95, seed=2)
    base = time.perf_counter() - t0
    diff = max(
        max(abs(s.ci_low - naive[s.prompt][0]), abs(s.ci_high - naive[s.prompt][1]))
        for s in per_prompt
        if s.ci_low is not None
    )
    out["bootstrap"] = {
        "pairs": len(pairs),
        "corpus_audit_s": round(ours, 3),
        "naive_resampling_s": round(base, 3),
        "speedup": round(base / ours, 1),
        "max_endpoint_difference_pp": round(float(diff), 3),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
