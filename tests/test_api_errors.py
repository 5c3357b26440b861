"""Bad input: every case answers before any generation (streaming or not) with the OpenAI error body."""
import httpx
import openai
import pytest
from api_helpers import HELLO, MODEL, chat_body, error_of, sse
from live_server import live_server

from nsample.outputs import StreamEvent
from nsample.request import Request
from nsample.sampling_params import SamplingParams
from nsample.server import create_app

pytest_plugins = ["api_fixtures"]  # base_url, client, aclient, http

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
LONG_CHAT = [{"role": "user", "content": "word " * 2100}]  # the tiny model's context is 2048 tokens

CASES = [  # (path, fields that replace the valid defaults, status, param, code)
    (CHAT, {"n": 0}, 400, "n", "integer_below_min_value"),
    (CHAT, {"n": -3}, 400, "n", "integer_below_min_value"),
    (CHAT, {"n": 1.5}, 400, "n", "invalid_type"),
    (CHAT, {"n": "2"}, 400, "n", "invalid_type"),
    (CHAT, {"n": True}, 400, "n", "invalid_type"),
    (CHAT, {"n": 129}, 400, "n", "integer_above_max_value"),
    (CHAT, {"temperature": 2.5}, 400, "temperature", "decimal_above_max_value"),
    (CHAT, {"temperature": -0.1}, 400, "temperature", "decimal_below_min_value"),
    (CHAT, {"temperature": "hot"}, 400, "temperature", "invalid_type"),
    (CHAT, {"top_p": 1.5}, 400, "top_p", "decimal_above_max_value"),
    (CHAT, {"presence_penalty": 2.5}, 400, "presence_penalty", "decimal_above_max_value"),
    (CHAT, {"frequency_penalty": -3}, 400, "frequency_penalty", "decimal_below_min_value"),
    (CHAT, {"logprobs": True, "top_logprobs": 21}, 400, "top_logprobs", "integer_above_max_value"),
    (CHAT, {"top_logprobs": 2}, 400, "top_logprobs", "invalid_value"),
    (CHAT, {"stop": ["a", "b", "c", "d", "e"]}, 400, "stop", "array_above_max_length"),
    (CHAT, {"stop": [""]}, 400, "stop", "invalid_value"),
    (CHAT, {"max_tokens": 0}, 400, "max_tokens", "integer_below_min_value"),
    (CHAT, {"max_tokens": None, "max_completion_tokens": 0}, 400, "max_completion_tokens", "integer_below_min_value"),
    (CHAT, {"seed": 2**63}, 400, "seed", "integer_above_max_value"),
    (CHAT, {"logit_bias": {"abc": 1}}, 400, "logit_bias", "invalid_value"),
    (CHAT, {"logit_bias": {"1": 101}}, 400, "logit_bias", "decimal_above_max_value"),
    (CHAT, {"logit_bias": {"99999999": 1}}, 400, "logit_bias", "invalid_value"),
    (CHAT, {"messages": []}, 400, "messages", "empty_array"),
    (CHAT, {"messages": "hi"}, 400, "messages", "invalid_type"),
    (CHAT, {"messages": None}, 400, "messages", "invalid_type"),
    (CHAT, {"messages": [{"role": "robot", "content": "x"}]}, 400, "messages.[0].role", "invalid_value"),
    (CHAT, {"messages": [{"role": "user"}]}, 400, "messages.[0].content", "missing_required_parameter"),
    (CHAT, {"messages": [{"role": "user", "content": 3}]}, 400, "messages.[0].content", "invalid_type"),
    (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}]},
     400, "messages.[0].content", "invalid_value"),
    (CHAT, {"messages": [{"role": "assistant", "content": "x", "tool_calls": []}]}, 400, "messages.[0].tool_calls",
     "unknown_parameter"),
    (CHAT, {"messages": LONG_CHAT}, 400, "messages", "context_length_exceeded"),
    (CHAT, {"tools": [{"type": "function", "function": {"name": "f"}}]}, 400, "tools", "unsupported_parameter"),
    (CHAT, {"tool_choice": "required"}, 400, "tool_choice", "unsupported_parameter"),
    (CHAT, {"functions": [{"name": "f"}]}, 400, "functions", "unsupported_parameter"),
    (CHAT, {"response_format": {"type": "json_object", "json_schema": 3}}, 400, "response_format.json_schema",
     "invalid_type"),
    (CHAT, {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, 400,
     "response_format.json_schema.name", "missing_required_parameter"),
    (CHAT, {"frobnicate": 1}, 400, "frobnicate", "unknown_parameter"),
    (CHAT, {"model": "gpt-4o"}, 404, "model", "model_not_found"),
    (COMPLETIONS, {"suffix": "x"}, 400, "suffix", "unsupported_parameter"),
    (COMPLETIONS, {"n": 2, "best_of": 1}, 400, "best_of", "invalid_value"),
    (COMPLETIONS, {"best_of": 21}, 400, "best_of", "invalid_value"),
    (COMPLETIONS, {"n": 0, "best_of": 2}, 400, "n", "integer_below_min_value"),
    (COMPLETIONS, {"max_tokens": 0}, 400, "max_tokens", "integer_below_min_value"),
    (COMPLETIONS, {"echo": True, "logprobs": 1, "prompt_logprobs": 21}, 400, "prompt_logprobs",
     "integer_above_max_value"),
    (CHAT, {"prompt_logprobs": -1}, 400, "prompt_logprobs", "integer_below_min_value"),
    (CHAT, {"prompt_logprobs": True}, 400, "prompt_logprobs", "invalid_type"),
    (COMPLETIONS, {"logprobs": 6}, 400, "logprobs", "invalid_value"),
    (COMPLETIONS, {"prompt": []}, 400, "prompt", "empty_array"),
    (COMPLETIONS, {"prompt": ["a", 1]}, 400, "prompt", "invalid_type"),
    (COMPLETIONS, {"prompt": [999999999]}, 400, "prompt", "invalid_value"),
    (COMPLETIONS, {"prompt": [[]]}, 400, "prompt", "empty_array"),
    (COMPLETIONS, {"prompt": [[1], []]}, 400, "prompt", "empty_array"),
    (COMPLETIONS, {"prompt": list(range(100, 2200))}, 400, "prompt", "context_length_exceeded"),
    (COMPLETIONS, {"prompt": [[100, 101], list(range(100, 2200))]}, 400, "prompt", "context_length_exceeded"),
    (COMPLETIONS, {"prompt": ["p"] * 65}, 400, "prompt", "array_above_max_length"),
    (COMPLETIONS, {"model": "text-davinci-003"}, 404, "model", "model_not_found"),
]


def body_for(path: str, fields: dict) -> dict:
    base = chat_body() if path == CHAT else {"model": MODEL, "prompt": "Hello", "max_tokens": 4}
    return {k: v for k, v in {**base, **fields}.items() if v is not None or k == "messages"}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path,fields,status,param,code", CASES)
def test_invalid_input(http, tiny_engine, path, fields, status, param, code, stream):
    r = http.post(path, json={**body_for(path, fields), "stream": stream})
    assert r.status_code == status, r.text
    err = error_of(r)
    assert (err["param"], err["code"]) == (param, code), err
    assert err["type"] == "invalid_request_error"


def test_stream_options_need_stream(http):
    err = error_of(http.post(CHAT, json=chat_body(stream_options={"include_usage": True})))
    assert (err["param"], err["code"]) == ("stream_options", "invalid_value")


def test_best_of_cannot_stream(http):
    r = http.post(COMPLETIONS, json={"model": MODEL, "prompt": "Hi", "best_of": 2, "stream": True})
    assert r.status_code == 400 and error_of(r)["param"] == "best_of"


@pytest.mark.parametrize("content,headers", [
    (b'{"messages": [', {"content-type": "application/json"}),
    (b"[1, 2]", {"content-type": "application/json"}),
    (b"", {"content-type": "application/json"}),
    (b"null", {"content-type": "application/json"}),
    (b'{"messages": []}', {"content-type": "text/plain"}),
    (b'{"messages": []}', {}),
])
def test_malformed_bodies(http, content, headers):
    r = http.post(CHAT, content=content, headers=headers)
    assert r.status_code == 400
    err = error_of(r)
    assert err["code"] == "invalid_json" and err["type"] == "invalid_request_error"


def test_unknown_route_and_method_keep_the_error_shape(http):
    assert error_of(r := http.get("/v1/nothing-here"))["code"] == "not_found" and r.status_code == 404
    assert error_of(r := http.get(CHAT))["code"] == "method_not_allowed" and r.status_code == 405


def test_openai_client_sees_param_and_code(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=HELLO, n=0)
    assert (e.value.status_code, e.value.param, e.value.code) == (400, "n", "integer_below_min_value")
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=HELLO)
    assert e.value.code == "model_not_found"


def test_engine_stays_usable_after_bad_input(http):
    assert http.post(CHAT, json=chat_body(n=0)).status_code == 400
    assert http.post(CHAT, json=chat_body(n=2)).status_code == 200


class FailingEngine:
    """The tiny engine, except that every request fails after its first token, as a broken worker would."""

    def __init__(self, engine):
        self.engine = engine

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def submit(self, prompt, params=None, client=None, **kw):
        p = SamplingParams.from_kwargs(params, **kw)
        req = Request([1, 2], p, list(range(p.n)), 4, self.engine.name)
        req.publish([StreamEvent(index=0, text="partial", token_ids=[5], seed=0)])
        req.finish(RuntimeError("boom"))
        return req


def test_engine_failure_is_a_500_or_one_error_event(tiny_engine):
    with live_server(create_app(FailingEngine(tiny_engine))) as url, httpx.Client(base_url=url, timeout=30) as http:
        r = http.post(CHAT, json=chat_body(n=2))
        assert r.status_code == 500 and error_of(r)["type"] == "server_error"
        with http.stream("POST", CHAT, json=chat_body(n=2, stream=True, stream_options={"include_usage": True})) as r:
            events = sse(r)
        assert [e["choices"][0]["delta"] for e in events[:3]] == [{"role": "assistant", "content": ""}] * 2 + \
               [{"content": "partial"}]
        assert events[3]["error"]["type"] == "server_error" and "RuntimeError" in events[3]["error"]["message"]
        assert events[4:] == ["[DONE]"]
