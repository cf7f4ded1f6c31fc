"""Text generators (corpus_audit/text_generators): the OpenAI-compatible client against a
chat-completions server on the loopback address (n per request, concurrency, retries that
honour Retry-After, refusals, token shares, the key), and the transformers backend on a tiny
random-weight causal LM built offline (chat template, batching, seeds)."""

from __future__ import annotations

import threading
import time
from email.utils import formatdate

import pytest

from corpus_audit.backends.fakes.chat_server import ChatServer
from corpus_audit.backends.text_generators import (
    TEXT_GENERATORS,
    SamplingSettings,
    TextRequest,
    generate_all,
    load_text_generator,
    split_spec,
)
from corpus_audit.backends.text_generators.openai_chat import parse_retry_after, split_tokens
from corpus_audit.core.config import config_from_dict
from corpus_audit.core.errors import ConfigError, ModelError

KEY = "sk-test-0123456789-do-not-print"


def echo(prompt: str, n: int, seed: int | None, model: str) -> list[str]:
    return [f"{prompt} / {model} / seed {seed} / choice {i} / she is kind" for i in range(n)]


def client(server: ChatServer, **options):
    defaults = dict(api_base=server.url, api_key_env="CA_TEST_API_KEY", backoff_s=0.01)
    defaults.update(options)
    settings = options.pop("settings", SamplingSettings(max_tokens=50))
    defaults.pop("settings", None)
    return load_text_generator("openai:test-model", settings, **defaults)


def test_specs_name_the_registered_backends():
    assert TEXT_GENERATORS.names() == ("transformers", "openai")
    assert split_spec("openai:gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert split_spec("transformers:/models/x:y") == ("transformers", "/models/x:y")
    for bad in ("gpt-4o-mini", "openai:", "vllm:x"):
        with pytest.raises(ConfigError, match=r"transformers:<model>, openai:<model>"):
            split_spec(bad)
    with pytest.raises(ConfigError, match="llm.models: 'mistral'"):
        config_from_dict({"llm": {"models": ["mistral"]}}, ".")
    with pytest.raises(ConfigError, match=r"llm.max_texts: 50 must be >= llm.n \(100\)"):
        config_from_dict({"llm": {"max_texts": 50}}, ".")


def test_n_is_split_per_request_and_answers_come_in_order():
    with ChatServer(echo) as server:
        gen = client(server, n_per_request=3, concurrency=2)
        out = generate_all(gen, [TextRequest("biography", 7, 100), TextRequest("persona", 2, 200)])
        assert [len(o) for o in out] == [7, 2]
        asked = sorted(
            (r.body["messages"][0]["content"], r.body["n"], r.body["seed"]) for r in server.log
        )
        assert asked == [
            ("biography", 1, 102), ("biography", 3, 100), ("biography", 3, 101), ("persona", 2, 200)
        ]  # fmt: skip
        assert [c.seed for c in out[0]] == [100] * 3 + [101] * 3 + [102]
        body = server.log[0].body
        assert body["max_tokens"] == 50 and body["temperature"] == 1.0 and body["top_p"] == 1.0
        assert body["messages"] == [{"role": "user", "content": body["messages"][0]["content"]}]
        assert out[1][1].text == "persona / test-model / seed 200 / choice 1 / she is kind"
        assert all(c.finish_reason == "stop" and c.refusal is None for o in out for c in o)


def test_a_server_that_ignores_n_is_asked_again_with_new_seeds():
    """Issue 33 (High 1): llama.cpp / Ollama answer one choice per request but honour seed. Each
    re-ask for the rest carries a seed never used before for the request, so every stored text
    is a new sample (on the base commit all four were 'one answer 9'), and the server's
    ignoring of n is reported."""
    with ChatServer(lambda p, n, s, m: [f"one answer {s}"]) as server:  # Ollama-like: 1 choice
        gen = client(server, n_per_request=3)
        out = generate_all(gen, [TextRequest("x", 7, 9), TextRequest("y", 2, 9)])
        texts = [c.text for c in out[0]]
        assert len(texts) == 7 and len(set(texts)) == 7
        seeds = [c.seed for c in out[0]]
        assert len(set(seeds)) == 7 and seeds[0] == 9 and seeds[3] == 10 and seeds[6] == 11
        assert len({c.text for c in out[1]}) == 2
        assert sorted(r.body["n"] for r in server.log if r.body["messages"][0]["content"] == "x") == [
            1, 1, 1, 2, 2, 3, 3
        ]  # fmt: skip
        assert gen.checks == {"short_answers": 5, "repeated_texts": 0}
        (line,) = gen.warnings()
        assert "ignores n" in line and "llm.n_per_request = 1" in line


def test_a_server_that_ignores_seed_is_reported():
    """Issue 33 (High 1): a server that answers the same text whatever the seed (FastChat
    ignores seed; a greedy server repeats itself) is reported, not stored without a word."""
    with ChatServer(lambda p, n, s, m: ["the same biography"]) as server:
        gen = client(server, n_per_request=1)
        (got,) = generate_all(gen, [TextRequest("x", 4, 1)])
        assert [c.seed for c in got] == [1, 2, 3, 4]
        assert gen.checks["repeated_texts"] == 3
        assert any("ignores seed" in w for w in gen.warnings())
        assert gen.describe()["server_checks"]["repeated_texts"] == 3


def test_tokens_are_shared_by_length_and_sum_to_the_usage():
    assert split_tokens(10, ["aaaa", "a", "aaaaa"]) == [4, 1, 5]
    assert sum(split_tokens(7, ["ab", "abc", "a"])) == 7
    assert split_tokens(None, ["a"]) == [None]
    with ChatServer(echo) as server:
        (got,) = generate_all(client(server), [TextRequest("biography", 3, 1)])
    words = sum(len(c.text.split()) for c in got)  # the server's usage: words
    assert sum(c.completion_tokens for c in got) == words
    assert [c.prompt_tokens for c in got] == [1, 0, 0]  # billed once per request


def test_refusals_are_recorded():
    def respond(prompt, n, seed, model):
        return ["REFUSE: I can't help with that", "He is a nurse."][:n]

    with ChatServer(respond) as server:
        (got,) = generate_all(client(server), [TextRequest("x", 2, 1)])
    assert (got[0].text, got[0].refusal, got[0].finish_reason) == (
        "",
        "I can't help with that",
        "content_filter",
    )
    assert got[1].refusal is None and got[1].text == "He is a nurse."


def test_429_waits_the_retry_after_and_500_backs_off():
    failures = {0: (429, {"Retry-After": "0.3"}), 2: (500, {}), 3: (503, {})}
    with ChatServer(echo, fail=lambda k, body: failures.get(k)) as server:
        gen = client(server, concurrency=1, backoff_s=0.02, max_backoff_s=0.5)
        (got,) = generate_all(gen, [TextRequest("x", 2, 1)])
        assert len(got) == 2 and [r.status for r in server.log] == [429, 200]
        assert server.log[1].at - server.log[0].at >= 0.3  # Retry-After honoured
        (got,) = generate_all(gen, [TextRequest("y", 1, 2)])
        assert [r.status for r in server.log[2:]] == [500, 503, 200]
        gaps = [server.log[k + 1].at - server.log[k].at for k in (2, 3)]
        # 0.02 * 2**k with jitter [0.5, 1]: 10-20 ms, then 20-40 ms (slack for a busy machine)
        assert 0.01 <= gaps[0] < 0.5 and 0.02 <= gaps[1] < 0.5
        assert gen.stats == {"http_requests": 5, "retries": 3, "retry_after_waits": 1}


def test_retry_after_as_an_http_date_and_garbage():
    now = time.time()
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("2") == 2.0 and parse_retry_after("0.5") == 0.5
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    assert parse_retry_after("inf") is None


def test_retries_are_bounded_and_errors_never_show_the_key(monkeypatch):
    monkeypatch.setenv("CA_TEST_API_KEY", KEY)
    with ChatServer(echo, fail=lambda k, body: (500, {})) as server:
        gen = client(server, max_retries=3, max_backoff_s=0.01)
        with pytest.raises(ModelError, match=r"gave up after 4 attempts \(HTTP 500") as err:
            generate_all(gen, [TextRequest("x", 1, 1)])
        assert server.count == 4
        assert {r.authorization for r in server.log} == {f"Bearer {KEY}"}  # the key was sent
    with ChatServer(echo, fail=lambda k, body: (401, {})) as server:
        gen = client(server)
        with pytest.raises(ModelError, match="HTTP 401: test failure 401") as err401:
            generate_all(gen, [TextRequest("x", 1, 1)])
        assert server.count == 1  # not retried
    for text in (str(err.value), str(err401.value), repr(gen), str(gen.describe())):
        assert KEY not in text
    assert gen.describe()["api_key_env"] == "CA_TEST_API_KEY" and gen.describe()["key_sent"]


def test_a_redirect_is_not_followed_with_the_key(monkeypatch):
    """A 302 would make urllib repeat the request elsewhere with the Authorization header:
    the client stops at the redirect with one line (the shared opener of api_client)."""
    monkeypatch.setenv("CA_TEST_API_KEY", KEY)
    with ChatServer(echo, fail=lambda k, body: (302, {"Location": "/v1/elsewhere"})) as server:
        with pytest.raises(ModelError, match="HTTP 302") as err:
            generate_all(client(server), [TextRequest("x", 1, 1)])
        assert server.count == 1 and KEY not in str(err.value)


def test_no_key_variable_sends_no_header(monkeypatch):
    monkeypatch.delenv("CA_TEST_API_KEY", raising=False)
    with ChatServer(echo) as server:
        generate_all(client(server), [TextRequest("x", 1, 1)])
        assert server.log[0].authorization is None


def test_timeouts_are_retried():
    slow = {0}

    class Slow(ChatServer):
        def _completion(self, body):
            if slow:
                slow.clear()
                time.sleep(0.6)
            return super()._completion(body)

    with Slow(echo) as server:
        gen = client(server, timeout_s=0.2, concurrency=1)
        (got,) = generate_all(gen, [TextRequest("x", 1, 1)])
        assert len(got) == 1 and gen.stats["retries"] == 1


def test_requests_run_concurrently_up_to_the_limit():
    inflight, peak, lock = [0], [0], threading.Lock()

    def respond(prompt, n, seed, model):
        with lock:
            inflight[0] += 1
            peak[0] = max(peak[0], inflight[0])
        time.sleep(0.1)
        with lock:
            inflight[0] -= 1
        return echo(prompt, n, seed, model)

    requests = [TextRequest(f"p{i}", 1, i) for i in range(8)]
    with ChatServer(respond) as server:
        start = time.monotonic()
        out = generate_all(client(server, concurrency=4), requests)
        took = time.monotonic() - start
    assert [o[0].text.split(" / ")[0] for o in out] == [f"p{i}" for i in range(8)]
    assert peak[0] == 4 and took < 0.75  # 0.2 s ideal; 8 x 0.1 s one at a time


# -- transformers ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from corpus_audit.backends.fakes.text_models import random_causal_lm

    root = tmp_path_factory.mktemp("lm")
    return {
        "llama": random_causal_lm(root / "llama", "llama"),
        "gpt2": random_causal_lm(root / "gpt2", "gpt2", chat_template=False),
    }


def test_transformers_chat_template_batches_and_seeds(tiny_lm):
    settings = SamplingSettings(max_tokens=8)
    gen = load_text_generator(f"transformers:{tiny_lm['llama']}", settings, batch_size=4)
    assert gen.chat and gen.prompt_text("Generate a persona of a nurse") == (
        "<|startoftext|>user: Generate a persona of a nurse\nassistant:"
    )
    requests = [TextRequest("Generate a persona of a nurse", 3, 11), TextRequest("hi", 2, 12)]
    first = generate_all(gen, requests)
    assert [len(o) for o in first] == [3, 2]
    assert [c.seed for o in first for c in o] == [
        11,
        11,
        11,
        11,
        13,
    ]  # batch of 4, then "hi" sample 1: 12 + 1
    assert all(
        0 < c.completion_tokens <= 8 and c.finish_reason in ("stop", "length")
        for o in first
        for c in o
    )
    assert all(c.finish_reason == "stop" or c.completion_tokens == 8 for o in first for c in o)
    again = generate_all(gen, requests)
    assert [c.text for o in again for c in o] == [c.text for o in first for c in o]
    other = generate_all(gen, [TextRequest("Generate a persona of a nurse", 3, 12)])
    assert [c.text for c in other[0]] != [c.text for c in first[0]]
    info = gen.describe()
    assert info["chat_template"] and info["model_class"] == "LlamaForCausalLM"
    assert info["device"] == "cpu" and info["dtype"] == "float32"
    gen.close()


def test_transformers_without_chat_template_reads_plain_text(tiny_lm):
    gen = load_text_generator(
        f"transformers:{tiny_lm['gpt2']}", SamplingSettings(max_tokens=5, temperature=0)
    )
    assert not gen.chat and gen.prompt_text("Describe a cook") == "Describe a cook\n"
    a, b = generate_all(
        gen, [TextRequest("Describe a cook", 2, 1), TextRequest("Describe a cook", 1, 2)]
    )
    assert a[0].text == a[1].text == b[0].text  # temperature 0: greedy, seed-free


def test_transformers_missing_model_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="cannot load it as a causal language model"):
        load_text_generator(f"transformers:{tmp_path / 'nothing'}", SamplingSettings())


def test_the_registry_and_config_import_no_model_library():
    import subprocess
    import sys

    code = (
        "import sys; import corpus_audit.backends.text_generators, corpus_audit.core.config;"
        " corpus_audit.core.config.config_from_dict({'llm': {'models': ['openai:m',"
        " 'transformers:/x']}}, '.');"
        " import corpus_audit.methods.texts.sampling, corpus_audit.stages.llm_texts;"
        " print(sorted(m for m in ('torch', 'transformers', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
