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
