"""Streaming (SSE): chunk layout, interleaving, finish and usage chunks, and cancellation when the client leaves."""
from api_helpers import HELLO, MODEL, chat_body, cut_short, idle, raw_post, record_submits, sse, wait_until
from live_server import live_server

from nsample import EngineConfig
from nsample.engine import Engine
from nsample.server import create_app

pytest_plugins = ["api_fixtures"]  # base_url, client, aclient, http

NO_EOS = {"ignore_eos": True}


def stream(http, path: str, body: dict) -> list:
    with http.stream("POST", path, json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return sse(r)


def test_chat_stream_layout(http):
    body = chat_body(n=3, seed=20, max_tokens=12, ignore_eos=True, stream=True, stream_options={"include_usage": True})
    events = stream(http, "/v1/chat/completions", body)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len({(c["id"], c["created"], c["model"], c["system_fingerprint"]) for c in chunks}) == 1
    assert all(c["object"] == "chat.completion.chunk" and "usage" in c for c in chunks)
    # the role chunk of every choice comes first
    assert [(c["choices"][0]["index"], c["choices"][0]["delta"]) for c in chunks[:3]] == \
           [(i, {"role": "assistant", "content": ""}) for i in range(3)]
    # exactly one usage chunk, last, with no choices; usage null everywhere else
    usage = [c for c in chunks if c["usage"] is not None]
    assert usage == [chunks[-1]] and chunks[-1]["choices"] == []
    deltas = [(k, c["choices"][0]) for k, c in enumerate(chunks[:-1])]
    assert all(len(c["choices"]) == 1 for c in chunks[:-1])
    assert all(ch["seed"] == 20 + ch["index"] for _, ch in deltas)
    finish = {ch["index"]: k for k, ch in deltas if ch["finish_reason"]}
    assert sorted(finish) == [0, 1, 2] and len([1 for _, ch in deltas if ch["finish_reason"]]) == 3
    assert all(k <= finish[ch["index"]] for k, ch in deltas)  # nothing for a choice after its finish chunk
    first_text = {i: min(k for k, ch in deltas if ch["index"] == i and ch["delta"].get("content")) for i in range(3)}
    assert max(first_text.values()) < min(finish.values())  # interleaved, not one choice after another
    texts = {i: "".join(ch["delta"].get("content") or "" for _, ch in deltas if ch["index"] == i) for i in range(3)}
    whole = http.post("/v1/chat/completions", json={**body, "stream": False, "stream_options": None}).json()
    assert [texts[i] for i in range(3)] == [c["message"]["content"] for c in whole["choices"]]
    assert chunks[-1]["usage"] == whole["usage"] and whole["usage"]["completion_tokens"] == 36


def test_stream_without_include_usage_has_no_usage_chunk(http):
    events = stream(http, "/v1/chat/completions", chat_body(n=2, stream=True))
    assert events[-1] == "[DONE]" and all(c["choices"] and c["usage"] is None for c in events[:-1])


def test_chat_stream_with_logprobs(http):
    events = stream(http, "/v1/chat/completions", chat_body(n=2, stream=True, logprobs=True, top_logprobs=2,
                                                            ignore_eos=True))
    per_choice = {0: 0, 1: 0}
    for c in events[:-1]:
        ch = c["choices"][0]
        if ch["logprobs"]:
            per_choice[ch["index"]] += len(ch["logprobs"]["content"])
            assert all(len(t["top_logprobs"]) == 2 for t in ch["logprobs"]["content"])
    assert per_choice == {0: 8, 1: 8}


def test_completions_stream_two_prompts_echo(http):
    body = {"model": MODEL, "prompt": ["The cat", "A dog"], "n": 2, "seed": 6, "echo": True, "max_tokens": 6,
            "stream": True, "stream_options": {"include_usage": True}}
    events = stream(http, "/v1/completions", body)
    chunks = [c for c in events[:-1] if c["choices"]]
    assert all(c["object"] == "text_completion" for c in chunks)
    texts, finishes = {}, {}
    for c in chunks:
        ch = c["choices"][0]
        texts[ch["index"]] = texts.get(ch["index"], "") + ch["text"]
        finishes[ch["index"]] = finishes.get(ch["index"], 0) + (ch["finish_reason"] is not None)
    assert [chunks[i]["choices"][0]["text"] for i in range(4)] == ["The cat", "The cat", "A dog", "A dog"]
    assert finishes == {0: 1, 1: 1, 2: 1, 3: 1}
    whole = http.post("/v1/completions", json={**body, "stream": False, "stream_options": None}).json()
    assert [texts[i] for i in range(4)] == [c["text"] for c in whole["choices"]]
    assert events[-2]["usage"] == whole["usage"] and events[-2]["choices"] == []


def test_stream_with_openai_client(client):
    kw = {"model": MODEL, "messages": HELLO, "n": 2, "seed": 30, "max_tokens": 10}
    texts = {0: "", 1: ""}
    for chunk in client.chat.completions.create(**kw, stream=True):
        for ch in chunk.choices:
            texts[ch.index] += ch.delta.content or ""
    whole = client.chat.completions.create(**kw)
    assert [texts[0], texts[1]] == [c.message.content for c in whole.choices]


async def test_stream_with_async_openai_client(aclient):
    kw = {"model": MODEL, "prompt": "Hello", "n": 3, "seed": 31, "max_tokens": 10}
    texts, usage = {0: "", 1: "", 2: ""}, []
    async for chunk in await aclient.completions.create(**kw, stream=True, stream_options={"include_usage": True}):
        for ch in chunk.choices:
            texts[ch.index] += ch.text
        usage += [chunk.usage] if chunk.usage else []
    whole = await aclient.completions.create(**kw)
    assert [texts[i] for i in range(3)] == [c.text for c in whole.choices] and usage == [whole.usage]


def test_disconnect_mid_stream_cancels_all_choices(http, tiny_engine, monkeypatch):
    assert wait_until(lambda: idle(tiny_engine))
    submitted = record_submits(tiny_engine, monkeypatch)
    body = chat_body(n=4, max_tokens=1500, ignore_eos=True, stream=True)  # seconds of work if left running
    with http.stream("POST", "/v1/chat/completions", json=body) as r:
        seen, lines = set(), r.iter_lines()  # held: a dropped iterator closes the connection at once (a disconnect)
        for line in lines:
            if '"content":"' in line and '"content":""' not in line:
                seen.add(line.split('"index":')[1].split(",")[0])
            if len(seen) == 4:
                break
        assert tiny_engine.load_info == {"waiting": 0, "active": 1}
    assert wait_until(lambda: idle(tiny_engine), timeout=10)  # leaving the block hung up: all 4 choices stop
    assert len(submitted) == 1 and cut_short(submitted, 1500)


def test_disconnect_before_a_full_response_cancels(base_url, tiny_engine, monkeypatch):
    assert wait_until(lambda: idle(tiny_engine))
    submitted = record_submits(tiny_engine, monkeypatch)
    sock = raw_post(base_url, "/v1/completions", {"model": MODEL, "prompt": "Hi", "n": 3, "max_tokens": 1500,
                                                  "ignore_eos": True})
    try:
        assert wait_until(lambda: tiny_engine.load_info["active"] == 1)
    finally:
        sock.close()
    assert wait_until(lambda: idle(tiny_engine), timeout=10)
    assert len(submitted) == 1 and cut_short(submitted, 1500)


def test_disconnect_while_queued_before_the_first_token_cancels(tiny_engine, monkeypatch):
    engine = Engine(tiny_engine.model, tiny_engine.tokenizer, EngineConfig(max_active=1), MODEL)
    submitted = record_submits(engine, monkeypatch)
    long = {"model": MODEL, "messages": HELLO, "max_tokens": 1500, "ignore_eos": True, "stream": True}
    try:
        with live_server(create_app(engine)) as url:
            first = raw_post(url, "/v1/chat/completions", long)
            assert wait_until(lambda: engine.load_info == {"waiting": 0, "active": 1})
            queued = raw_post(url, "/v1/chat/completions", {**long, "n": 4})
            assert wait_until(lambda: engine.load_info == {"waiting": 1, "active": 1})
            queued.close()  # gone before its stream started: its request must leave the queue, not run later
            assert wait_until(lambda: engine.load_info == {"waiting": 0, "active": 1})
            first.close()
            assert wait_until(lambda: idle(engine), timeout=10)
            assert len(submitted) == 2 and cut_short(submitted, 1500)
            assert submitted[1].published == 0  # never ran
    finally:
        engine.close()


async def test_a_stream_body_closed_before_its_first_chunk_cancels_its_request(tiny_engine):
    from nsample.server import chat
    from nsample.server.fanin import Body

    req = tiny_engine.submit("Never read", n=2, max_tokens=1500, ignore_eos=True)
    body = Body(chat.stream({"id": "x", "created": 0, "model": MODEL, "system_fingerprint": "fp"}, req, False), [req])
    await body.aclose()  # the response ended before iterating (the client left as the first token came)
    assert req.cancelled and wait_until(lambda: idle(tiny_engine))
