"""The recaption driver (corpus_audit.stages.recaption.driver): real photo files and broken files
through the safe decoder and a tiny BLIP, batches to a sink, resuming from a done set, a
failing sink, the text-only kind, and kill -9 of a run writing to a DuckDB table (the rerun
writes every image exactly once)."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import test_recaption_models as trm
from image_fixtures import bad_files, encode, lfw, photo

from corpus_audit.backends.captioners import CaptionInput, CaptionSettings, load_captioner
from corpus_audit.core.imagefile import read_rgb
from corpus_audit.stages.recaption.driver import RECAPTION_COLUMNS, recaption

REPO = Path(__file__).resolve().parents[2]
tiny_captioners = trm.tiny_captioners  # the session fixture: both tiny models
one_torch_thread = trm.one_torch_thread  # autouse: tiny models run faster on one thread
SETTINGS = CaptionSettings(max_new_tokens=6, batch_size=3)


@pytest.fixture(scope="module")
def blip(tiny_captioners):
    return load_captioner(str(tiny_captioners["blip"]), SETTINGS)


@pytest.fixture(scope="module")
def image_files(tmp_path_factory) -> dict[str, Path]:
    """Real photos as JPEG/PNG files and the broken files of image_fixtures.bad_files()."""
    folder = tmp_path_factory.mktemp("images")
    files = {
        "astronaut.jpg": encode(photo("astronaut"), "JPEG", quality=90),
        "camera.png": encode(photo("camera"), "PNG"),
        "grace.jpg": encode(photo("grace"), "JPEG", quality=90),
        **bad_files(),
    }
    out = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        out[name] = folder / name
    return out


UNREADABLE = {"zero_byte.jpg", "truncated.jpg", "bomb.png", "not_an_image.jpg"}


class ListSink:
    """Keeps every batch it is given."""

    def __init__(self, fail_on: int | None = None):
        self.batches: list[pd.DataFrame] = []
        self.fail_on = fail_on

    def __call__(self, frame: pd.DataFrame) -> None:
        if self.fail_on is not None and len(self.batches) + 1 == self.fail_on:
            raise OSError("disk full")
        self.batches.append(frame)

    @property
    def rows(self) -> pd.DataFrame:
        return pd.concat(self.batches, ignore_index=True)


def test_files_are_decoded_captioned_or_skipped_in_batches(blip, image_files):
    names = sorted(image_files)
    items = [CaptionInput(n, image_files[n]) for n in names]
    sink = ListSink()
    summary = recaption(blip, items, sink=sink, max_pixels=50_000_000)
    assert [len(b) for b in sink.batches] == [3, 3, 3, 2]  # 11 files, batches of 3
    rows = sink.rows
    assert tuple(rows.columns) == RECAPTION_COLUMNS
    assert rows["image_id"].tolist() == names  # input order
    skipped = rows[rows["skip_reason"].notna()]
    assert set(skipped["image_id"]) == UNREADABLE
    assert set(skipped["skip_reason"]) == {"unreadable"} and skipped["caption"].isna().all()
    details = dict(zip(skipped["image_id"], skipped["detail"], strict=True))
    assert details["zero_byte.jpg"] == "empty file (0 bytes)"
    assert details["truncated.jpg"].startswith("truncated image data")
    assert details["bomb.png"].startswith("too many pixels")
    assert details["not_an_image.jpg"] == "not a recognised image format"
    good = rows[rows["skip_reason"].isna()]
    assert (good["detail"] == "").all() and good["caption"].map(bool).all()
    # each caption is the captioner's caption of that file decoded alone
    for name, caption in zip(good["image_id"], good["caption"], strict=True):
        alone = blip.caption([CaptionInput(name, read_rgb(image_files[name]))])
        assert alone == [caption], name
    assert set(rows["model_id"]) == {blip.model_id}
    assert set(rows["settings_fingerprint"]) == {blip.fingerprint}
    assert (summary.items, summary.captioned, summary.unreadable, summary.batches) == (11, 7, 4, 4)
    assert summary.written == 11 and summary.settings["fingerprint"] == blip.fingerprint
    assert summary.model_seconds <= summary.seconds


def test_resume_skips_done_keys_and_duplicates(blip, image_files):
    names = ["astronaut.jpg", "camera.png", "grace.jpg", "truncated.jpg"]
    first = ListSink()
    recaption(blip, [CaptionInput(n, image_files[n]) for n in names[:2]], sink=first)
    done = set(first.rows["image_id"])
    again = ListSink()
    items = [CaptionInput(n, image_files[n].read_bytes()) for n in names + names[::-1]]
    summary = recaption(blip, iter(items), sink=again, done=done, batch_size=2, decode_threads=0)
    assert again.rows["image_id"].tolist() == ["grace.jpg", "truncated.jpg"]  # bytes decode too
    assert (summary.items, summary.already_done, summary.duplicates) == (8, 4, 2)
    assert summary.written == 2
    nothing = ListSink()
    all_done = done | set(again.rows["image_id"])
    items = [CaptionInput(n, image_files[n]) for n in names]
    assert recaption(blip, items, sink=nothing, done=all_done).batches == 0
    assert nothing.batches == []
    with pytest.raises(ValueError, match="no key"):
        recaption(blip, [CaptionInput(None, image_files[names[0]])], sink=ListSink())
    with pytest.raises(ValueError, match="batch_size: 0"):
        recaption(blip, [], sink=ListSink(), batch_size=0)
    with pytest.raises(TypeError, match="items must be CaptionInput, got tuple"):
        recaption(blip, [("a", image_files[names[0]])], sink=ListSink())
    missing = ListSink()
    recaption(blip, [CaptionInput("gone", image_files[names[0]].parent / "gone.jpg")], sink=missing,
              progress=True)  # fmt: skip
    assert missing.rows.loc[0, "detail"] == "file not found"


def test_a_failing_sink_stops_the_run_and_the_rerun_completes(blip):
    arrays = [photo("astronaut"), photo("camera"), *lfw("faces", 64)[:5]]
    items = [CaptionInput(i, a) for i, a in enumerate(arrays)]  # decoded arrays pass through
    broken = ListSink(fail_on=2)
    with pytest.raises(OSError, match="disk full"):
        recaption(blip, items, sink=broken)
    assert broken.rows["image_id"].tolist() == [0, 1, 2]  # the first batch only
    rest = ListSink()
    summary = recaption(blip, items, sink=rest, done=set(broken.rows["image_id"]))
    assert rest.rows["image_id"].tolist() == [3, 4, 5, 6] and summary.already_done == 3
    whole = ListSink()
    recaption(blip, items, sink=whole)
    pd.testing.assert_frame_equal(
        pd.concat([broken.rows, rest.rows], ignore_index=True), whole.rows
    )


def test_text_kind_through_the_driver(tmp_path):
    from corpus_audit.backends.fakes.paraphrasers import random_paraphraser_model

    model = random_paraphraser_model(tmp_path / "t5", "t5")
    rewrite = load_captioner(f"paraphrase:{model}", CaptionSettings(max_new_tokens=8))
    items = [
        CaptionInput(10, text="A nurse at work", occupation="nurse"),
        CaptionInput(11, text=None, occupation="nurse"),
        CaptionInput(12, text="Chef in a kitchen", occupation="chef"),
    ]
    sink = ListSink()
    summary = recaption(rewrite, items, sink=sink)
    rows = sink.rows
    assert rows["skip_reason"].fillna("-").tolist() == ["-", "no_text", "-"]
    assert rows["caption"].isna().tolist() == [False, True, False]
    assert (summary.captioned, summary.no_text) == (2, 1)
    assert rows.loc[0, "caption"] == rewrite.caption([items[0]])[0]


# -- kill -9 -----------------------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import duckdb
    import torch

    from corpus_audit.stages.recaption.driver import recaption
    from corpus_audit.backends.captioners import CaptionInput, CaptionSettings, load_captioner

    model, db, folder = sys.argv[1:4]
    torch.set_num_threads(1)
    con = duckdb.connect(db)
    con.execute(
        "CREATE TABLE IF NOT EXISTS recaptions (image_id VARCHAR, caption VARCHAR, "
        "skip_reason VARCHAR, detail VARCHAR, model_id VARCHAR, settings_fingerprint VARCHAR)"
    )
    done = {r[0] for r in con.execute("SELECT image_id FROM recaptions").fetchall()}


    def sink(frame):
        con.execute("BEGIN TRANSACTION")
        con.register("batch", frame)
        con.execute("INSERT INTO recaptions SELECT * FROM batch")
        con.unregister("batch")
        con.execute("COMMIT")
        print("committed", len(frame), flush=True)


    captioner = load_captioner(model, CaptionSettings(max_new_tokens=6, batch_size=4))
    items = [CaptionInput(p.name, p) for p in sorted(Path(folder).iterdir())]
    summary = recaption(captioner, items, sink=sink, done=done)
    print("finished", summary.captioned, summary.already_done, flush=True)
    con.close()
    """
)


def _run_child(script: Path, args: list[str], kill_after: int) -> tuple[int, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if sum(x.startswith("committed") for x in lines) == kill_after:
            os.kill(proc.pid, signal.SIGKILL)  # while the next batch is in flight
            break
    return proc.wait(timeout=120), lines


def test_kill_9_then_rerun_writes_every_image_once(
    tiny_captioners,
    tmp_path,
    monkeypatch,
    capsys,
):
    folder = tmp_path / "faces"
    folder.mkdir()
    for i, face in enumerate(lfw("faces", 64)[:22]):
        (folder / f"face{i:02d}.jpg").write_bytes(encode(face, "JPEG", quality=90))
    (folder / "zz_broken.jpg").write_bytes(b"")  # 23 files: 5 batches of 4 + 3
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    db = tmp_path / "recaptions.duckdb"
    args = [str(tiny_captioners["blip"]), str(db), str(folder)]

    code, lines = _run_child(script, args, kill_after=2)
    assert code == -signal.SIGKILL
    with duckdb.connect(str(db)) as con:
        after_kill = con.execute("SELECT count(*) FROM recaptions").fetchone()[0]
    assert after_kill % 4 == 0 and 8 <= after_kill < 23  # whole batches only

    # the rerun: the same script, in this process (no second start of torch)
    monkeypatch.setattr(sys, "argv", [str(script), *args])
    runpy.run_path(str(script), run_name="__main__")
    lines = capsys.readouterr().out.strip().splitlines()
    captioned, already = map(int, lines[-1].split()[1:])
    assert already == after_kill and captioned + already == 22
    with duckdb.connect(str(db)) as con:
        stored = con.execute(
            "SELECT image_id, caption, skip_reason FROM recaptions ORDER BY image_id"
        ).df()
        dupes = con.execute(
            "SELECT count(*) - count(DISTINCT image_id) FROM recaptions"
        ).fetchone()[0]
    assert dupes == 0 and len(stored) == 23
    assert stored["image_id"].tolist() == sorted(p.name for p in folder.iterdir())
    # the same captions as one uninterrupted run in this process
    captioner = load_captioner(str(tiny_captioners["blip"]), CaptionSettings(max_new_tokens=6))
    whole = ListSink()
    items = [CaptionInput(p.name, p) for p in sorted(folder.iterdir())]
    recaption(captioner, items, sink=whole)
    assert whole.rows["caption"].tolist() == stored["caption"].tolist()
    assert stored["skip_reason"].tolist()[-1] == "unreadable"
    assert np.all(stored["skip_reason"].isna().to_numpy()[:-1])
