"""Benchmark: the cost of running queries through ``Study.sql`` against plain ``con.execute``.

Usage::

    python benchmarks/bench_study_sql.py [--occupations 62] [--rows 20000] [--repeat 3]

``Study.sql`` reads a file of ``corpus_audit/sql/`` (cached), splits it with DuckDB's parser
(``extract_statements``) and binds each statement's named parameters. This measures what that
adds per call, side by side with the simple baseline: the same SQL text passed to
``con.execute`` with its parameters. Two workloads, both run once per occupation as the
stages run them:

1. ``report/thumbs_training`` (one SELECT with three parameters): the report's per-occupation
   thumbnail query;
2. ``subsets/cut`` (two statements, two temp tables, four parameters), baseline: the two
   statements executed one by one.

Tables are synthetic (``--rows`` captions per occupation with training images, half of them
labelled), in a fresh study in a temporary directory. Prints calls/s for both ways and the
ratio. The machine's CPUs are shared while others work: rerun for numbers you report.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from corpus_audit.core.config import StudyConfig  # noqa: E402
from corpus_audit.core.store import Study, sql_text  # noqa: E402


def fill(study: Study, occupations: int, rows: int) -> list[str]:
    """Samples, training images and labels for ``occupations`` synthetic occupations."""
    con = study.con
    con.execute(
        "INSERT INTO samples SELECT 'keyword', 'occ' || o, NULL, o * $rows + r, r + 1, NULL "
        "FROM range($n) a(o), range($rows) b(r)",
        {"n": occupations, "rows": rows},
    )
    con.execute(
        "INSERT INTO captions SELECT caption_id, 'a caption ' || caption_id, NULL, 'f', caption_id "
        "FROM samples"
    )
    con.execute(
        "INSERT INTO images (image_id, source, caption_id, path) "
        "SELECT 'train:' || caption_id, 'training', caption_id, 'x.png' FROM samples"
    )
    con.execute(
        "INSERT INTO labels SELECT image_id, 'agegender', (hash(image_id) % 100) / 100.0, "
        "'female', 0.5 FROM images WHERE hash(image_id) % 2 = 0"
    )
    return [f"occ{o}" for o in range(occupations)]


def timed(fn, occupations: list[str], repeat: int) -> float:
    """Best of ``repeat`` passes over every occupation, in calls per second."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for occ in occupations:
            fn(occ)
        best = min(best, time.perf_counter() - t0)
    return len(occupations) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--occupations", type=int, default=62)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        study = Study.create(StudyConfig(root=Path(tmp) / "s"))
        occupations = fill(study, args.occupations, args.rows)
        con = study.con
        study.sql("analyze/labelled", classifier="agegender", threshold=0.5)

        thumbs = sql_text("report/thumbs_training.sql")
        cut_first, cut_second = (
            s.query for s in con.extract_statements(sql_text("subsets/cut.sql"))
        )
        cut = {"n_occupation": 50, "n_prompt": 10, "unit": "labelled_images", "split": False}
        workloads = {
            "report_thumbs_training (1 statement)": (
                lambda o: study.sql(
                    "report/thumbs_training", occupation=o, classifier="agegender", n=8
                ).fetchall(),
                lambda o: con.execute(
                    thumbs, {"occupation": o, "classifier": "agegender", "n": 8}
                ).fetchall(),
            ),
            "subsets_cut (2 statements)": (
                lambda o: study.sql("subsets/cut", **cut),
                lambda o: (
                    con.execute(cut_first, {k: cut[k] for k in ("n_occupation", "n_prompt")}),
                    con.execute(cut_second, {k: cut[k] for k in ("unit", "split")}),
                ),
            ),
        }
        print(f"{args.occupations} occupations x {args.rows} captions; best of {args.repeat}")
        print(f"{'workload':40} {'Study.sql /s':>13} {'con.execute /s':>15} {'ratio':>7}")
        for name, (ours, baseline) in workloads.items():
            a = timed(ours, occupations, args.repeat)
            b = timed(baseline, occupations, args.repeat)
            print(f"{name:40} {a:13.1f} {b:15.1f} {a / b:7.2f}")
        study.close()


if __name__ == "__main__":
    main()
