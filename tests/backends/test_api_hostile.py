"""Issue 33 (reliability round 4): hostile servers and stranger's studies against the one API
client (:mod:`corpus_audit.backends.api_client`) and the chat client built on it.

Every server here is a real HTTP server on the loopback address (the test fakes), answering the
way a hostile or broken server would: a body one byte at a time, an endless chunked answer, an
endless error body, a ``Retry-After`` of 1e9 seconds or the year 9999, malformed JSON shapes,
FastChat's error shape. Each test is bounded (a few seconds) and failed on the base commit
7afa816 (see docs/reliability.md, "Round 4").
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from corpus_audit.backends.api_client import (
    ALLOWED_HOSTS_ENV,
    ApiClient,
    RetryPolicy,
    key_for,
)
from corpus_audit.backends.fakes.chat_server import ChatServer
from corpus_audit.backends.text_generators import (
    SamplingSettings,
    TextRequest,
    generate_all,
    load_text_generator,
)
from corpus_audit.core.config import config_from_dict
from corpus_audit.core.errors import ApiError, ConfigError, ModelError

SECRET = "sk-secret-0123456789-never-sent"


def echo(prompt: str, n: int, seed: int | None, model: str) -> list[str]:
    return [f"{prompt} seed {seed} choice {i}" for i in range(n)]


def chat(url: str, **options):
    defaults = dict(api_base=url, api_key_env="", backoff_s=0.01, max_retries=0)
    defaults.update(options)
    return load_text_generator("openai:m", SamplingSettings(max_tokens=20), **defaults)


def within(seconds: float, fn, *args):
    """Run ``fn`` in a daemon thread; its result or exception, or fail at the deadline."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    return out, time.monotonic() - start


# -- secrets (High 2) -----------------------------------------------------------------------
def test_a_key_goes_only_to_hosts_the_user_allows():
    env = {"MY_API_KEY": SECRET, "OPENAI_API_KEY": SECRET}
    with pytest.raises(ApiError, match=r"must end in _API_KEY or _TOKEN"):
        key_for("AWS_SECRET_ACCESS_KEY", "http://127.0.0.1:1/v1", setting="llm.api_key_env")
    with pytest.raises(ApiError) as err:
        key_for(
            "MY_API_KEY", "https://collector.example/v1", setting="llm.api_key_env", environ=env
        )
    line = str(err.value)
    assert "'collector.example'" in line and f"{ALLOWED_HOSTS_ENV}=collector.example" in line
    assert SECRET not in line and len(line.splitlines()) == 1
    # a look-alike of the default host is not the default host
    with pytest.raises(ApiError, match="api.openai.com.collector.example"):
        key_for("OPENAI_API_KEY", "https://api.openai.com.collector.example/v1", setting="s",
                environ=env)  # fmt: skip
    assert key_for("OPENAI_API_KEY", "https://api.openai.com/v1", setting="s", environ=env)
    assert key_for("MY_API_KEY", "http://127.0.0.1:8000/v1", setting="s", environ=env)
    allowed = {**env, ALLOWED_HOSTS_ENV: "other.example, Collector.example"}
    assert key_for("MY_API_KEY", "https://collector.example/v1", setting="s", environ=allowed)
    assert key_for("UNSET_API_KEY", "https://collector.example/v1", setting="s", environ=env) == ""
    assert key_for("", "https://collector.example/v1", setting="s", environ=env) == ""


def test_both_clients_refuse_before_sending(monkeypatch):
    monkeypatch.setenv("MY_API_KEY", SECRET)
    monkeypatch.delenv(ALLOWED_HOSTS_ENV, raising=False)
    with pytest.raises(ModelError, match="not sent to 'collector.example'") as err:
        chat("https://collector.example/v1", api_key_env="MY_API_KEY")
    assert SECRET not in str(err.value)
    # the chat client's settings are checked by their study.toml declarations (issue 45)
    with pytest.raises(ModelError, match="llm.api_key_env: 'HOME' must be empty or a variable"):
        chat("http://127.0.0.1:9/v1", api_key_env="HOME")
    with pytest.raises(ApiError, match="generate.api_key_env: the key in MY_API_KEY"):
        ApiClient("https://collector.example/v1", key_env="MY_API_KEY")


# -- Retry-After and interruptible waits (High 3) -------------------------------------------
@pytest.mark.parametrize("retry_after", ["1e9", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_retry_after_is_capped_by_max_backoff(retry_after):
    failures = {0: (429, {"Retry-After": retry_after})}
    with ChatServer(echo, fail=lambda k, body: failures.get(k)) as server:
        gen = chat(server.url, max_retries=1, max_backoff_s=0.2)
        out, took = within(10, generate_all, gen, [TextRequest("x", 1, 1)])
        assert "error" not in out and took < 3
        assert server.log[1].at - server.log[0].at >= 0.19 and gen.stats["retry_after_waits"] == 1


def test_cancel_wakes_the_waits_and_ends_the_requests_in_flight():
    """What Ctrl-C does to a client (the CLI tests send the real signals): a wait of an hour
    and a request that is never answered both end at once."""
    hold = threading.Event()

    def raw(number, handler):
        if number == 0:
            handler.send_response(429)
            handler.send_header("Retry-After", "3600")
            handler.send_header("Content-Length", "2")
            handler.end_headers()
            handler.wfile.write(b"{}")
            return True
        hold.wait(20)  # never answers
        return True

    with ChatServer(echo, raw=raw) as server:
        client = ApiClient(server.url, key_env="", require_key=False, timeout=60,
                           policy=RetryPolicy(2, 0.01, 3600), concurrency=2)  # fmt: skip
        results = []
        threads = [
            threading.Thread(target=lambda: results.append(_post(client)), daemon=True)
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        assert server.wait_for(2, 5)
        time.sleep(0.2)
        start = time.monotonic()
        client.cancel()
        for t in threads:
            t.join(5)
        hold.set()
        assert time.monotonic() - start < 2 and not any(t.is_alive() for t in threads)
        assert all("stopped" in r for r in results), results


def _post(client: ApiClient) -> str:
    try:
        client.post_json("chat/completions", {})
    except ApiError as exc:
        return str(exc)
    return "answered"


# -- whole-request timeouts and body sizes (High 4) -----------------------------------------
def test_a_one_byte_a_second_answer_ends_at_the_timeout():
    def raw(number, handler):
        body = json.dumps({"choices": [{"message": {"content": "x" * 200}}]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for i in range(len(body)):  # 0.05 s a byte: each read is quick, the whole is 10 s
            handler.wfile.write(body[i : i + 1])
            handler.wfile.flush()
            time.sleep(0.05)
        return True

    with ChatServer(echo, raw=raw) as server:
        gen = chat(server.url, timeout_s=1.0)
        out, took = within(12, generate_all, gen, [TextRequest("x", 1, 1)])
    assert isinstance(out.get("error"), ModelError) and took < 3
    assert "no complete answer within 1 s (llm.timeout_s)" in str(out["error"])


def _endless(status: int, written: list[int], chunked: bool):
    def raw(number, handler):
        handler.send_response(status)
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(10**12))
        handler.end_headers()
        piece = b"x" * 65536
        frame = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
        while written[0] < 300 * 2**20:  # bounded, so the test ends whatever the client does
            handler.wfile.write(frame)
            written[0] += len(piece)
        return True

    return raw


def test_an_endless_chunked_answer_is_cut_at_the_body_limit():
    written = [0]
    with ChatServer(echo, raw=_endless(200, written, chunked=True)) as server:
        gen = chat(server.url, max_body_mb=1, timeout_s=30)
        out, took = within(20, generate_all, gen, [TextRequest("x", 1, 1)])
    assert isinstance(out.get("error"), ModelError), out
    assert "larger than 1048576 bytes" in str(out["error"]) and took < 10
    assert written[0] < 100 * 2**20  # the client stopped reading: far from the 300 MB


def test_an_endless_error_body_is_not_read_whole():
    written = [0]
    with ChatServer(echo, raw=_endless(500, written, chunked=True)) as server:
        gen = chat(server.url, timeout_s=30)
        out, took = within(20, generate_all, gen, [TextRequest("x", 1, 1)])
    assert isinstance(out.get("error"), ModelError) and "HTTP 500" in str(out["error"])
    assert written[0] < 100 * 2**20 and took < 10


# -- malformed answers, error shapes, bases (Medium) ---------------------------------------
def _answers(body: bytes, status: int = 200):
    def raw(number, handler):
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        return True

    return raw


@pytest.mark.parametrize(
    "body, words",
    [
        ([{"choices": []}], "a JSON list, not an object"),
        ({"choices": "many"}, "'choices' is not a list"),
        ({"choices": [{"message": "hi"}]}, "'message' is not an object"),
        ({"choices": [{"message": {"content": 5}}]}, "'content' is not text"),
    ],
)
def test_a_malformed_answer_is_one_line(body, words):
    server = ChatServer(echo, raw=_answers(json.dumps(body).encode()))
    with server, pytest.raises(ModelError, match=words) as err:
        generate_all(chat(server.url), [TextRequest("x", 1, 1)])
    assert len(str(err.value).splitlines()) == 1


def test_token_counts_as_strings_are_unknown_not_a_traceback():
    body = {
        "choices": [{"index": "0", "message": {"content": "she is kind"}, "finish_reason": 3}],
        "usage": {"prompt_tokens": "7", "completion_tokens": 2.5},
    }
    with ChatServer(echo, raw=_answers(json.dumps(body).encode())) as server:
        (got,) = generate_all(chat(server.url), [TextRequest("x", 1, 1)])
    assert got[0].text == "she is kind" and got[0].completion_tokens is None
    assert got[0].prompt_tokens is None and got[0].finish_reason == "3"


def test_fastchat_s_error_shape_is_read():
    body = json.dumps({"object": "error", "message": "Only m allowed now", "code": 40301})
    server = ChatServer(echo, raw=_answers(body.encode(), status=400))
    with server, pytest.raises(ModelError, match=r"HTTP 400: Only m allowed now$"):
        generate_all(chat(server.url), [TextRequest("x", 1, 1)])


def test_a_base_without_scheme_is_refused_at_once_and_without_v1_gets_a_hint():
    with pytest.raises(ConfigError, match="llm.api_base.*must start with http"):
        config_from_dict({"llm": {"api_base": "localhost:8000/v1"}}, ".")
    with pytest.raises(ModelError, match="must start with http"):
        chat("localhost:8000/v1")
    with ChatServer(echo) as server:
        base = server.url.removesuffix("/v1")
        with pytest.raises(ModelError, match=r"HTTP 404.*usually ends in /v1") as err:
            generate_all(chat(base), [TextRequest("x", 1, 1)])
        assert server.count == 1 and len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(
    "section, key",
    [
        ("llm", "timeout_s"),
        ("llm", "backoff_s"),
        ("llm", "max_backoff_s"),
        ("generate", "api_timeout"),
        ("generate", "api_backoff"),
        ("generate", "api_max_backoff"),
    ],
)
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nan_and_infinite_durations_are_refused_by_the_config(section, key, value):
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: (nan|inf)"):
        config_from_dict({section: {key: value}}, ".")


def test_a_connection_closed_mid_answer_and_a_non_http_answer_are_retried():
    """Issue 33 (Medium): the images client raised a raw ``IncompleteRead`` /
    ``BadStatusLine`` traceback; the one retry path retries both."""

    def raw(number, handler):
        if number == 0:  # headers promise 100 bytes, 10 come, the connection closes
            handler.send_response(200)
            handler.send_header("Content-Length", "100")
            handler.end_headers()
            handler.wfile.write(b'{"data": [')
            return True
        if number == 1:  # not HTTP at all
            handler.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
            return True
        return False

    with ChatServer(echo, raw=raw) as server:
        client = ApiClient(server.url, key_env="", require_key=False, timeout=5,
                           policy=RetryPolicy(2, 0.01, 0.05))  # fmt: skip
        answer = client.post_json("chat/completions", {"messages": [{"content": "x"}]})
    assert answer.attempts == 3 and answer.body["choices"][0]["message"]["content"]


def test_an_images_answer_that_is_a_list_is_one_line(monkeypatch):
    from corpus_audit.backends.generators import GenerationSettings
    from corpus_audit.backends.openai_images import ApiImageOptions, OpenAIImagesGenerator

    monkeypatch.setenv("CA_HOSTILE_API_KEY", SECRET)
    with ChatServer(echo, raw=_answers(b"[1, 2]")) as server:
        options = ApiImageOptions(base_url=server.url, key_env="CA_HOSTILE_API_KEY", max_retries=0)
        gen = OpenAIImagesGenerator("dall-e-3", GenerationSettings(), options=options)
        with pytest.raises(ApiError, match="an images answer that is not a JSON object"):
            gen.request("a nurse")


def test_a_context_overflow_500_is_final_not_retried_for_a_minute():
    body = {"error": {"message": "This model's maximum context length is 2048 tokens", "code": 500}}
    with ChatServer(echo, raw=_answers(json.dumps(body).encode(), status=500)) as server:
        gen = chat(server.url, max_retries=5, backoff_s=1.0)
        start = time.monotonic()
        with pytest.raises(ModelError, match=r"HTTP 500: This model's maximum context length"):
            generate_all(gen, [TextRequest("x", 1, 1)])
        assert server.count == 1 and time.monotonic() - start < 1


def test_llm_n_and_max_texts_are_bounded():
    """Issue 33 (Medium): llm.n = 1e9 allocated 4 GB before the first request."""
    for key in ("n", "max_texts"):
        with pytest.raises(ConfigError, match=rf"llm\.{key}: 1000000000 is above the maximum"):
            config_from_dict({"llm": {key: 10**9, "max_texts": 10**9}}, ".")


def test_a_null_content_is_recorded_as_no_content_not_an_empty_text():
    body = {"choices": [{"message": {"content": None}, "finish_reason": "length"}]}
    with ChatServer(echo, raw=_answers(json.dumps(body).encode())) as server:
        (got,) = generate_all(chat(server.url), [TextRequest("x", 1, 1)])
    assert (got[0].text, got[0].refusal) == ("", "no_content")


def test_an_images_answer_far_larger_than_asked_is_refused_before_decoding(monkeypatch):
    """Issue 33 (Medium): a 9000 x 9000 PNG of a few hundred KB was decoded in full (4 GB RSS
    at concurrency 4). An answer may have at most 4 x the pixels of ``api_size``, checked on
    the header before any pixel is decoded."""
    import base64
    import io

    from PIL import Image

    from corpus_audit.backends.generators import GenerationSettings
    from corpus_audit.backends.openai_images import ApiImageOptions, OpenAIImagesGenerator

    buf = io.BytesIO()
    Image.new("RGB", (4200, 4200)).save(buf, format="PNG")  # 17.6 M pixels, ~50 KB
    body = json.dumps({"data": [{"b64_json": base64.b64encode(buf.getvalue()).decode()}]})
    monkeypatch.setenv("CA_HOSTILE_API_KEY", SECRET)
    with ChatServer(echo, raw=_answers(body.encode())) as server:
        options = ApiImageOptions(
            base_url=server.url, key_env="CA_HOSTILE_API_KEY", max_retries=0, size="1024x1024"
        )
        gen = OpenAIImagesGenerator("dall-e-3", GenerationSettings(), options=options)
        with pytest.raises(ApiError, match=r"image is refused: .*at most 4,194,304 pixels"):
            gen.request("a nurse")


def test_the_config_refuses_a_key_variable_that_is_not_an_api_key():
    for section in ("llm", "generate"):
        with pytest.raises(ConfigError, match=rf"{section}.api_key_env: .*_API_KEY or _TOKEN"):
            config_from_dict({section: {"api_key_env": "AWS_SECRET_ACCESS_KEY"}}, ".")
        config_from_dict({section: {"api_key_env": "TOGETHER_API_KEY"}}, ".")
        config_from_dict({section: {"api_key_env": ""}}, ".")


def test_a_stream_stopped_early_leaves_the_client_usable():
    with ChatServer(echo) as server:
        gen = chat(server.url)
        stream = gen.stream([TextRequest("a", 1, 1), TextRequest("b", 1, 2)])
        next(stream)
        stream.close()  # the consumer stops early: the requests in flight are cancelled
        (got,) = generate_all(gen, [TextRequest("c", 1, 3)])
        assert got[0].text.startswith("c seed 3")


def test_a_refusal_with_a_long_body_is_still_a_content_refusal():
    """Issue 33 (Low): the error body was cut to 2,000 characters *before* it was parsed, so a
    content-policy refusal with a long message was not recognised (a final HTTP 400 instead)."""
    from corpus_audit.backends.api_client import ApiRefusal

    body = {"error": {"code": "content_policy_violation", "message": "no. " * 1000}}
    with ChatServer(echo, raw=_answers(json.dumps(body).encode(), status=400)) as server:
        client = ApiClient(server.url, key_env="", require_key=False, timeout=5)
        with pytest.raises(ApiRefusal) as info:
            client.post_json("images/generations", {"prompt": "x"})
    assert info.value.code == "content_policy_violation" and len(info.value.message) == 2000


# -- the images client on the same hostile servers (issue 33 close-out) ---------------------
def _png(width: int = 8, height: int = 8) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 10, 10)).save(buf, format="PNG")
    return buf.getvalue()


def _images_answer(png: bytes) -> bytes:
    import base64

    return json.dumps({"data": [{"b64_json": base64.b64encode(png).decode()}]}).encode()


def _images(url: str, monkeypatch, **options):
    from corpus_audit.backends.generators import GenerationSettings
    from corpus_audit.backends.openai_images import ApiImageOptions, OpenAIImagesGenerator

    monkeypatch.setenv("CA_HOSTILE_API_KEY", SECRET)
    defaults = dict(base_url=url, key_env="CA_HOSTILE_API_KEY", max_retries=0, size="1024x1024")
    defaults.update(options)
    return OpenAIImagesGenerator(
        "dall-e-3", GenerationSettings(), options=ApiImageOptions(**defaults)
    )


@pytest.mark.parametrize("client", ["chat", "images"])
def test_both_clients_share_one_retry_path(client, monkeypatch):
    """Issue 33 (Medium, "one retry path"; High 3): the two clients had two retry loops. Both
    now wait a ``Retry-After`` of the year 9999 only ``max_backoff``, and retry a connection
    closed mid-answer and a non-HTTP answer, then take the answer. On 7afa816 the chat client
    raised ``OverflowError`` on the date and the images client a raw ``IncompleteRead``."""

    def raw(number, handler):
        if number == 0:
            handler.send_response(429)
            handler.send_header("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT")
            handler.send_header("Content-Length", "2")
            handler.end_headers()
            handler.wfile.write(b"{}")
            return True
        if number == 1:  # 100 bytes promised, 10 sent, the connection closed
            handler.send_response(200)
            handler.send_header("Content-Length", "100")
            handler.end_headers()
            handler.wfile.write(b'{"data": [')
            return True
        if number == 2:  # not HTTP at all
            handler.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
            return True
        if client == "images":
            return _answers(_images_answer(_png()))(number, handler)
        return False  # the chat server's own answer

    with ChatServer(echo, raw=raw) as server:
        if client == "chat":
            gen = chat(server.url, max_retries=3, backoff_s=0.01, max_backoff_s=0.2)
            out, took = within(10, generate_all, gen, [TextRequest("x", 1, 1)])
            assert "error" not in out, out
            assert out["value"][0][0].text.startswith("x seed")
        else:
            gen = _images(server.url, monkeypatch, max_retries=3, backoff=0.01, max_backoff=0.2)
            out, took = within(10, gen.request, "a nurse")
            assert "error" not in out, out
            assert out["value"].pixels.shape == (8, 8, 3) and out["value"].attempts == 4
        assert server.count == 4 and took < 5
        assert server.log[1].at - server.log[0].at >= 0.19  # Retry-After waited, capped


def test_the_images_client_bounds_the_whole_request_and_the_error_body(monkeypatch):
    """Issue 33 (High 4), images side: ``generate.api_timeout`` bounded one socket read (a
    slow answer ran on) and an endless error body was read whole before it was cut."""

    def slow(number, handler):
        body = _images_answer(_png())
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for i in range(len(body)):  # each read is quick, the whole takes minutes
            handler.wfile.write(body[i : i + 1])
            handler.wfile.flush()
            time.sleep(0.05)
        return True

    with ChatServer(echo, raw=slow) as server:
        gen = _images(server.url, monkeypatch, timeout=1.0)
        out, took = within(12, gen.request, "a nurse")
    assert isinstance(out.get("error"), ApiError) and took < 4, out
    assert "no complete answer within 1 s (generate.api_timeout)" in str(out["error"])
    written = [0]
    with ChatServer(echo, raw=_endless(500, written, chunked=False)) as server:
        gen = _images(server.url, monkeypatch, timeout=30.0)
        out, took = within(20, gen.request, "a nurse")
    assert isinstance(out.get("error"), ApiError) and "HTTP 500" in str(out["error"]), out
    assert written[0] < 100 * 2**20 and took < 10


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` pixels (its IHDR) and holds almost nothing:
    a decompression bomb as far as a header reader can tell."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 64)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def test_a_base64_decompression_bomb_is_one_line(monkeypatch):
    """Issue 33 (Medium): a base64 image whose header claims 40,000 x 40,000 pixels gave
    Pillow's ``DecompressionBombError`` as a traceback. With a size that is not ``WxH`` (the
    bound is Pillow's guard) it is one line, nothing decoded."""
    body = _images_answer(_png_header_only(40_000, 40_000))
    with ChatServer(echo, raw=_answers(body)) as server:
        gen = _images(server.url, monkeypatch, size="auto")
        with pytest.raises(ApiError, match=r"image is refused: too many pixels") as err:
            gen.request("a nurse")
    assert len(str(err.value).splitlines()) == 1
