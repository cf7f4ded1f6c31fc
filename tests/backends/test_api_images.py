"""The ``openai:<model>`` generator backend against a loopback images server.

The server (:class:`corpus_audit.backends.fakes.images_server.ImagesServer`) runs in the test on
127.0.0.1 and answers with real photos (the woman and the man of tests/pst_fixtures.py side by
side, in the order the prompt names them); some requests get 429 + Retry-After, some 500, one a
content-policy 400, one an answer slower than the timeout. No test reaches the internet: every
study here points ``generate.api_base`` at the loopback server.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

import duckdb
import pytest
from PIL import Image
from pst_fixtures import side_by_side

from corpus_audit.backends.api_client import ApiClient, ApiRefusal, RetryPolicy, parse_retry_after
from corpus_audit.backends.fakes.images_server import ImagesServer
from corpus_audit.cli import main
from corpus_audit.core.errors import ApiError
from corpus_audit.core.pipeline import init_study, stage_function

KEY_ENV = "CORPUS_AUDIT_TEST_IMAGES_API_KEY"
KEY = "sk-test-0123456789-do-not-store"
REPO = Path(__file__).resolve().parents[2]


@cache
def _png(order: tuple[str, str]) -> bytes:
    import numpy as np
    from pst_fixtures import person

    if order[1] == "grey":  # one person beside grey, as tests/test_pst_study.py's singles
        pixels = np.concatenate([person(order[0]), np.full_like(person(order[0]), 128)], 1)
    else:
        pixels = side_by_side(*order)
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buf, format="PNG")
    return buf.getvalue()


def image_for(prompt: str) -> bytes:
    """The same picture for the same prompt, following the stereotypes: the nurse a woman, the
    carpenter a man, side by side in the prompt's order; one role alone beside grey."""
    low = prompt.lower()
    nurse, carpenter = low.find("nurse"), low.find("carpenter")
    if nurse < 0 or carpenter < 0:
        return _png(("woman" if nurse >= 0 else "man", "grey"))
    return _png(("woman", "man") if nurse < carpenter else ("man", "woman"))


def _roles(path: Path) -> Path:
    builtin = REPO / "corpus_audit/methods/lexicon/data/pst/roles_en.csv"
    lines = builtin.read_text(encoding="utf-8").splitlines()
    keep = [lines[0]] + [x for x in lines[1:] if x.split(",")[0] in ("carpenter", "nurse")]
    path.write_text("\n".join(keep) + "\n", encoding="utf-8")
    return path


def _study(root: Path, server: ImagesServer, **generate) -> Path:
    root.mkdir(parents=True)
    study = init_study(
        root,
        [],
        overrides={
            "pst": {
                "enabled": True,
                "roles": str(_roles(root / "roles.csv")),
                "kinds": ["single", "paired"],
            },
            "generate": {
                "models": ["openai:dall-e-3"],
                "images_per_prompt": 2,
                "api_base": server.base_url,
                "api_key_env": KEY_ENV,
                "api_timeout": 0.5,
                "api_backoff": 0.01,
                "api_max_backoff": 0.3,
                "api_concurrency": 3,
                "api_max_retries": 4,
                **generate,
            },
        },  # fmt: skip
    )
    stage_function("pst_prompts")(study, progress=False)
    study.close()
    for text in _prompts(root):  # the server's pictures made before it has to answer in time
        image_for(text)
    return root


def _rows(root: Path, query: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def _prompts(root: Path) -> list[str]:
    return [r[0] for r in _rows(root, "SELECT text FROM pst_prompts ORDER BY prompt_id")]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def test_retries_refusal_timeout_revised_prompt_cost(tmp_path, key, capsys):
    with ImagesServer(image_for, expected_key=key, retry_after="0.05", slow_seconds=1.5) as server:
        root = _study(tmp_path / "study", server)
        texts = _prompts(root)
        assert len(texts) == 6  # 2 single + 2 paired + 2 fair, 2 images each
        server.plan = {texts[0]: ["429", "ok", "429"], texts[1]: ["500", "500"],
                       texts[2]: ["refuse"], texts[3]: ["slow"]}  # fmt: skip
        assert main(["-q", "generate", str(root)]) == 0
        out = capsys.readouterr().out
        n_ok = sum(o == "ok" for o in server.outcomes())
        assert all(r.authorized for r in server.requests)
        assert server.outcomes(texts[3])[:2] == ["slow", "ok"]  # timed out, asked again
        assert server.outcomes(texts[0]).count("429") == 2

    api = _rows(
        root,
        "SELECT prompt_key, image_index, status, revised_prompt, error_code, error_message, "
        "cost_usd, size, attempts FROM api_images ORDER BY prompt_key, image_index",
    )
    assert len(api) == 12 and len({(k, i) for k, i, *_ in api}) == 12  # each image once
    refused = [r for r in api if r[2] == "refused"]
    assert len(refused) == 1 and refused[0][4] == "content_policy_violation"
    assert "safety system" in refused[0][5]
    ok = [r for r in api if r[2] == "ok"]
    assert n_ok == len(ok) == 11  # no image was asked for (and paid) twice
    assert all(r[3].endswith("Revised by the test server.") for r in ok)
    assert all(r[6] == pytest.approx(0.04) and r[7] == "1024x1024" for r in ok)
    assert max(r[8] for r in ok) >= 3  # the two 500s

    images = _rows(
        root,
        "SELECT i.image_id, i.path, i.seed, i.prompt_text, a.revised_prompt, a.sha256 "
        "FROM images i JOIN api_images a USING (image_id) ORDER BY i.image_id",
    )
    assert len(images) == 11
    for _iid, path, seed, text, revised, sha in images:
        data = (root / path).read_bytes()
        assert seed is None and revised.startswith(text)
        assert hashlib.sha256(data).hexdigest() == sha and data == image_for(text)
    assert "refused_by_api:content_policy_violation" in out

    # status: done, refused, cost; the key is nowhere in the study or the output
    assert main(["status", str(root)]) == 0
    status = capsys.readouterr().out
    assert (
        "11 image(s) from the API, 1 refused, $0.44" in status and "cannot be regenerated" in status
    )
    for f in root.rglob("*"):
        if f.is_file():
            assert key.encode() not in f.read_bytes(), f
    assert key not in out + status

    # a rerun asks for nothing (the refusal is not asked again); regenerate refuses
    before = len(server.requests)
    with ImagesServer(image_for, expected_key=key) as again:
        assert main(["-q", "config", "set", str(root), f"generate.api_base={again.base_url}"]) == 0
        assert main(["-q", "generate", str(root)]) == 0
        assert again.requests == [] and len(server.requests) == before
    capsys.readouterr()
    assert main(["-q", "regenerate", str(root), images[0][0]]) == 2
    assert "cannot be regenerated" in capsys.readouterr().err


def test_missing_key_is_one_line_and_nothing_is_sent(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with ImagesServer(image_for) as server:
        root = _study(tmp_path / "study", server)
        assert main(["-q", "generate", str(root)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and KEY_ENV in err
        assert server.requests == []
    assert _rows(root, "SELECT count(*) FROM images")[0][0] == 0


def test_a_wrong_key_stops_the_run_and_records_no_refusal(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, "sk-wrong")
    with ImagesServer(image_for, expected_key=KEY) as server:
        root = _study(tmp_path / "study", server, api_concurrency=2)
        assert main(["-q", "generate", str(root)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "401" in err and "invalid_api_key" in err
        assert "sk-wrong" not in err
        assert len(server.requests) <= 2  # stopped after the requests already in flight
    assert _rows(root, "SELECT count(*) FROM api_images")[0][0] == 0


def test_client_honours_retry_after_and_gives_up_after_bounded_attempts(key):
    slept: list[float] = []
    with ImagesServer(image_for, expected_key=key, retry_after="7",
                      plan={"p": ["429", "ok"], "q": ["500"] * 10}) as server:  # fmt: skip
        client = ApiClient(server.base_url, key_env=KEY_ENV, timeout=2,
                           policy=RetryPolicy(max_retries=2, backoff=0.5, max_backoff=60),
                           sleep=slept.append, seed=1)  # fmt: skip
        answer = client.post_json("images/generations", {"prompt": "p"})
        assert answer.attempts == 2 and slept == [7.0]  # Retry-After, not the backoff
        with pytest.raises(ApiError, match="gave up after 3 attempts: HTTP 500"):
            client.post_json("images/generations", {"prompt": "q"})
        assert server.outcomes("q") == ["500"] * 3  # bounded
        assert all(0 <= s <= 0.5 * 2 ** (i) for i, s in enumerate(slept[1:]))  # jittered backoff
        with pytest.raises(ApiRefusal) as info:
            server.plan["r"] = ["refuse"]
            client.post_json("images/generations", {"prompt": "r"})
        assert info.value.status == 400 and info.value.code == "content_policy_violation"
        server.plan["moved"] = ["redirect"]
        with pytest.raises(ApiError, match="redirect .* not followed"):
            client.post_json("images/generations", {"prompt": "moved"})
        assert KEY not in repr(client) and KEY not in json.dumps(client.describe())
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after("2.5") == 2.5


def _snapshot(root: Path) -> dict[str, tuple[str, str]]:
    rows = _rows(
        root,
        "SELECT i.image_id, i.path, a.revised_prompt FROM images i JOIN api_images a USING (image_id)",
    )
    return {iid: (hashlib.sha256((root / p).read_bytes()).hexdigest(), rev) for iid, p, rev in rows}


def test_kill_9_mid_run_then_rerun_gives_the_uninterrupted_images(tmp_path, key):
    with ImagesServer(image_for, expected_key=key, delay=0.05) as server:
        whole = _study(tmp_path / "whole", server, api_concurrency=2, api_timeout=10.0)
        assert main(["-q", "generate", str(whole)]) == 0
        killed = _study(tmp_path / "killed", server, api_concurrency=2, api_timeout=10.0)
        server.delay = 0.5  # 12 images 2 at a time: about 3 s, time to kill it after 4
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "corpus_audit.cli", "-q", "generate", str(killed)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        folder = killed / "images" / "generated"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if folder.exists() and sum(1 for f in folder.rglob("*.png")) >= 4:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        done_at_kill = _rows(killed, "SELECT count(*) FROM images")[0][0]
        assert 0 < done_at_kill < 12
        assert (
            _rows(killed, "SELECT count(*) FROM stage_unfinished WHERE stage = 'generate'")[0][0]
            == 1
        )
        requests_before = len(server.requests)
        assert main(["-q", "generate", str(killed)]) == 0
        asked_again = len(server.requests) - requests_before
    assert asked_again <= 12 - done_at_kill  # only what had no row
    assert _snapshot(killed) == _snapshot(whole) and len(_snapshot(whole)) == 12
    assert _rows(killed, "SELECT count(*) FROM stage_unfinished")[0][0] == 0


def test_faircritic_calls_the_api_backend_again(tmp_path, key, capsys):
    """FairCritic needs a generator it can call again: the API backend is one."""
    from pst_fixtures import LABEL_THRESHOLD

    with ImagesServer(image_for, expected_key=key) as server:
        root = _study(tmp_path / "study", server)
        paired = _rows(root, "SELECT prompt_id, text FROM pst_prompts WHERE kind = 'paired' "
                             "AND variant = 'plain' ORDER BY 1 LIMIT 1")[0]  # fmt: skip
        settings = ["pst.faircritic_rounds=1", "pst.faircritic_images=2",
                    f'pst.faircritic_prompts=["{paired[0]}"]', "label.face_model=full_range",
                    f"label.threshold={LABEL_THRESHOLD}"]  # fmt: skip
        assert main(["-q", "config", "set", str(root), *settings]) == 0
        assert main(["-q", "faircritic", str(root)]) == 0
        asked = [r.prompt for r in server.requests]
    rounds = _rows(root, "SELECT model_id, round, prompt_id, n_images, n_kept FROM pst_rounds")
    assert rounds == [("openai:dall-e-3", 1, paired[0], 2, 2)]
    assert asked == [paired[1], paired[1]]
    assert key not in capsys.readouterr().out


def test_pst_study_on_the_api_runs_to_the_report(tmp_path, key, capsys):
    """`corpus-audit run` on a PST study whose generator is the API: every person follows its
    role's stereotype in the server's pictures, so every Stereotype Score is 100."""
    from pst_fixtures import LABEL_THRESHOLD

    with ImagesServer(image_for, expected_key=key) as server:
        root = _study(tmp_path / "study", server, api_timeout=10.0)
        settings = ["pst.faircritic_rounds=1", "pst.faircritic_images=2",
                    "label.face_model=full_range", f"label.threshold={LABEL_THRESHOLD}",
                    "analysis.bootstrap=100"]  # fmt: skip
        assert main(["-q", "config", "set", str(root), *settings]) == 0
        assert main(["-q", "run", str(root)]) == 0
    out = capsys.readouterr().out
    assert "[pst_report] done" in out and key not in out
    people = _rows(root, "SELECT perceived, stereotype FROM pst_people")
    assert len(people) == 2 * 2 + 4 * 2 * 2  # singles: one person; pairs: two
    assert all(p == s for p, s in people)
    scores = _rows(
        root,
        "SELECT kind, variant, ss FROM pst_scores WHERE side = 'image' AND scope = 'overall' "
        "AND group_name = 'all' ORDER BY 1, 2",
    )
    assert scores == [
        ("paired", "fair", 100.0),
        ("paired", "plain", 100.0),
        ("single", "plain", 100.0),
    ]
    assert _rows(root, "SELECT count(*) FROM pst_rounds")[0][0] >= 1
    assert (root / "report" / "pst.html").is_file()


def test_an_answer_over_images_max_pixels_is_refused_before_decoding(tmp_path, key, capsys):
    """Issue 33 (round 4, open): API answers were bounded by 4 x the pixels of
    ``generate.api_size`` only (Pillow's guard when the size is not WxH), never by
    ``images.max_pixels``: a 9000 x 9000 PNG (10 KB on the wire) was decoded in full. Its header
    is now checked against ``images.max_pixels`` first; the run stops with one line and
    nothing of the answer is stored."""
    buf = io.BytesIO()
    Image.new("1", (9000, 9000)).save(buf, format="PNG")  # 81 M pixels, ~10 KB
    big = buf.getvalue()
    with ImagesServer(lambda prompt: big, expected_key=key) as server:
        root = _study(tmp_path / "study", server, api_size="auto", api_concurrency=1)
        assert main(["-q", "config", "set", str(root), "images.max_pixels=4000000"]) == 0
        capsys.readouterr()
        start = time.monotonic()
        assert main(["-q", "generate", str(root)]) == 2
        seconds = time.monotonic() - start
        assert len(server.requests) == 1  # a bad answer is not asked for again
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "9000x9000 = 81000000 > max_pixels 4000000" in err and "images.max_pixels" in err, err
    assert _rows(root, "SELECT count(*) FROM images")[0][0] == 0
    assert _rows(root, "SELECT count(*) FROM api_images")[0][0] == 0
    assert seconds < 30
