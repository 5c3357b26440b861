"""Upstream failures (down, silent, odd answers) as OpenAI errors."""
import socket

import httpx
import pytest
from live_server import free_port, live_server

from nsample.config import EngineConfig
from nsample.errors import QueueFull
from nsample.remote import RemoteConfig, RemoteEngine, UpstreamError
from nsample.server import ServerConfig, create_app

HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def down():
    """A RemoteEngine whose upstream port has nothing listening (told its model, so it starts anyway)."""
    engine = RemoteEngine(RemoteConfig(f"http://127.0.0.1:{free_port()}/v1", model="ghost", connect_timeout=2))
    yield engine
    engine.close()


def test_unreachable_upstream_is_a_502_naming_it(down):
    with pytest.raises(UpstreamError) as e:
        down.generate(HELLO, n=3, max_tokens=4)
    assert (e.value.status, e.value.type, e.value.code) == (502, "upstream_error", "upstream_unreachable")
    assert down.remote.url in e.value.message and "unreachable" in e.value.message
    assert down.load_info == {"waiting": 0, "active": 0} and down.mode is None  # a failed probe is not remembered


def test_unreachable_upstream_through_the_api(down):
    with live_server(create_app(down, ServerConfig())) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"model": "ghost", "messages": HELLO, "n": 2}, timeout=30)
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "upstream_error" and "unreachable" in err["message"] and down.remote.url in err["message"]


def test_a_stream_from_an_unreachable_upstream_is_a_502_not_a_200(down):
    with live_server(create_app(down, ServerConfig())) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"model": "ghost", "messages": HELLO, "n": 2, "stream": True},
                       timeout=30)
        c = httpx.post(url + "/v1/completions", json={"model": "ghost", "prompt": ["a", "b"], "stream": True},
                       timeout=30)
    assert (r.status_code, c.status_code) == (502, 502)
    assert r.json()["error"]["type"] == c.json()["error"]["type"] == "upstream_error"


def test_without_a_model_name_an_unreachable_upstream_fails_at_start():
    with pytest.raises(UpstreamError, match="unreachable"):
        RemoteEngine(RemoteConfig(f"http://127.0.0.1:{free_port()}/v1", connect_timeout=2))


def test_silent_upstream_times_out_as_504_and_the_queue_limit_holds():
    with socket.socket() as listener:  # accepts connections (the kernel does) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        engine = RemoteEngine(RemoteConfig(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", model="m",
                                           timeout=1, mode="fanout"), EngineConfig(max_queue=1))
        try:
            req = engine.submit("Hi", n=2, max_tokens=2)
            with pytest.raises(QueueFull):
                engine.submit("Hi")
            with pytest.raises(UpstreamError) as e:
                req.result(timeout=10)
        finally:
            engine.close()
    assert (e.value.status, e.value.code) == (504, "upstream_timeout") and "--upstream-timeout" in e.value.message


def test_upstream_that_is_not_openai_compatible():
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    app = FastAPI()
    app.get("/v1/models")(lambda: {"data": [{"id": "odd", "max_model_len": 4096}]})
    app.post("/v1/completions")(lambda: PlainTextResponse("teapot trouble", status_code=503))
    app.post("/v1/chat/completions")(lambda: {"choices": [{"index": 5, "message": {"content": "?"}}]})
    with live_server(app) as url:
        engine = RemoteEngine(RemoteConfig(url + "/v1", mode="native"))
        try:
            assert (engine.name, engine.context) == ("odd", 4096)
            with pytest.raises(UpstreamError, match=r"failed \(503\): teapot trouble"):
                engine.generate("Hi", n=2, max_tokens=2)
            with pytest.raises(UpstreamError, match="choice index 5"):
                engine.generate(HELLO, n=2, max_tokens=2)
        finally:
            engine.close()


def test_engine_limits_apply_before_any_upstream_call(down):
    from nsample.errors import InvalidRequest

    with pytest.raises(InvalidRequest) as e:
        down.submit("Hi", n=down.config.max_n + 1)
    assert e.value.param == "n"
    with pytest.raises(InvalidRequest):
        down.submit({"not": "a prompt"})
    with pytest.raises(NotImplementedError):
        down.tokenize("Hi")
