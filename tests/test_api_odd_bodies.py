"""Bodies at the edges of JSON: NUL characters, numbers too long for their type, deep nesting, bytes that are not
UTF-8. Each is answered at once with a 200 or a clear OpenAI 4xx, never a 500. The bodies are written by hand, as
raw bytes, since no JSON encoder produces 1e400 or 10,000 levels."""
import json

import pytest
from api_helpers import MODEL, error_of

from nsample.server.protocol_values import MAX_DEPTH

pytest_plugins = ["api_fixtures"]  # base_url, http

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
NESTED = "[" * 10_000 + "]" * 10_000
OBJECTS = '{"a":' * 600 + "1" + "}" * 600  # parses (the parser gives up near 1,000 levels), too deep for nsample


def body(path: str, extra: str = "", **fields) -> bytes:
    """A valid body with `fields` set, then `extra` (raw JSON members, e.g. '"n": 1e308') spliced in."""
    base = {"model": MODEL, "max_tokens": 2, **({"messages": [{"role": "user", "content": "Hi"}]} if path == CHAT
                                                 else {"prompt": "Hi"}), **fields}
    text = json.dumps(base)
    return (text[:-1] + ", " + extra + "}" if extra else text).encode()


def post(http, path: str, content: bytes):
    return http.post(path, content=content, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("path,content", [
    (CHAT, body(CHAT, messages=[{"role": "user", "content": "a\u0000b"}])),
    (CHAT, body(CHAT, stop=["\u0000"])),
    (COMPLETIONS, body(COMPLETIONS, prompt="\u0000\u0000")),
    (COMPLETIONS, body(COMPLETIONS, prompt=["ok", "a\u0000"])),
    (CHAT, body(CHAT, extra='"top_k": 123456789012345678901234567890')),  # above the vocabulary: top-k is off
])
def test_nul_characters_and_huge_top_k_are_ordinary_input(http, path, content):
    r = post(http, path, content)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path,extra,param,code", [
    (CHAT, '"max_tokens": 1e400', "max_tokens", "invalid_type"),
    (CHAT, '"seed": 123456789012345678901234567890', "seed", "integer_above_max_value"),
    (CHAT, '"n": 1e308', "n", "invalid_type"),
    (CHAT, '"temperature": 1e309', "temperature", "decimal_above_max_value"),
    (CHAT, '"temperature": NaN', "temperature", "invalid_type"),
    (CHAT, '"logit_bias": {"99999999999999999999": 1}', "logit_bias", "invalid_value"),
    (CHAT, '"logit_bias": {"1": -1e400}', "logit_bias", "decimal_below_min_value"),
    (COMPLETIONS, '"best_of": 123456789012345678901234567890', "best_of", "invalid_value"),
    (COMPLETIONS, '"prompt": [123456789012345678901234567890]', "prompt", "invalid_value"),
    (CHAT, '"max_tokens": ' + "9" * 5000, None, "invalid_json"),  # beyond Python's int parsing limit
])
def test_numbers_too_long_for_their_type(http, path, extra, param, code):
    r = post(http, path, body(path, extra))
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert (err["param"], err["code"], err["type"]) == (param, code, "invalid_request_error")


@pytest.mark.parametrize("path,content,param,code", [
    (CHAT, body(CHAT).replace(b'"Hi"', NESTED.encode()), None, "invalid_json"),  # as a message's content
    (CHAT, body(CHAT, extra=f'"frobnicate": {NESTED}'), None, "invalid_json"),  # as an unknown field
    (CHAT, NESTED.encode(), None, "invalid_json"),  # as the whole body
    (COMPLETIONS, ('{"a":' * 10_000 + "1" + "}" * 10_000).encode(), None, "invalid_json"),
    (CHAT, body(CHAT, extra=f'"guided_json": {OBJECTS}'), "guided_json", "invalid_value"),
    (COMPLETIONS, body(COMPLETIONS, extra=f'"response_format": {{"type": "json_schema", "json_schema": {{"name": "x", '
                                           f'"schema": {OBJECTS}}}}}'), "response_format", "invalid_value"),
    (CHAT, body(CHAT, messages=[{"role": "user", "content": [{"type": "text", "text": "Hi", "x": 1}]}]).replace(
        b'"x": 1', b'"x": ' + OBJECTS.encode()), "messages", "invalid_value"),  # a content part's extra key
])
def test_deep_nesting_is_refused_clearly(http, path, content, param, code):
    r = post(http, path, content)
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert (err["param"], err["code"]) == (param, code)
    assert "nested too deeply" in err["message"] or f"deeper than {MAX_DEPTH} levels" in err["message"]


def test_a_schema_within_the_depth_limit_still_works(http):
    schema = '{"type": "object", "properties": {"a": ' * 30 + '{"type": "string"}' + "}}" * 30  # 61 levels
    r = post(http, CHAT, body(CHAT, extra=f'"guided_json": {schema}'))
    assert r.status_code == 200, r.text


def test_bytes_that_are_not_utf8(http):
    r = post(http, CHAT, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}')
    assert r.status_code == 400
    err = error_of(r)
    assert err["code"] == "invalid_json" and "not UTF-8" in err["message"]
