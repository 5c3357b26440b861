"""Structured outputs: each row's own grammar matcher masks its logits before its seeded noise, so every choice
matches the constraint and choice i of (s, n) equals (s + i, n = 1); the API's names for it; refused constraints."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import llguidance.hf
import pytest

from nsample import InvalidRequest, SamplingParams
from nsample.engine.structured import unpack_bitmask

pytest_plugins = ["api_fixtures"]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "colour": {"enum": ["red", "green", "blue"]},
                                           "tags": {"type": "array", "items": {"type": "string", "maxLength": 5},
                                                    "maxItems": 2}},
          "required": ["n", "colour"], "additionalProperties": False}


def test_every_choice_validates_and_the_seed_contract_holds(tiny_engine):
    many = tiny_engine.generate("Describe a thing", n=6, seed=11, max_tokens=60, json_schema=SCHEMA)
    for c in many.choices:
        assert c.finish_reason == "stop", c.text
        jsonschema.validate(json.loads(c.text), SCHEMA)
    assert len({c.text for c in many.choices}) > 1
    for i in (0, 4):
        alone = tiny_engine.generate("Describe a thing", n=1, seed=11 + i, max_tokens=60, json_schema=SCHEMA)
        assert alone.choices[0].token_ids == many.choices[i].token_ids


def test_length_ends_mid_json(tiny_engine):
    r = tiny_engine.generate("x", n=2, seed=1, max_tokens=3, json_schema=SCHEMA)
    assert all(c.finish_reason == "length" and c.text.startswith("{") for c in r.choices)


@pytest.mark.parametrize("kind,value,check", [
    ("regex", r"[0-9]{3}-[a-z]{2}", lambda t: len(t) == 6 and t[:3].isdigit() and t[3] == "-"),
    ("choice", ("alpha", "beta", "gamma"), lambda t: t in ("alpha", "beta", "gamma")),
    ("grammar", 'start: "yes" | "no" | "maybe"', lambda t: t in ("yes", "no", "maybe")),
])
def test_regex_choice_and_lark(tiny_engine, kind, value, check):
    r = tiny_engine.generate("Answer", n=4, seed=2, max_tokens=12, **{kind: value})
    assert all(check(c.text) and c.finish_reason == "stop" for c in r.choices), [c.text for c in r.choices]


def test_penalties_and_greedy_stay_inside_the_grammar(tiny_engine):
    r = tiny_engine.generate("Answer", n=3, temperature=0, max_tokens=12, choice=["left", "right"])
    assert len({c.text for c in r.choices}) == 1 and r.choices[0].text in ("left", "right")
    r = tiny_engine.generate("Answer", n=3, seed=5, max_tokens=30, regex="[ab]{4,8}", frequency_penalty=2,
                             top_p=0.5, top_k=3, logprobs=True)
    assert all(set(c.text) <= {"a", "b"} and 4 <= len(c.text) <= 8 for c in r.choices)


def test_refused_constraints(tiny_engine):
    with pytest.raises(InvalidRequest) as e:
        tiny_engine.submit("x", regex="((")
    assert e.value.param == "regex" and "unclosed group" in e.value.message
    with pytest.raises(InvalidRequest) as e:
        SamplingParams(regex="a", choice=["b"])
    assert e.value.param == "choice"
    with pytest.raises(InvalidRequest) as e:
        tiny_engine.submit("x", json_schema={"type": "object", "properties": {"a": {"type": "strin"}}})
    assert e.value.param == "json_schema"


def test_a_pydantic_model_is_a_schema():
    from pydantic import BaseModel

    class Point(BaseModel):
        x: int
        y: int

    assert SamplingParams(json_schema=Point).json_schema["required"] == ["x", "y"]


def test_bitmask_unpacking():
    import torch

    bits = torch.tensor([[0b101, -(2**31)], [0, 1]], dtype=torch.int32)
    assert unpack_bitmask(bits, 64)[0].nonzero().flatten().tolist() == [0, 2, 63]
    allowed = unpack_bitmask(bits, 40)  # the words' bits past the vocabulary are dropped
    assert allowed.shape == (2, 40)
    assert allowed[0].nonzero().flatten().tolist() == [0, 2] and allowed[1].nonzero().flatten().tolist() == [32]


# --- the API ----------------------------------------------------------------------------------------------------
def test_response_format_json_schema_on_chat(client, tiny_engine):
    r = client.chat.completions.create(
        model=tiny_engine.name, messages=[{"role": "user", "content": "A thing"}], n=3, seed=4, max_tokens=60,
        response_format={"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}})
    for c in r.choices:
        jsonschema.validate(json.loads(c.message.content), SCHEMA)


def test_the_first_constrained_request_never_stalls_the_others(http, tiny_engine, monkeypatch):
    """Building llguidance's tokenizer view (about 1.5 s) is held here until the other requests are answered: the
    server submits off its event loop, so a plain completion and /health go on while the first schema waits."""
    building, release = threading.Event(), threading.Event()
    real = llguidance.hf.from_tokenizer

    def held(*args, **kwargs):
        building.set()
        assert release.wait(60), "never released"
        return real(*args, **kwargs)

    monkeypatch.setattr(llguidance.hf, "from_tokenizer", held)
    monkeypatch.setattr(tiny_engine.grammars, "_view", None)  # as before the first constrained request
    chat = {"model": tiny_engine.name, "messages": [{"role": "user", "content": "x"}], "max_tokens": 30, "seed": 3,
            "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": {
                **SCHEMA, "title": "not compiled before"}}}}  # a compiled grammar is cached: it needs no view
    with ThreadPoolExecutor(1) as pool:
        constrained = pool.submit(http.post, "/v1/chat/completions", json=chat)
        try:
            assert building.wait(30), "the constrained request never reached the grammar library"
            assert http.get("/health", timeout=10).status_code == 200
            plain = http.post("/v1/completions", json={"model": tiny_engine.name, "prompt": "Hi", "max_tokens": 5,
                                                       "n": 2}, timeout=20)
            assert plain.status_code == 200 and len(plain.json()["choices"]) == 2
            assert not constrained.done()
        finally:
            release.set()
        r = constrained.result(timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("{")


def test_json_object_and_vllm_names(http, tiny_engine):
    chat = {"model": tiny_engine.name, "messages": [{"role": "user", "content": "x"}], "max_tokens": 40, "seed": 1}
    closing = {str(t): 8 for t in tiny_engine.tokenize("}") + tiny_engine.tokenize('"')}  # a random model, nudged
    r = http.post("/v1/chat/completions", json={**chat, "max_tokens": 200, "n": 4, "logit_bias": closing,
                                                "response_format": {"type": "json_object"}}).json()
    done = [c["message"]["content"] for c in r["choices"] if c["finish_reason"] == "stop"]
    assert len(done) >= 2 and all(isinstance(json.loads(text), dict) for text in done), r["choices"]
    for extra, allowed in [({"guided_choice": ["up", "down"]}, {"up", "down"}),
                           ({"structured_outputs": {"choice": ["on", "off"]}}, {"on", "off"}),
                           ({"structured_outputs": {"regex": "[xy]{2}"}}, {"xx", "xy", "yx", "yy"})]:
        body = {"model": tiny_engine.name, "prompt": "Q:", "max_tokens": 8, "n": 3, "seed": 2, **extra}
        texts = {c["text"] for c in http.post("/v1/completions", json=body).json()["choices"]}
        assert texts <= allowed, (extra, texts)


@pytest.mark.parametrize("extra,param", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "nope"}}}},
     "response_format"),
    ({"response_format": {"type": "json_schema"}}, "response_format"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"guided_regex": "(("}, "guided_regex"),
    ({"guided_regex": "a", "guided_choice": ["b"]}, "guided_choice"),
    ({"structured_outputs": {"grammar": "start: ((("}}, "structured_outputs.grammar"),
])
def test_bad_constraints_are_400s_naming_the_field(http, tiny_engine, extra, param):
    body = {"model": tiny_engine.name, "messages": [{"role": "user", "content": "x"}], "max_tokens": 4, **extra}
    r = http.post("/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
