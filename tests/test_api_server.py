"""Server concerns: API key, body limits, a full queue (429), memory limits, max n, mounting next to a UI, the CLI."""
import os
import subprocess
import sys

import httpx
import openai
import pytest
from api_helpers import HELLO, MODEL, TIMEOUT, chat_body, cut_short, error_of, idle, record_submits, wait_until
from live_server import free_port, live_server, stop_process
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from nsample.config import EngineConfig
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model
from nsample.server import ServerConfig, create_app

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def small_engine():
    """One request at a time, max n 4, and 1 MiB of KV cache (about 2000 tokens of the tiny model)."""
    model, tokenizer = tiny_model()
    engine = Engine(model, tokenizer, EngineConfig(max_queue=1, max_active=1, max_n=4, kv_budget_gb=2**-10), MODEL)
    yield engine
    engine.close()


def test_api_key(tiny_engine):
    with live_server(create_app(tiny_engine, ServerConfig(api_key="sekrit"))) as url, \
            httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekrit"}):
            r = http.post(CHAT, json=chat_body(), headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert error_of(r)["code"] == "invalid_api_key"
        assert http.get("/v1/models").status_code == 401
        assert http.post(CHAT, content=b"{not json", headers={"content-type": "application/json"}).status_code == 401
        assert http.get("/health").status_code == 200  # open for load balancers
        good = openai.OpenAI(base_url=f"{url}/v1", api_key="sekrit", max_retries=0, timeout=TIMEOUT)
        assert len(good.chat.completions.create(model=MODEL, messages=HELLO, n=2, max_tokens=4).choices) == 2
        bad = openai.OpenAI(base_url=f"{url}/v1", api_key="nope", max_retries=0, timeout=TIMEOUT)
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()


def test_body_size_limit(tiny_engine):
    with live_server(create_app(tiny_engine, ServerConfig(max_body_bytes=2000))) as url, \
            httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        big = chat_body(messages=[{"role": "user", "content": "x" * 3000}])
        r = http.post(CHAT, json=big)  # refused on its Content-Length
        assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"
        chunks = (b'{"messages": [{"role": "user", "content": "' + b"x" * 500, *[b"x" * 500] * 5, b'"}]}')
        r = http.post(CHAT, content=iter(chunks), headers={"content-type": "application/json"})  # chunked
        assert "content-length" not in r.request.headers
        assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"
        assert http.post(CHAT, json=chat_body()).status_code == 200


def test_full_queue_answers_429_and_frees_after_disconnect(small_engine, monkeypatch):
    submitted = record_submits(small_engine, monkeypatch)
    with live_server(create_app(small_engine, ServerConfig(retry_after_s=3))) as url, \
            httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        long = chat_body(max_tokens=1500, ignore_eos=True, stream=True)
        with http.stream("POST", CHAT, json=long) as running:
            assert running.status_code == 200
            lines = running.iter_lines()  # held: dropping the iterator would close the connection (a disconnect)
            assert any('"content":"' in line and '"content":""' not in line for line in lines)  # it generates
            r = http.post(CHAT, json=chat_body())
            assert r.status_code == 429 and r.headers["retry-after"] == "3"
            assert error_of(r) | {"message": ""} == {"message": "", "type": "rate_limit_error", "param": None,
                                                    "code": "queue_full"}
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="-", max_retries=0, timeout=TIMEOUT)
            with pytest.raises(openai.RateLimitError):
                client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2)
        assert wait_until(lambda: idle(small_engine))
        assert len(submitted) == 1 and cut_short(submitted, 1500)  # the 429s never reached the engine
        assert http.post(CHAT, json=chat_body()).status_code == 200


def test_one_peer_gets_its_share_of_the_queue_and_the_page_still_gets_in():
    model, tokenizer = tiny_model()
    engine = Engine(model, tokenizer, EngineConfig(max_queue=4, max_queue_per_client=2, max_active=2), MODEL)
    try:
        with live_server(create_app(engine)) as url, httpx.Client(base_url=url, timeout=TIMEOUT) as http:
            long = chat_body(max_tokens=1500, ignore_eos=True, stream=True)
            with http.stream("POST", CHAT, json=long) as a, http.stream("POST", CHAT, json=long) as b:
                assert a.status_code == b.status_code == 200
                r = http.post(CHAT, json=chat_body())
                assert r.status_code == 429 and "of yours" in error_of(r)["message"]
                page = engine.submit("From the page", max_tokens=2, client="page:1")  # another client still fits
                a.close()
                b.close()
                assert len(page.result(timeout=TIMEOUT).choices[0].token_ids) == 2
            assert wait_until(lambda: idle(engine))
    finally:
        engine.close()


def test_limits_of_a_smaller_engine(small_engine):
    with (live_server(create_app(small_engine, ServerConfig())) as url,
          httpx.Client(base_url=url, timeout=TIMEOUT) as http):
        err = error_of(http.post(CHAT, json=chat_body(n=5)))
        assert (err["param"], err["code"]) == ("n", "integer_above_max_value") and "<= 4" in err["message"]
        r = http.post(CHAT, json=chat_body(n=4, max_tokens=1000))  # 4 x 1000 tokens > 1 MiB of KV cache
        assert r.status_code == 400 and error_of(r)["code"] == "request_too_large" and "GiB" in error_of(r)["message"]
        r = http.post("/v1/completions", json={"model": MODEL, "prompt": ["a", "b"]})  # more prompts than the queue
        assert r.status_code == 400 and error_of(r)["code"] == "array_above_max_length"
        assert http.post(CHAT, json=chat_body(n=4, max_tokens=100)).status_code == 200


def test_mounts_next_to_a_ui_at_root(tiny_engine):
    app = create_app(tiny_engine, ServerConfig())
    app.mount("/", Starlette(routes=[Route("/", lambda _: PlainTextResponse("the UI"))]))  # as gr.mount_gradio_app
    with live_server(app) as url, httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        assert http.get("/").text == "the UI"
        assert http.get("/v1/models").json()["data"][0]["id"] == MODEL
        assert http.post(CHAT, json=chat_body(n=2)).json()["usage"]["completion_tokens"] > 0
        assert http.get("/health").json()["status"] == "ok"


def test_cli_serves_end_to_end():
    port = free_port()
    env = {**os.environ, "NSAMPLE_API_KEY": "k"}
    cmd = [sys.executable, "-m", "nsample.cli", "serve", "--model", MODEL, "--port", str(port), "--max-n", "3",
           "--served-model-name", "tiny", "--log-level", "info"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # wait for uvicorn to say it listens (or the process to die)
            if "Uvicorn running" in line:
                break
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0, timeout=TIMEOUT)
        r = client.chat.completions.create(model="tiny", messages=HELLO, n=3, seed=1, max_tokens=4)
        assert [c.index for c in r.choices] == [0, 1, 2] and r.model == "tiny"
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="tiny", messages=HELLO, n=4)
    finally:
        stop_process(proc)
