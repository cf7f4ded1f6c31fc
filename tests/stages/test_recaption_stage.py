"""The `recaption` stage and command on a real study: COCO captions selected by `select`, real
photos registered by the `images` stage (a `dir` source), a tiny random-weight BLIP built
offline. `corpus-audit recaption DIR --model PATH` is killed with SIGKILL in a subprocess
after its second committed batch; the rerun writes every image exactly once, with the
captions of an uninterrupted run; `variants` then compares the recaptions with the original
captions. Also: no model, and a variant written with other settings, are one-line errors."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
import test_recaption_models as trm
from image_fixtures import encode, lfw
from test_variants import _cli, coco_wide

from corpus_audit.core.pipeline import init_study, status
from corpus_audit.core.store import Study

REPO = Path(__file__).resolve().parents[2]
tiny_captioners = trm.tiny_captioners  # the session fixture: both tiny models
one_torch_thread = trm.one_torch_thread  # autouse: tiny models run faster on one thread
BATCH = 2

# The real CLI in a subprocess; each caption call sleeps so that the kill lands mid-run.
DRIVER = textwrap.dedent(
    """
    import sys
    import time

    import torch

    import corpus_audit.backends.captioners as models
    from corpus_audit.cli import main

    torch.set_num_threads(1)
    load = models.load_captioner


    def slow_load(*args, **kwargs):
        captioner = load(*args, **kwargs)
        caption = captioner.caption

        def slow(items):
            time.sleep(0.5)
            return caption(items)

        captioner.caption = slow
        return captioner


    models.load_captioner = slow_load
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.fixture(scope="module")
def study_dir(coco_path, tmp_path_factory) -> Path:
    """COCO caption 1 as the corpus; the 10 selected captions get a real face photo each."""
    root = tmp_path_factory.mktemp("recaption")
    coco_wide(coco_path, root / "coco.parquet")
    photos = root / "photos"
    photos.mkdir()
    init_study(
        root / "study",
        [str(root / "coco.parquet")],
        overrides={
            "corpus": {"text_column": "caption1"},
            "images": {"scope": "captions", "sources": [{"kind": "dir", "path": str(photos)}]},
            "indicators": {"use_names": False},
            "recaption": {"batch_size": BATCH, "max_new_tokens": 6},
            "variants": {"similarity": False, "replicates": 200},
        },
    ).close()
    assert _cli("select", str(root / "study")).returncode == 0
    with Study.open(root / "study") as study:
        ids = [r[0] for r in study.con.execute("SELECT caption_id FROM captions").fetchall()]
    for cid, face in zip(sorted(ids), lfw("faces", 64), strict=False):
        (photos / f"{cid}.jpg").write_bytes(encode(face, "JPEG", quality=90))
    done = _cli("images", str(root / "study"))
    assert done.returncode == 0, done.stderr
    return root / "study"


def _recaptions(root: Path) -> list[tuple]:
    with duckdb.connect(str(root / "study.duckdb"), read_only=True) as con:
        return con.execute(
            "SELECT variant, image_id, caption, model_id, settings_fingerprint FROM recaptions "
            "ORDER BY image_id"
        ).fetchall()


def _kill_after(root: Path, model: Path, at_least: int, tmp: Path) -> int:
    """Run `recaption` in a subprocess and SIGKILL it once its progress bar shows
    ``at_least`` images written; returns the exit status."""
    driver = tmp / "drive.py"
    driver.write_text(DRIVER)
    err = tmp / "stderr.txt"
    with err.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, str(driver), "recaption", str(root), "--model", str(model)],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        pattern = re.compile(r"recaption:\s+\d+%\|[^|]*\|\s*(\d+)/10")
        deadline = time.monotonic() + 300
        try:
            while time.monotonic() < deadline:
                done = [int(m.group(1)) for m in pattern.finditer(err.read_text())]
                if done and max(done) >= at_least:
                    os.kill(proc.pid, signal.SIGKILL)  # while the next batch is in flight
                    break
                if proc.poll() is not None:
                    pytest.fail(f"the run ended before the kill: {err.read_text()[-2000:]}")
                time.sleep(0.05)
            else:
                pytest.fail(f"no progress: {err.read_text()[-2000:]}")
        finally:
            code = proc.wait(timeout=60)
    return code


def test_kill_9_then_rerun_writes_every_image_once(study_dir, tiny_captioners, tmp_path):
    from corpus_audit.backends.captioners import CaptionInput, CaptionSettings, load_captioner
    from corpus_audit.stages.recaption.driver import recaption

    model = tiny_captioners["blip"]
    code = _kill_after(study_dir, model, 2 * BATCH, tmp_path)
    assert code == -signal.SIGKILL
    after_kill = _recaptions(study_dir)
    assert len(after_kill) % BATCH == 0 and 2 * BATCH <= len(after_kill) < 10  # whole batches
    with Study.open(study_dir) as study:
        assert {s.stage: s.status for s in status(study)}["recaption"].startswith("partial")
        assert study.config.recaption.model == str(model)  # --model was written to study.toml

    done = _cli("recaption", str(study_dir))  # the rerun: the model comes from study.toml
    assert done.returncode == 0, done.stderr
    assert f"{10 - len(after_kill)} captioned, {len(after_kill)} already done" in done.stdout
    stored = _recaptions(study_dir)
    ids = [r[1] for r in stored]
    assert len(ids) == len(set(ids)) == 10
    assert set(after_kill) <= set(stored)  # what the killed run committed is kept as it was
    assert {(r[0], r[3]) for r in stored} == {("recaption", str(model))}

    # the same captions as one uninterrupted run over the same files
    with Study.open(study_dir) as study:
        files = study.con.execute(
            "SELECT image_id, path FROM images WHERE source = 'training' ORDER BY image_id"
        ).fetchall()
        assert {s.stage: s.status for s in status(study)}["recaption"] == "done"
    captioner = load_captioner(str(model), CaptionSettings(max_new_tokens=6, batch_size=5))
    rows = []
    recaption(captioner, [CaptionInput(i, Path(p)) for i, p in files], sink=rows.append)
    whole = {r.image_id: r.caption for frame in rows for r in frame.itertuples()}
    assert {r[1]: r[2] for r in stored} == whole
    assert len(set(r[4] for r in stored)) == 1 and stored[0][4] == captioner.fingerprint


def test_variants_compare_the_recaptions_with_the_original_captions(study_dir, tiny_captioners):
    from collections import Counter

    from corpus_audit.methods.gender_text import IndicatorTagger, WordMatcher
    from corpus_audit.methods.lexicon import load_gender_terms

    if len(_recaptions(study_dir)) < 10:  # run alone: caption first
        model = str(tiny_captioners["blip"])
        assert _cli("recaption", str(study_dir), "--model", model).returncode == 0
    done = _cli("variants", str(study_dir))
    assert done.returncode == 0, done.stderr
    with Study.open(study_dir) as study:
        con = study.con
        pairs = con.execute(
            "SELECT c.caption_id, c.text, r.caption FROM recaptions r JOIN images i USING "
            "(image_id) JOIN captions c ON c.caption_id = i.caption_id ORDER BY c.caption_id"
        ).fetchall()
        got = con.execute(
            "SELECT variant, caption_id, text, source FROM caption_variants "
            "ORDER BY variant, caption_id"
        ).fetchall()
        trans = con.execute(
            "SELECT label_a, label_b, n_images FROM variant_transitions WHERE occupation IS NULL"
        ).fetchall()
        n_images = con.execute(
            "SELECT DISTINCT n_images FROM variant_differences WHERE occupation IS NULL "
            "AND metric <> 'mean_similarity'"
        ).fetchall()
    assert len(pairs) == 10
    assert [(v, c, t) for v, c, t, _ in got if v == "original"] == [
        ("original", cid, text) for cid, text, _ in pairs
    ]
    assert [(c, t) for v, c, t, _ in got if v == "recaption"] == [(c, r) for c, _, r in pairs]
    assert {s for v, _, _, s in got if v == "recaption"} == {f"recaption:{tiny_captioners['blip']}"}
    tagger = IndicatorTagger(WordMatcher(load_gender_terms()))
    a = tagger.tag([t for _, t, _ in pairs]).labels
    b = tagger.tag([r for _, _, r in pairs]).labels
    expected = Counter(zip(a, b, strict=True))
    assert {(x, y): n for x, y, n in trans if n} == dict(expected)
    assert n_images == [(10,)]


def test_no_model_and_changed_settings_are_one_line_errors(study_dir, tiny_captioners):
    toml = study_dir / "study.toml"
    good = toml.read_text()
    before = _recaptions(study_dir)
    try:
        toml.write_text(re.sub(r'(?m)^model = ".*"$', 'model = ""', good))
        done = _cli("recaption", str(study_dir))
        assert done.returncode == 2 and "recaption.model: no captioning model set" in done.stderr
        model = str(tiny_captioners["blip"])
        toml.write_text(good.replace("max_new_tokens = 6", "max_new_tokens = 7"))
        if before:
            done = _cli("recaption", str(study_dir), "--model", model)
            assert done.returncode == 2, done.stderr
            assert "variant 'recaption' holds captions of" in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
        done = _cli("recaption", str(study_dir), "--variant", "Bad Name")
        assert done.returncode == 2 and "is not a variant name" in done.stderr
    finally:
        toml.write_text(good)
    assert _recaptions(study_dir) == before


def test_the_text_rewrite_kind_writes_its_own_variant(study_dir, tmp_path):
    from corpus_audit.backends.captioners import CaptionInput, CaptionSettings, load_captioner
    from corpus_audit.backends.fakes.paraphrasers import random_paraphraser_model

    model = random_paraphraser_model(tmp_path / "t5", "t5")
    toml = study_dir / "study.toml"
    good = toml.read_text()
    try:
        done = _cli("recaption", str(study_dir), "--model", f"paraphrase:{model}", "--variant",
                    "rewrite")  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        toml.write_text(good)
    with Study.open(study_dir) as study:
        rows = study.con.execute(
            "SELECT r.image_id, r.caption, r.skip_reason, c.text, i.occupation, i.caption_id "
            "FROM recaptions r JOIN images i USING (image_id) JOIN captions c ON "
            "c.caption_id = i.caption_id WHERE r.variant = 'rewrite' ORDER BY r.image_id"
        ).fetchall()
        mentioned: dict[int, list[str]] = {}
        for cid, occ in study.con.execute("SELECT caption_id, occupation FROM mentions").fetchall():
            mentioned.setdefault(cid, []).append(occ)
        n_images = study.count("images", "source = 'training'")
    assert len(rows) == n_images == 10 and all(r[2] is None for r in rows)
    rewrite = load_captioner(f"paraphrase:{model}", CaptionSettings(max_new_tokens=6))
    keep = [r[4] or sorted(mentioned[r[5]])[0] for r in rows]  # the image's, else the first
    expected = rewrite.caption(
        [CaptionInput(r[0], text=r[3], occupation=occ) for r, occ in zip(rows, keep, strict=True)]
    )
    assert [r[1] for r in rows] == expected  # each caption rewritten from its own text


def test_a_column_variant_named_like_a_recaption_variant_is_an_error(study_dir, tiny_captioners):
    if not _recaptions(study_dir):  # run alone: caption first
        model = str(tiny_captioners["blip"])
        assert _cli("recaption", str(study_dir), "--model", model).returncode == 0
    toml = study_dir / "study.toml"
    good = toml.read_text()
    with Study.open(study_dir) as study:
        before = study.fingerprint("caption_variants")
    try:
        toml.write_text(good.replace("columns = {}", 'columns = {recaption = "caption2"}'))
        done = _cli("variants", str(study_dir))
    finally:
        toml.write_text(good)
    assert done.returncode == 2, done.stderr
    assert "recaption is also a recaption variant" in done.stderr
    with Study.open(study_dir) as study:
        assert study.fingerprint("caption_variants") == before
