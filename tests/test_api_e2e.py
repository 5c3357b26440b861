"""End to end on the embedded SmolLM2-135M-Instruct: the openai client against a live server (slower; -m e2e)."""
import json

import httpx
import openai
import pytest
from api_helpers import TIMEOUT
from live_server import live_server

from nsample.server import ServerConfig, create_app

pytestmark = pytest.mark.e2e
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def smol_url(smol_engine):
    with live_server(create_app(smol_engine, ServerConfig())) as url:
        yield url


def test_greedy_n2_knows_the_answer(smol_url, smol_engine):
    client = openai.OpenAI(base_url=f"{smol_url}/v1", api_key="-", max_retries=0, timeout=TIMEOUT)
    r = client.chat.completions.create(model=smol_engine.name, messages=QUESTION, n=2, temperature=0, max_tokens=16,
                                       logprobs=True)
    a, b = r.choices
    assert a.message.content == b.message.content and "Paris" in a.message.content
    assert r.usage.completion_tokens == len(a.logprobs.content) + len(b.logprobs.content)


def test_stream_n3_then_one_choice_alone(smol_url, smol_engine):
    body = {"model": smol_engine.name, "messages": QUESTION, "n": 3, "seed": 5, "max_tokens": 12, "stream": True,
            "stream_options": {"include_usage": True}}
    texts, finishes, usage = ["", "", ""], [0, 0, 0], []
    with httpx.Client(base_url=smol_url, timeout=TIMEOUT) as http, \
            http.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            usage += [chunk["usage"]] if chunk["usage"] else []
            for ch in chunk["choices"]:
                texts[ch["index"]] += ch["delta"].get("content") or ""
                finishes[ch["index"]] += ch["finish_reason"] is not None
                assert ch["seed"] == 5 + ch["index"]
    assert finishes == [1, 1, 1] and all(texts) and len(usage) == 1
    client = openai.OpenAI(base_url=f"{smol_url}/v1", api_key="-", max_retries=0, timeout=TIMEOUT)
    alone = client.chat.completions.create(model=smol_engine.name, messages=QUESTION, seed=7, max_tokens=12)
    assert alone.choices[0].message.content == texts[2]


EMOJI = [{"role": "user", "content": "Repeat exactly this text: 日本語 😀"}]


def assert_joins(joined: bytes, text: str) -> None:
    """The tokens' bytes are the text, and at most the start of a character that max_tokens cut off."""
    assert joined.startswith(text.encode())
    tail = joined[len(text.encode()):]
    assert len(tail) < 4 and tail.decode(errors="ignore") == ""


def _events(url: str, path: str, body: dict) -> list[dict]:
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http, http.stream("POST", path, json=body) as r:
        assert r.status_code == 200
        return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]


@pytest.mark.parametrize("stream", [False, True])
def test_chat_logprob_bytes_join_into_the_content(smol_url, smol_engine, stream):
    body = {"model": smol_engine.name, "messages": EMOJI, "temperature": 0, "max_tokens": 20, "logprobs": True,
            "top_logprobs": 2, "stream": stream}
    if stream:
        chunks = [c for e in _events(smol_url, "/v1/chat/completions", body) for c in e["choices"]]
        content = "".join(c["delta"].get("content") or "" for c in chunks)
        entries = [t for c in chunks if c["logprobs"] for t in c["logprobs"]["content"]]
    else:
        r = httpx.post(f"{smol_url}/v1/chat/completions", json=body, timeout=TIMEOUT).json()
        content, entries = r["choices"][0]["message"]["content"], r["choices"][0]["logprobs"]["content"]
    assert len(entries) == 20 and any(ord(ch) > 0xFFFF for ch in content)  # an emoji, split across tokens
    assert_joins(bytes(b for t in entries for b in t["bytes"]), content)
    assert any(t["token"] == "\ufffd" for t in entries)  # a part of a character: its bytes decoded with replacement
    for t in entries:
        assert t["token"] == bytes(t["bytes"]).decode(errors="replace")
        assert all(a["token"] == bytes(a["bytes"]).decode(errors="replace") for a in t["top_logprobs"])


@pytest.mark.parametrize("stream", [False, True])
def test_completion_tokens_name_their_bytes(smol_url, smol_engine, stream):
    prompt = smol_engine.tokenizer.apply_chat_template(EMOJI, add_generation_prompt=True, tokenize=False)
    body = {"model": smol_engine.name, "prompt": prompt, "temperature": 0, "max_tokens": 20, "logprobs": 2,
            "stream": stream}
    if stream:
        chunks = [c for e in _events(smol_url, "/v1/completions", body) for c in e["choices"]]
        text = "".join(c["text"] for c in chunks)
        tokens = [t for c in chunks if c["logprobs"] for t in c["logprobs"]["tokens"]]
        offsets = [o for c in chunks if c["logprobs"] for o in c["logprobs"]["text_offset"]]
    else:
        choice = httpx.post(f"{smol_url}/v1/completions", json=body, timeout=TIMEOUT).json()["choices"][0]
        text, tokens, offsets = choice["text"], choice["logprobs"]["tokens"], choice["logprobs"]["text_offset"]
    joined = b"".join(bytes.fromhex(t[6:].replace("\\x", "")) if t.startswith("bytes:") else t.encode()
                      for t in tokens)
    assert_joins(joined, text)
    assert any(t.startswith("bytes:\\x") for t in tokens)
    assert offsets == sorted(offsets) and offsets[0] == 0 and offsets[-1] <= len(text)
