"""A RemoteEngine in front of another nsample server: native n in one request, fan-out, cancellation, errors."""
import asyncio
import json

import httpx
import openai
import pytest
from api_helpers import cut_short, idle, record_submits, wait_until
from live_server import live_server

from nsample.errors import InvalidRequest, NSampleError
from nsample.remote import RemoteConfig, RemoteEngine, UpstreamError
from nsample.server import ServerConfig, create_app

HELLO = [{"role": "user", "content": "Hello! Tell me a story."}]
LONG = {"max_tokens": 1500, "ignore_eos": True}  # seconds of tiny-model work if left running
TIMEOUT = 60  # seconds; every client call is bounded




def sse(response: httpx.Response) -> list:
    return [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]


class Recorder:
    """ASGI middleware on the upstream: records each POST body, counts open responses, can fail one seed."""

    def __init__(self, app):
        self.app, self.bodies, self.open, self.fail_seed = app, [], 0, None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        raw, more = b"", True
        while more:
            message = await receive()
            raw, more = raw + message.get("body", b""), message.get("more_body", False)
        body = json.loads(raw)
        self.bodies.append(body)
        if self.fail_seed is not None and body.get("seed") == self.fail_seed:
            await asyncio.sleep(0.5)  # its siblings are streaming by now
            error = json.dumps({"error": {"message": "injected failure", "type": "server_error"}}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            return await send({"type": "http.response.body", "body": error})
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        self.open += 1
        try:
            await self.app(scope, replay, send)
        finally:
            self.open -= 1

    def generations(self) -> list[dict]:
        return [b for b in self.bodies if b.get("max_tokens") != 1]  # without the auto mode's probe


@pytest.fixture(scope="module")
def upstream(tiny_engine):
    recorder = Recorder(create_app(tiny_engine, ServerConfig()))
    with live_server(recorder) as url:
        recorder.url = url + "/v1"
        yield recorder


@pytest.fixture(scope="module")
def native_engine(upstream):
    engine = RemoteEngine(RemoteConfig(upstream.url))  # auto: the probe finds native n
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def fanout_engine(upstream):
    engine = RemoteEngine(RemoteConfig(upstream.url, mode="fanout"))
    yield engine
    engine.close()


@pytest.fixture
def clean(upstream, tiny_engine):
    assert wait_until(lambda: idle(tiny_engine) and upstream.open == 0)
    upstream.bodies.clear()
    upstream.fail_seed = None
    yield upstream
    upstream.fail_seed = None


def test_native_n_is_one_upstream_request(native_engine, clean, tiny_engine):
    result = native_engine.generate(HELLO, n=4, seed=11, max_tokens=8)
    assert native_engine.mode == "native" and native_engine.name == tiny_engine.name
    assert [(b["n"], b["seed"]) for b in clean.generations()] == [(4, 11)]
    local = tiny_engine.generate(HELLO, n=4, seed=11, max_tokens=8)
    assert [(c.index, c.seed, c.text, c.finish_reason) for c in result.choices] == \
           [(c.index, c.seed, c.text, c.finish_reason) for c in local.choices]
    assert result.usage == local.usage


def test_fanout_sends_n_single_choice_requests_with_seeds_seed_plus_i(fanout_engine, clean, tiny_engine):
    result = fanout_engine.generate(HELLO, n=4, seed=11, max_tokens=8)
    assert sorted((b["n"], b["seed"]) for b in clean.generations()) == [(1, 11), (1, 12), (1, 13), (1, 14)]
    local = tiny_engine.generate(HELLO, n=4, seed=11, max_tokens=8)  # nsample's contract: (s, n)[i] == (s+i, 1)
    assert [(c.index, c.seed, c.text) for c in result.choices] == [(c.index, c.seed, c.text) for c in local.choices]
    assert result.usage == local.usage  # the prompt once, completions summed


def test_fanout_stream_interleaves_with_one_finish_per_choice(fanout_engine, clean):
    events = list(fanout_engine.stream("Once upon a time", n=4, seed=5, max_tokens=24, ignore_eos=True))
    finish = {i: k for k, ev in enumerate(events) for i in [ev.index] if ev.finish_reason}
    assert sorted(finish) == [0, 1, 2, 3] and sum(1 for ev in events if ev.finish_reason) == 4
    first_text = {i: min(k for k, ev in enumerate(events) if ev.index == i and ev.text) for i in range(4)}
    assert max(first_text.values()) < min(finish.values())  # side by side, not one choice after another
    assert all(ev.seed == 5 + ev.index for ev in events)
    whole = fanout_engine.generate("Once upon a time", n=4, seed=5, max_tokens=24, ignore_eos=True)
    assert ["".join(ev.text for ev in events if ev.index == i) for i in range(4)] == [c.text for c in whole.choices]


async def test_async_stream_matches_generate(native_engine, clean):
    texts = {i: "" for i in range(3)}
    async for ev in native_engine.astream("Hi there", n=3, seed=9, max_tokens=10):
        texts[ev.index] += ev.text
    whole = native_engine.generate("Hi there", n=3, seed=9, max_tokens=10)
    assert [texts[i] for i in range(3)] == [c.text for c in whole.choices]


@pytest.mark.parametrize("mode, streams", [("native", 1), ("fanout", 3)])
def test_abandoned_stream_closes_every_upstream_stream(native_engine, fanout_engine, clean, tiny_engine, mode,
                                                       streams, monkeypatch):
    engine, upstream = native_engine if mode == "native" else fanout_engine, record_submits(tiny_engine, monkeypatch)
    events, seen = engine.stream(HELLO, n=3, seed=1, **LONG), set()
    while seen != {0, 1, 2}:
        seen.add(next(events).index)
    assert clean.open == streams and engine.load_info == {"waiting": 0, "active": 1}
    events.close()  # the consumer leaves
    assert wait_until(lambda: clean.open == 0 and idle(tiny_engine) and idle(engine), timeout=10)
    assert len(upstream) == streams and cut_short(upstream, 1500)


def test_failing_choice_cancels_its_siblings(fanout_engine, clean, tiny_engine, monkeypatch):
    clean.fail_seed, upstream = 102, record_submits(tiny_engine, monkeypatch)
    with pytest.raises(UpstreamError) as e:
        fanout_engine.generate(HELLO, n=3, seed=100, **LONG)
    assert e.value.status == 502 and "injected failure" in e.value.message and "(500)" in e.value.message
    assert wait_until(lambda: clean.open == 0 and idle(tiny_engine) and idle(fanout_engine), timeout=10)
    assert len(upstream) == 2 and cut_short(upstream, 1500)  # seeds 100 and 101 ran; 102 failed before it


def test_upstream_4xx_is_passed_on(native_engine, clean):
    with pytest.raises(NSampleError) as e:
        native_engine.generate(HELLO, n=2, seed=1, max_tokens=4, logit_bias={10**6: 5})  # outside the vocabulary
    assert (e.value.status, e.value.param, e.value.type) == (400, "logit_bias", "invalid_request_error")
    assert not isinstance(e.value, UpstreamError) and "10" in e.value.message


def test_upstream_api_key(tiny_engine):
    with live_server(create_app(tiny_engine, ServerConfig(api_key="sesame"))) as url:
        with pytest.raises(UpstreamError) as e:
            RemoteEngine(RemoteConfig(url + "/v1"))
        assert (e.value.status, e.value.code) == (502, "upstream_auth")  # not the client's key: not a 401
        engine = RemoteEngine(RemoteConfig(url, api_key="sesame"))  # a bare host gets /v1
        try:
            assert engine.generate("Hi", n=2, max_tokens=3).choices[1].index == 1
        finally:
            engine.close()


# --- through nsample's own API in front ---------------------------------------------------------------
@pytest.fixture(scope="module")
def front(fanout_engine):
    with live_server(create_app(fanout_engine, ServerConfig())) as url:
        yield url


def test_api_stream_through_a_remote_engine(front, clean, tiny_engine):
    body = {"messages": HELLO, "n": 3, "seed": 20, "max_tokens": 12, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    with httpx.Client(base_url=front, timeout=TIMEOUT) as http, http.stream("POST", "/v1/chat/completions",
                                                                           json=body) as r:
        assert r.status_code == 200
        chunks = sse(r)
    deltas = [c["choices"][0] for c in chunks if c["choices"]]
    assert sorted(ch["index"] for ch in deltas if ch["finish_reason"]) == [0, 1, 2]
    assert [c["usage"] for c in chunks if c["usage"]] == [chunks[-1]["usage"]]
    local = tiny_engine.generate(HELLO, n=3, seed=20, max_tokens=12, ignore_eos=True)
    assert chunks[-1]["usage"] == local.usage.to_dict() and local.usage.completion_tokens == 36
    assert ["".join(ch["delta"].get("content") or "" for ch in deltas if ch["index"] == i) for i in range(3)] == \
           [c.text for c in local.choices]


def test_api_client_disconnect_closes_upstream_streams(front, clean, tiny_engine, fanout_engine, monkeypatch):
    upstream = record_submits(tiny_engine, monkeypatch)
    client = openai.OpenAI(base_url=front + "/v1", api_key="unused", max_retries=0, timeout=TIMEOUT)
    stream = client.chat.completions.create(model=fanout_engine.name, messages=HELLO, n=3, stream=True,
                                            extra_body=LONG)
    seen = set()
    for chunk in stream:
        seen |= {c.index for c in chunk.choices if c.delta.content}
        if seen == {0, 1, 2}:
            break
    assert clean.open == 3 and tiny_engine.load_info["active"] == 3
    stream.close()
    assert wait_until(lambda: clean.open == 0 and idle(tiny_engine) and idle(fanout_engine), timeout=10)
    assert len(upstream) == 3 and cut_short(upstream, 1500)


def test_relayed_choices_count_their_tokens(native_engine, fanout_engine, clean, tiny_engine):
    """Relayed choices carry no token ids: their counts come from the logprobs, else the text chunks, not 0."""
    local = tiny_engine.generate(HELLO, n=4, seed=11, max_tokens=8)
    for engine in (native_engine, fanout_engine):
        exact = engine.generate(HELLO, n=4, seed=11, max_tokens=8, logprobs=True)
        assert all(not c.token_ids for c in exact.choices)
        assert exact.to_dataframe()["completion_tokens"].tolist() == [len(c.token_ids) for c in local.choices]
        counted = engine.generate(HELLO, n=4, seed=11, max_tokens=8).to_dataframe()["completion_tokens"]
        assert all(0 < k <= len(c.token_ids) for k, c in zip(counted, local.choices))


@pytest.mark.parametrize("kwargs,param", [({"prompt_logprobs": 1}, "prompt_logprobs"),
                                          ({"json_schema": {"type": "object"}}, "json_schema"),
                                          ({"regex": "[a-z]+"}, "regex")])
def test_what_an_upstream_may_lack_is_refused_not_dropped(native_engine, kwargs, param):
    with pytest.raises(InvalidRequest) as e:
        native_engine.submit("Hello", max_tokens=2, **kwargs)
    assert e.value.param == param and e.value.code == "unsupported_parameter"
