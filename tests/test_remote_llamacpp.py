"""nsample in front of a real llama.cpp server (llama-cpp-python[server] on the embedded GGUF), which ignores n.

The server runs with the defaults a user would type, so it cuts a running stream short when the next request
arrives (--interrupt_requests true): auto mode notices and sends it one request at a time."""
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from live_server import free_port, live_server, stop_process

from nsample.models.embedded import embedded_gguf
from nsample.remote import RemoteConfig, RemoteEngine, UpstreamError
from nsample.server import ServerConfig, create_app

TIMEOUT = 120  # seconds; llama.cpp answers one request at a time
JOKE = [{"role": "user", "content": "Tell me a joke."}]
SAMPLING = {"temperature": 0.9, "top_p": 1.0, "max_tokens": 12}  # top_p as nsample sends it (llama.cpp: 0.95)


@pytest.fixture(scope="session")
def llama(tmp_path_factory):
    """The base URL (…/v1) of llama-cpp-python's server on a free loopback port, stopped after the session."""
    port, log = free_port(), tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_gguf()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url, deadline = f"http://127.0.0.1:{port}/v1", time.monotonic() + 120
    try:
        while True:
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama-cpp-python's server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.25)
        yield url
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def engine(llama):
    engine = RemoteEngine(RemoteConfig(llama, timeout=TIMEOUT))
    engine.generate("Hi", n=2, max_tokens=1)  # auto mode's probe happens here, not between a test's requests
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def front(engine):
    with live_server(create_app(engine, ServerConfig())) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=TIMEOUT)


def direct(llama: str, seed: int, messages=JOKE) -> dict:
    """One request straight to llama.cpp, n=1."""
    body = {"messages": messages, "n": 1, "seed": seed, **SAMPLING}
    return httpx.post(llama + "/chat/completions", json=body, timeout=TIMEOUT).json()


def test_llamacpp_alone_returns_one_choice_for_n3(llama):
    body = {"messages": JOKE, "n": 3, "seed": 1, **SAMPLING}
    assert [c["index"] for c in httpx.post(llama + "/chat/completions", json=body, timeout=TIMEOUT).json()["choices"]] \
        == [0]
    with httpx.stream("POST", llama + "/chat/completions", json={**body, "stream": True}, timeout=TIMEOUT) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    assert {c["index"] for chunk in chunks for c in chunk["choices"]} == {0}
    assert not any(chunk.get("usage") for chunk in chunks)  # and no usage in a stream


def test_auto_mode_probes_once_and_fans_out(llama):
    bodies = []

    async def record(request):
        bodies.append(json.loads(request.content))

    engine = RemoteEngine(RemoteConfig(llama, timeout=TIMEOUT))
    engine.upstream.client.event_hooks["request"] = [record]
    try:
        for seed in (1, 5):
            assert [c.seed for c in engine.generate("Hello", n=2, seed=seed, max_tokens=2).choices] == [seed, seed + 1]
    finally:
        engine.close()
    assert engine.mode == "fanout"
    probe, *rest = bodies
    assert (probe["n"], probe["max_tokens"]) == (2, 1)
    assert sorted((b["n"], b["seed"]) for b in rest) == [(1, 1), (1, 2), (1, 5), (1, 6)]


def test_auto_mode_goes_one_request_at_a_time_when_streams_are_cut_short(llama, caplog):
    engine = RemoteEngine(RemoteConfig(llama, timeout=TIMEOUT))
    try:
        with live_server(create_app(engine, ServerConfig())) as url:
            client = openai.OpenAI(base_url=url + "/v1", api_key="-", max_retries=0, timeout=TIMEOUT)
            stream = client.chat.completions.create(model=engine.name, messages=JOKE, n=3, seed=70, stream=True,
                                                    stream_options={"include_usage": True}, **SAMPLING)
            chunks = list(stream)
            assert engine.upstream.serial  # the concurrent fan-out was cut short by llama.cpp, then went serial
            deltas = [c for chunk in chunks for c in chunk.choices]
            assert sorted(c.index for c in deltas if c.finish_reason) == [0, 1, 2]
            assert all("".join(c.delta.content or "" for c in deltas if c.index == i) for i in range(3))
            assert chunks[-1].usage.completion_tokens == sum(1 for c in deltas if c.delta.content)
            with ThreadPoolExecutor(3) as pool:  # three clients at once: each gets its turn upstream
                answers = list(pool.map(lambda seed: client.chat.completions.create(
                    model=engine.name, messages=JOKE, n=2, seed=seed, stream=True, **SAMPLING), (1, 2, 3)))
                finished = [sorted(c.index for chunk in a for c in chunk.choices if c.finish_reason) for a in answers]
            assert finished == [[0, 1]] * 3
    finally:
        engine.close()
    said = [r for r in caplog.records if r.name == "nsample.remote" and "one request at a time" in r.getMessage()]
    assert len(said) == 1 and llama in said[0].getMessage()


def test_fanout_mode_reports_a_cut_stream(llama):
    engine = RemoteEngine(RemoteConfig(llama, timeout=TIMEOUT, mode="fanout"))
    try:
        with pytest.raises(UpstreamError, match="--upstream-mode auto"):
            list(engine.stream(JOKE, n=3, seed=1, **SAMPLING))
        assert not engine.upstream.serial
    finally:
        engine.close()


def test_chat_n3_has_three_choices_each_equal_to_a_direct_request_with_seed_plus_i(llama, engine, front):
    direct(llama, 40)  # llama.cpp reuses a cached prompt prefix, which moves logits a little: start from that state
    result = front.chat.completions.create(model=engine.name, messages=JOKE, n=3, seed=40, **SAMPLING)
    assert [(c.index, c.model_extra["seed"]) for c in result.choices] == [(0, 40), (1, 41), (2, 42)]
    alone = [direct(llama, 40 + i) for i in range(3)]
    assert [c.message.content for c in result.choices] == [a["choices"][0]["message"]["content"] for a in alone]
    assert len({c.message.content for c in result.choices}) == 3
    assert result.usage.prompt_tokens == alone[0]["usage"]["prompt_tokens"]  # once, not three times
    assert result.usage.completion_tokens == sum(a["usage"]["completion_tokens"] for a in alone)


def test_completions_two_prompts_times_n2(llama, engine, front):
    prompts = ["Once upon a time, in a small village,", "The three most important things in life are"]
    result = front.completions.create(model=engine.name, prompt=prompts, n=2, seed=7, temperature=0.9, max_tokens=6)
    assert [(c.index, c.model_extra["seed"]) for c in result.choices] == [(0, 7), (1, 8), (2, 7), (3, 8)]
    assert all(c.text and c.finish_reason == "length" for c in result.choices)
    counts = [httpx.post(llama + "/completions", json={"prompt": p, "max_tokens": 1}, timeout=TIMEOUT).json()
              ["usage"]["prompt_tokens"] for p in prompts]
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (sum(counts), 4 * 6)


def test_stream_merges_choices_with_one_finish_each_and_one_usage_chunk(llama, engine, front):
    direct(llama, 60)
    stream = front.chat.completions.create(model=engine.name, messages=JOKE, n=3, seed=60, stream=True,
                                           stream_options={"include_usage": True}, **SAMPLING)
    chunks = list(stream)
    deltas = [c for chunk in chunks for c in chunk.choices]
    assert sorted(c.index for c in deltas if c.finish_reason) == [0, 1, 2]
    assert [chunk.usage is not None for chunk in chunks] == [False] * (len(chunks) - 1) + [True]
    texts = ["".join(c.delta.content or "" for c in deltas if c.index == i) for i in range(3)]
    alone = [direct(llama, 60 + i) for i in range(3)]
    assert texts == [a["choices"][0]["message"]["content"] for a in alone]
    # llama.cpp streams carry no usage: nsample counts text chunks and asks once for the prompt's size
    assert chunks[-1].usage.prompt_tokens == alone[0]["usage"]["prompt_tokens"]
    assert chunks[-1].usage.completion_tokens == sum(1 for c in deltas if c.delta.content)


def test_engine_stream_and_cancel(engine):
    events = engine.stream("The best thing about mornings is", n=2, seed=3, temperature=0.9, max_tokens=200)
    first = next(events)
    assert first.index in (0, 1) and first.seed == 3 + first.index
    events.close()
    deadline = time.monotonic() + 10
    while engine.load_info != {"waiting": 0, "active": 0}:
        assert time.monotonic() < deadline, engine.load_info
        time.sleep(0.05)
