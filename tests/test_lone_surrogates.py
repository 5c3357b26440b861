"""Text with a lone surrogate ("\\ud800", valid JSON, not Unicode) is refused with a 400 naming the parameter, at
every door: the API, the library (local and remote engines) and the page. Bodies are sent as bytes, escaped the way
clients send them (json.dumps with ensure_ascii); httpx's own JSON encoder cannot encode such text at all."""
import json

import httpx
import pytest
from api_helpers import MODEL, error_of
from live_server import live_server
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from nsample.errors import InvalidRequest
from nsample.models.prompts import Chat
from nsample.remote import RemoteConfig, RemoteEngine
from nsample.server import ServerConfig, create_app
from nsample.ui import build_app, decide, handlers, ratings
from nsample.ui.run import Run, RunSpec

pytest_plugins = ["api_fixtures"]  # base_url, http

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
BROKEN = "\ud800 broken"


def user(content) -> list[dict]:
    return [{"role": "user", "content": content}]


CASES = [  # (path, fields over a valid body, param)
    (CHAT, {"messages": user(BROKEN)}, "messages.[0].content"),
    (CHAT, {"messages": user([{"type": "text", "text": "ok"}, {"type": "text", "text": "\udfff"}])},
     "messages.[0].content.[1].text"),
    (CHAT, {"messages": [{"role": "user", "content": "Hi", "name": BROKEN}]}, "messages.[0].name"),
    (CHAT, {"messages": user("Hi") + [{"role": "assistant", "content": BROKEN}], "continue_final_message": True},
     "messages.[1].content"),
    (CHAT, {"stop": BROKEN}, "stop"),
    (CHAT, {"stop": ["ok", BROKEN]}, "stop.[1]"),
    (CHAT, {"model": BROKEN}, "model"),
    (CHAT, {"metadata": {BROKEN: "x"}}, "metadata"),
    (CHAT, {"guided_json": {"enum": ["ok", BROKEN]}}, "guided_json.enum.[1]"),
    (COMPLETIONS, {"prompt": "ok \udfff"}, "prompt"),
    (COMPLETIONS, {"prompt": ["ok", "ok \udfff"]}, "prompt.[1]"),
    (COMPLETIONS, {"prompt": BROKEN, "echo": True}, "prompt"),
    (COMPLETIONS, {"stop": [BROKEN]}, "stop.[0]"),
]


def post(http: httpx.Client, path: str, body: dict) -> httpx.Response:
    base = {"model": MODEL, "max_tokens": 4, **({"messages": user("Hi")} if path == CHAT else {"prompt": "Hi"})}
    return http.post(path, content=json.dumps({**base, **body}).encode(), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("path,fields,param", CASES)
def test_the_api_refuses_a_lone_surrogate_naming_the_parameter(http, path, fields, param, stream):
    r = post(http, path, {**fields, "stream": stream})
    assert r.status_code == 400, r.text
    err = error_of(r)
    assert (err["type"], err["code"], err["param"]) == ("invalid_request_error", "invalid_value", param)
    assert "lone surrogate" in err["message"] and param in err["message"]


def test_a_key_pydantic_cannot_read_is_refused_too(http):
    err = error_of(r := post(http, CHAT, {"messages": [{"role": "user", "content": "Hi", BROKEN: 1}]}))
    assert r.status_code == 400 and (err["param"], err["code"]) == ("messages.[0]", "invalid_value")
    err = error_of(r := post(http, CHAT, {BROKEN: 1}))
    assert r.status_code == 400 and err["param"] is None and "lone surrogate" in err["message"]


def test_surrogates_sent_as_raw_utf8_bytes_are_refused(http):
    """CESU-8 bytes of U+D800 (ED A0 80): json.loads decodes them with surrogatepass, into the same lone surrogate."""
    body = b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}], "max_tokens": 2}'
    r = http.post(CHAT, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and error_of(r)["param"] == "messages.[0].content"


def test_whole_surrogate_pairs_are_text(http):
    r = post(http, CHAT, {"messages": user("\ud83d\ude00 a cat")})  # json.dumps escapes the emoji as a pair
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("prompt,kw,param", [
    ("\ud800", {}, "prompt"),
    (user("ok \udfff"), {}, "messages.[0].content"),
    (user([{"type": "text", "text": "\ud800"}]), {}, "messages.[0].content.[0].text"),
    (Chat(user("Hi") + [{"role": "assistant", "content": BROKEN}]), {}, "messages.[1].content"),
    ("Hi", {"stop": ["\udfff"]}, "stop"),
    ("Hi", {"regex": "a\ud800"}, "regex"),
])
def test_the_library_raises_invalid_request_not_type_error(tiny_engine, prompt, kw, param):
    with pytest.raises(InvalidRequest) as e:
        tiny_engine.generate(prompt, max_tokens=2, **kw)
    assert (e.value.param, e.value.code, e.value.status) == (param, "invalid_value", 400)
    assert tiny_engine.generate("Hi", max_tokens=2).choices[0].finish_reason  # the engine goes on


def test_the_remote_engine_refuses_before_sending(base_url):
    engine = RemoteEngine(RemoteConfig(base_url + "/v1"))
    try:
        for prompt, param in [(BROKEN, "prompt"), (user(BROKEN), "messages.[0].content")]:
            with pytest.raises(InvalidRequest) as e:
                engine.generate(prompt, max_tokens=2)
            assert e.value.param == param
    finally:
        engine.close()


def test_an_error_that_echoes_a_surrogate_is_still_a_utf8_body():
    body = InvalidRequest("Unknown thing 'x\ud800'.", param="\udfff").to_dict()
    assert json.dumps(body, ensure_ascii=False).encode() and body["error"]["param"] == "\\udfff"


async def _odd_upstream(request):
    """An upstream whose answer holds a lone surrogate (escaped, as JSON allows)."""
    if request.method == "GET":
        return Response(b'{"data": [{"id": "m"}]}', media_type="application/json")
    return Response(b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
                    b'"message": {"role": "assistant", "content": "bad \\ud800"}, "finish_reason": "stop"}]}',
                    media_type="application/json")


def test_an_upstream_answer_with_a_surrogate_is_relayed_with_a_replacement_character():
    """Not the client's fault, so not a 400; and no 500 either: U+FFFD in its place, as a decoder would put."""
    app = Starlette(routes=[Route("/v1/models", _odd_upstream), Route("/v1/chat/completions", _odd_upstream,
                                                                      methods=["POST"])])
    with live_server(app) as upstream:
        engine = RemoteEngine(RemoteConfig(upstream + "/v1", mode="fanout"))
        try:
            assert engine.generate(user("Hi"), max_tokens=2).choices[0].text == "bad \ufffd"
            with live_server(create_app(engine, ServerConfig())) as url:
                r = httpx.post(url + CHAT, json={"messages": user("Hi"), "max_tokens": 2}, timeout=30)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "bad \ufffd"
        finally:
            engine.close()


def test_the_page_refuses_every_text_box():
    boxes = {"system": (BROKEN, "", "", []), "user": ("", BROKEN, "", []), "prompt": ("", "", BROKEN, []),
             "stop": ("", "", "", ["\\n", BROKEN])}
    for param, (system, text, prompt, stop) in boxes.items():
        with pytest.raises(InvalidRequest) as e:
            RunSpec.from_ui("chat", system, text, prompt, 2, "", 1.0, 1.0, 8, stop)
        assert e.value.param == param and "lone surrogate" in e.value.message
    with pytest.raises(InvalidRequest) as e:
        RunSpec.from_ui("chat", "", "Hi", "", 2, "", 1.0, 1.0, 8, [], json_schema='{"enum": ["\ud800"]}')
    assert e.value.param == "json_schema"
    with pytest.raises(InvalidRequest, match="lone surrogate"):
        decide.extract_spec(decide.REGEX, "(\\d+)\ud800")
    with pytest.raises(InvalidRequest, match="lone surrogate"):
        decide.make_check("expected answer", "\udfff", "last number", False, (5.0, 512))
    with pytest.raises(InvalidRequest, match="lone surrogate"):
        ratings.note(Run.start(RunSpec(), MODEL, [1, 2]), 0, BROKEN)


async def test_a_branch_or_link_reaches_the_engine_check(tiny_engine):
    """A spec the page did not parse (a link, a branch) still fails with the engine's InvalidRequest."""
    spec = RunSpec(mode="completion", prompt="ok", n=2, max_tokens=4)
    object.__setattr__(spec, "prompt", BROKEN)  # past RunSpec's own check
    with pytest.raises(InvalidRequest) as e:
        async for _ in handlers.generate(tiny_engine, spec):
            pass
    assert e.value.param == "prompt"


def test_the_page_shows_the_message(tiny_engine):
    """/generate of the mounted page, called as the browser does: the event ends in an error carrying the message."""
    # the run tree (a State), the Generate inputs in page order, then Blind and the Answers panel's extractor
    data = [None, "chat", "", BROKEN, "", 2, "", 1.0, 1.0, 4, [], False, "", False, "last number", ""]
    with live_server(build_app(tiny_engine)) as base, httpx.Client(base_url=base, timeout=60) as page:
        event = page.post("/gradio_api/call/generate", content=json.dumps({"data": data}).encode(),
                          headers={"Content-Type": "application/json"}).json()["event_id"]
        answer = page.get(f"/gradio_api/call/generate/{event}").text
    assert "event: error" in answer
    shown = json.loads(answer.split("event: error\ndata: ", 1)[1].splitlines()[0])
    assert shown["error"].startswith("Invalid 'user': the user message holds a lone surrogate (U+D800 at character 0)")
