"""The OpenAI-compatible chat client (``openai:<model>``) and the ``llm_texts`` stage against
REAL OpenAI-compatible servers on the loopback address, each over a tiny random-weight Llama
built offline (issue 33: real servers differ from the fakes and from each other).

- ``transformers serve`` (transformers 5, in the project's environment; always run): started
  by a module fixture, unpinned, serving two model folders: ``sampling`` (its
  ``generation_config.json`` says ``do_sample = true``, as instruct checkpoints do) and
  ``greedy`` (transformers' default: ``do_sample = false``).
- FastChat 0.2.36 (controller, model worker, OpenAI API server) in its own environment
  (``scripts/fastchat_venv.py``): run when ``CORPUS_AUDIT_FASTCHAT_PYTHON`` names that
  environment's python, as ``make test`` does (it builds the environment once).

What each server honours is in docs/who_vs_how.md (the servers table); the assertions below
are those rows. Every wait is bounded: the server's start (a deadline, then its log's tail),
each request (``timeout_s``) and each test (``pytest.mark.timeout``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from real_servers import Servers, free_port, get_json
from test_api_hostile import _answers

from corpus_audit.backends.text_generators import (
    SamplingSettings,
    TextRequest,
    generate_all,
    load_text_generator,
)
from corpus_audit.core.errors import ModelError

FASTCHAT_PYTHON_ENV = "CORPUS_AUDIT_FASTCHAT_PYTHON"
MAX_TOKENS = 8
NO_KEY = "CA_REAL_SERVER_TEST_API_KEY"  # never set: no Authorization header


def client(base: str, model: str | Path, **options):
    """The real client, fast to give up (one retry) and bounded per request."""
    settings = options.pop("settings", SamplingSettings(max_tokens=MAX_TOKENS))
    defaults = dict(
        api_base=base, api_key_env=NO_KEY, backoff_s=0.01, max_backoff_s=0.05, max_retries=1
    )
    defaults.update(timeout_s=30.0, concurrency=1)
    defaults.update(options)
    return load_text_generator(f"openai:{model}", settings, **defaults)


def texts(out) -> list[list[str]]:
    return [[c.text for c in request] for request in out]


def llm_study(root: Path, models: list[str], base: str) -> Path:
    """An LLM study at ``root``: ``models`` at ``base``, the nurse only, N = 2 (2 prompts x 4
    genders = 8 pairs; gibberish names no gender, so the unspecified pairs are abandoned after
    their first batch: one batch of 2 per pair), short texts, one request at a time."""
    from corpus_audit.core.pipeline import init_study

    init_study(
        root,
        [],
        overrides={
            "llm": {
                "enabled": True,
                "models": models,
                "only_occupations": ["nurse"],
                "n": 2,
                "max_texts": 4,
                "max_tokens": MAX_TOKENS,
                "api_base": base,
                "api_key_env": NO_KEY,
                "n_per_request": 2,
                "concurrency": 1,
                "timeout_s": 30.0,
                "backoff_s": 0.01,
                "max_backoff_s": 0.05,
                "max_retries": 1,
            },
            "texts": {"source": "llm", "srbs": False},
            "lexicon": {"labor_stats": "builtin:more_of_the_same/occupations_en.csv"},
        },
    ).close()
    return root


# -- transformers serve ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def served_models(tmp_path_factory) -> dict[str, Path]:
    from transformers import GenerationConfig

    from corpus_audit.backends.fakes.text_models import random_causal_lm

    root = tmp_path_factory.mktemp("served")
    sampling = random_causal_lm(root / "sampling", "llama")
    config = GenerationConfig.from_pretrained(sampling)
    config.do_sample = True
    config.save_pretrained(sampling)
    return {"sampling": sampling, "greedy": random_causal_lm(root / "greedy", "llama", seed=1)}


@pytest.fixture(scope="module")
def transformers_serve(served_models, tmp_path_factory):
    """``http://127.0.0.1:PORT/v1`` of ``transformers serve`` (no model pinned: it loads the
    folder a request names); stopped after the module."""
    port = free_port()
    with Servers(tmp_path_factory.mktemp("serve_logs")) as servers:
        servers.start(
            "transformers-serve",
            [sys.executable, "-m", "transformers.cli.transformers", "serve",
             "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        )  # fmt: skip
        root = f"http://127.0.0.1:{port}"
        servers.wait_for("transformers serve", lambda: get_json(f"{root}/health") is not None, 90)
        yield f"{root}/v1"


@pytest.mark.timeout(120)
def test_transformers_serve_ignores_n_and_honours_seed_one_request_at_a_time(
    transformers_serve, served_models
):
    """n: one choice whatever n (the client asks again with new seeds and says so); seed:
    honoured when requests come one at a time (it seeds torch's global generator, shared by
    concurrent requests); usage: the prompt's and the answer's tokens of each request."""
    model = served_models["sampling"]
    gen = client(transformers_serve, model, n_per_request=3)
    answer = gen.post(gen._body("Describe a nurse", 3, 5))
    assert len(answer["choices"]) == 1  # n = 3 asked
    requests = [TextRequest("Describe a nurse", 3, 7), TextRequest("Describe a pilot", 2, 7)]
    first = generate_all(gen, requests)
    assert [[c.seed for c in r] for r in first] == [[7, 9, 10], [7, 9]]
    assert all(t.strip() for r in texts(first) for t in r)
    assert [len(set(r)) for r in texts(first)] == [3, 2]  # each re-ask a new sample
    assert gen.checks == {"short_answers": 3, "repeated_texts": 0}
    (line,) = gen.warnings()
    assert "ignores n" in line and "llm.n_per_request = 1" in line
    again = generate_all(client(transformers_serve, model, n_per_request=3), requests)
    assert texts(again) == texts(first)  # same seeds, one request at a time: same texts
    other = generate_all(gen, [TextRequest("Describe a nurse", 1, 8)])
    assert texts(other)[0][0] not in texts(first)[0]
    prompt_tokens = {c.prompt_tokens for c in first[0]}
    assert len(prompt_tokens) == 1 and prompt_tokens.pop() > 3  # one choice per request
    for c in (c for r in first for c in r):
        assert 0 < c.completion_tokens <= MAX_TOKENS and c.refusal is None
        assert (c.finish_reason == "length") == (c.completion_tokens == MAX_TOKENS)


@pytest.mark.timeout(120)
def test_transformers_serve_samples_greedily_unless_the_model_says_do_sample(
    transformers_serve, served_models
):
    """temperature 1 does not turn sampling on: a model whose generation config does not set
    do_sample answers the same text for every seed, and temperature 0 does the same on any
    model; the client counts the copies and warns (they are stored, as drawn)."""
    for model, settings in (
        (served_models["greedy"], SamplingSettings(max_tokens=MAX_TOKENS)),
        (served_models["sampling"], SamplingSettings(max_tokens=MAX_TOKENS, temperature=0)),
    ):
        gen = client(transformers_serve, model, n_per_request=1, settings=settings)
        (got,) = texts(generate_all(gen, [TextRequest("Describe a cook", 3, 1)]))
        assert len(got) == 3 and len(set(got)) == 1 and got[0].strip()
        assert gen.checks == {"short_answers": 0, "repeated_texts": 2}
        (line,) = gen.warnings()
        assert "ignores seed, or samples greedily" in line


@pytest.mark.timeout(120)
def test_transformers_serve_errors_are_one_line(transformers_serve, served_models):
    """A model the server cannot load is a bare ``500 Internal Server Error`` (retried like a
    passing failure): the final line says the model is not among those the server lists.
    FastAPI's ``{"detail": ...}`` error shape is read (not printed as raw JSON)."""
    gen = client(transformers_serve, "no-such-model")
    with pytest.raises(ModelError) as caught:
        generate_all(gen, [TextRequest("x", 1, 1)])
    message = str(caught.value)
    assert "\n" not in message and "gave up after 2 attempts (HTTP 500" in message
    assert "/models does not list 'no-such-model' (it lists: " in message
    assert gen.stats["retries"] == 1
    good = client(transformers_serve, served_models["sampling"])
    with pytest.raises(ModelError) as caught:
        good.post({**good._body("x", 1, 1), "bogus": 1})
    assert "HTTP 422: Unexpected fields in the request: {'bogus'}" in str(caught.value)
    assert "detail" not in str(caught.value)


@pytest.mark.timeout(180)
def test_llm_texts_over_transformers_serve_stores_distinct_texts_and_reports_the_server(
    transformers_serve, served_models, tmp_path, capsys
):
    """The stage over the real server: the sampling model's batches hold distinct texts (the
    re-asks carry new seeds) and the stage says the server ignores n; the greedy model's
    copies are stored and reported."""
    from corpus_audit.cli import main
    from corpus_audit.core.store import Study

    sampling, greedy = (f"openai:{served_models[k]}" for k in ("sampling", "greedy"))
    root = tmp_path / "study"
    llm_study(root, [sampling, greedy], transformers_serve)
    assert main(["llm_texts", str(root), "-q"]) == 0
    err = capsys.readouterr().err
    with Study.open(root) as study:
        rows = study.con.execute(
            "SELECT model, count(*), count(DISTINCT text), count(DISTINCT (batch, seed)), "
            "count(DISTINCT seed) FROM llm_texts GROUP BY model ORDER BY model"
        ).fetchall()
        per_batch = study.con.execute(
            "SELECT model, bool_and(n = distinct_texts) FROM (SELECT model, count(*) n, "
            "count(DISTINCT text) distinct_texts FROM llm_texts GROUP BY model, occupation, "
            "prompt_id, gender, batch) GROUP BY model ORDER BY model"
        ).fetchall()
    # 2 prompts x 4 genders, one batch of 2 each (gibberish names no gender: the unspecified
    # pairs are abandoned after their first batch)
    by_model = {r[0]: r[1:] for r in rows}
    assert by_model[sampling][0] == by_model[greedy][0] == 16
    assert by_model[sampling][1] == 16  # every stored text is its own sample
    assert by_model[greedy][1] <= 8  # one text per prompt (8 prompts), whatever the seed
    assert dict(per_batch) == {sampling: True, greedy: False}
    assert by_model[sampling][3] == 16  # one seed per text: the re-asks carry new seeds
    warned = [line for line in err.splitlines() if line.startswith("warning:")]
    assert any(sampling in w and "ignores n" in w for w in warned)
    assert any(greedy in w and "samples greedily" in w for w in warned)
    assert not any(sampling in w and "greedily" in w for w in warned)


# -- FastChat (make test) --------------------------------------------------------------------
@pytest.fixture(scope="module")
def fastchat(tmp_path_factory):
    """``(http://127.0.0.1:PORT/v1, model name)`` of FastChat's OpenAI API server, with its
    controller and one model worker on a tiny random Llama saved by FastChat's transformers
    4.x (its worker loads the slow tokenizer files)."""
    python = os.environ.get(FASTCHAT_PYTHON_ENV)
    if not python:
        pytest.skip(
            f"FastChat runs in its own environment: build it with scripts/fastchat_venv.py "
            f"(or make fastchat-venv) and set {FASTCHAT_PYTHON_ENV} to its python"
        )
    if not Path(python).is_file():
        pytest.fail(f"{FASTCHAT_PYTHON_ENV}={python}: no such file")
    root = tmp_path_factory.mktemp("fastchat")
    repo = Path(__file__).resolve().parents[2]
    ports = [free_port() for _ in range(3)]
    controller, worker, api = (f"http://127.0.0.1:{p}" for p in ports)
    name = "tiny-llama"
    with Servers(root / "logs", env={"PYTHONPATH": str(repo)}) as servers:
        servers.start(
            "build-model",
            [python, "-c", "import sys; from corpus_audit.backends.fakes.text_models import "
             "random_causal_lm; random_causal_lm(sys.argv[1], 'llama')", str(root / "llama")],
        )  # fmt: skip
        build = servers.procs[-1][1]
        assert build.wait(120) == 0, servers.tails()
        servers.procs.pop()
        serve = [python, "-m"]
        servers.start(
            "controller",
            [*serve, "fastchat.serve.controller", "--host", "127.0.0.1", "--port", str(ports[0])],
        )
        servers.wait_for("FastChat controller", lambda: _posts(controller), 60)
        servers.start(
            "model-worker",
            [*serve, "fastchat.serve.model_worker", "--model-path", str(root / "llama"),
             "--model-names", name, "--device", "cpu", "--host", "127.0.0.1",
             "--port", str(ports[1]), "--worker-address", worker,
             "--controller-address", controller],
        )  # fmt: skip
        servers.start(
            "openai-api-server",
            [*serve, "fastchat.serve.openai_api_server", "--host", "127.0.0.1",
             "--port", str(ports[2]), "--controller-address", controller],
        )  # fmt: skip

        def listed() -> bool:
            models = get_json(f"{api}/v1/models")
            return isinstance(models, dict) and name in {m.get("id") for m in models["data"]}

        servers.wait_for("FastChat OpenAI API server", listed, 120)
        yield f"{api}/v1", name


def _posts(url: str) -> bool:
    """Whether ``url`` answers HTTP at all (FastChat's controller has no GET route)."""
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 - loopback
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


@pytest.mark.timeout(180)
def test_fastchat_honours_n_ignores_seed_and_sums_prompt_tokens(fastchat):
    """n: honoured (one request, n choices); seed: ignored (the same seed twice gives new
    texts, though each text records the seed it was asked with); usage: ``prompt_tokens`` is
    the prompt's count times n; an unknown model: HTTP 400 in FastChat's error shape."""
    base, name = fastchat
    gen = client(base, name, n_per_request=3)
    single = gen.post(gen._body("Describe a nurse", 1, 5))["usage"]["prompt_tokens"]
    answer = gen.post(gen._body("Describe a nurse", 3, 5))
    assert len(answer["choices"]) == 3
    assert answer["usage"]["prompt_tokens"] == 3 * single  # summed over the choices
    first = generate_all(gen, [TextRequest("Describe a nurse", 3, 7)])
    again = generate_all(gen, [TextRequest("Describe a nurse", 3, 7)])
    assert [c.seed for c in first[0]] == [7, 7, 7]
    assert len(set(texts(first)[0])) == 3 and not set(texts(first)[0]) & set(texts(again)[0])
    assert first[0][0].prompt_tokens == 3 * single and first[0][1].prompt_tokens == 0
    assert gen.checks == {"short_answers": 0, "repeated_texts": 0} and gen.warnings() == []
    with pytest.raises(ModelError, match=r"HTTP 400: Only tiny-llama allowed now, your model"):
        generate_all(client(base, "no-such-model"), [TextRequest("x", 1, 1)])


@pytest.mark.timeout(180)
def test_llm_texts_over_fastchat_needs_no_reask_and_stores_its_prompt_tokens(
    fastchat, tmp_path, capsys
):
    """The stage over FastChat: each batch is one request (n honoured: no warning) of distinct
    texts; each batch's first text carries FastChat's prompt_tokens, n times the prompt's."""
    from corpus_audit.cli import main
    from corpus_audit.core.store import Study

    base, name = fastchat
    root = llm_study(tmp_path / "study", [f"openai:{name}"], base)
    assert main(["llm_texts", str(root), "-q"]) == 0
    assert "warning:" not in capsys.readouterr().err
    with Study.open(root) as study:
        batches = study.con.execute(
            "SELECT prompt, list(text ORDER BY position), list(prompt_tokens ORDER BY position), "
            "count(DISTINCT seed) FROM llm_texts GROUP BY occupation, prompt_id, gender, batch, "
            "prompt ORDER BY prompt"
        ).fetchall()
    assert len(batches) == 8
    gen = client(base, name)
    for prompt, got, tokens, seeds in batches:
        assert len(got) == len(set(got)) == 2 and seeds == 1  # one request, one seed
        single = gen.post(gen._body(prompt, 1, 1))["usage"]["prompt_tokens"]
        assert tokens == [2 * single, 0]


# -- the error shapes seen above, on the loopback fake (no real server needed) --------------
def test_fastapi_s_validation_errors_are_read_and_no_models_list_means_no_hint():
    """FastAPI's validation shape (a list of ``{"loc", "msg"}``) is one readable line; a server
    whose 5xx answers run out and that lists no models (the fake has no GET route) gets no
    guess about the model."""
    import json

    from corpus_audit.backends.fakes.chat_server import ChatServer

    detail = [
        {"type": "missing", "loc": ["body", "messages"], "msg": "Field required"},
        {"type": "int_parsing", "loc": ["body", "max_tokens"], "msg": "Input should be an int"},
    ]
    raw = _answers(json.dumps({"detail": detail}).encode(), 422)
    server = ChatServer(lambda p, n, s, m: ["x"], raw=raw)
    with server, pytest.raises(ModelError) as caught:
        generate_all(client(server.url, "m"), [TextRequest("x", 1, 1)])
    assert str(caught.value).endswith(
        "HTTP 422: body.messages: Field required; body.max_tokens: Input should be an int"
    )
    server = ChatServer(lambda p, n, s, m: ["x"], fail=lambda k, body: (500, {}))
    with server, pytest.raises(ModelError, match=r"gave up after 2 attempts \(HTTP 500[^;]*\)$"):
        generate_all(client(server.url, "m"), [TextRequest("x", 1, 1)])
