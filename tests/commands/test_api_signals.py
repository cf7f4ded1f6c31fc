"""Issue 33 (High 3): Ctrl-C and SIGTERM end an API command within 5 s, whatever it waits for.

The CLI runs in a subprocess against a loopback server in this process that answers every
request ``429`` with ``Retry-After: 1e9`` (and a study whose longest backoff is a day, so the
client really waits): the ``llm_texts`` stage (chat client) and the ``generate`` stage (images
client). On the base commit 7afa816 the chat client slept 1e9 s and the images run went on
asking after SIGINT; both outlived the 5 s. Each test is bounded (< 15 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpus_audit.backends.fakes.chat_server import ChatServer
from corpus_audit.backends.fakes.images_server import ImagesServer
from corpus_audit.core.pipeline import init_study, stage_function

REPO = Path(__file__).resolve().parents[2]
DAY = 86_400.0


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "corpus_audit.cli", "-q", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )


def _stop_within(proc: subprocess.Popen, sig: int, seconds: float) -> tuple[int, str, float]:
    start = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {seconds} s after signal {sig}")
    return proc.returncode, err, time.monotonic() - start


def _llm_study(root: Path, url: str) -> Path:
    study = init_study(
        root,
        [],
        overrides={
            "llm": {
                "enabled": True,
                "models": ["openai:m"],
                "only_occupations": ["nurse", "pilot"],
                "n": 4,
                "max_texts": 8,
                "api_base": url,
                "api_key_env": "",
                "concurrency": 2,
                "max_retries": 10,
                "max_backoff_s": DAY,
            },
            "texts": {"source": "llm", "srbs": False},
            "lexicon": {"labor_stats": "builtin:more_of_the_same/occupations_en.csv"},
        },
    )
    study.close()
    return root


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_llm_texts_waiting_on_retry_after_ends_on_a_signal(tmp_path, sig, code):
    def busy(number, body):
        return 429, {"Retry-After": "1e9"}

    with ChatServer(lambda p, n, s, m: ["x"] * n, fail=busy) as server:
        root = _llm_study(tmp_path / "study", server.url)
        proc = _start("llm_texts", str(root))
        assert server.wait_for(2, 30), proc.communicate(timeout=5)
        time.sleep(0.3)  # the requests are answered: the client now waits
        returncode, err, took = _stop_within(proc, sig, 5)
        asked = server.count
        time.sleep(0.3)
        assert server.count == asked  # nothing asked after the signal
    assert returncode == code and took < 5
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_generate_on_an_images_api_ends_on_a_signal(tmp_path, sig, code):
    key_env = "CA_SIGNALS_TEST_API_KEY"
    with ImagesServer(lambda prompt: b"", retry_after="1e9", expected_key="k") as server:
        root = tmp_path / "study"
        root.mkdir()
        study = init_study(
            root,
            [],
            overrides={
                "pst": {"enabled": True, "kinds": ["single"]},
                "generate": {
                    "models": ["openai:dall-e-3"],
                    "images_per_prompt": 1,
                    "api_base": server.base_url,
                    "api_key_env": key_env,
                    "api_concurrency": 2,
                    "api_max_retries": 9,
                    "api_max_backoff": DAY,
                },
            },
        )
        stage_function("pst_prompts")(study, progress=False)
        prompts = [r[0] for r in study.con.execute("SELECT text FROM pst_prompts").fetchall()]
        study.close()
        server.plan.update({p: ["429"] * 100 for p in prompts})
        proc = _start("generate", str(root), env={key_env: "k"})
        deadline = time.monotonic() + 30
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.requests) >= 2, proc.communicate(timeout=5)
        time.sleep(0.3)
        returncode, err, took = _stop_within(proc, sig, 5)
        asked = len(server.requests)
        time.sleep(0.3)
        assert len(server.requests) == asked
    assert returncode == code and took < 5
    assert len(err.strip().splitlines()) == 1, err
