"""Auto mode in front of an upstream that cuts a running stream short when the next request arrives.

The upstream is nsample on the tiny model behind an ASGI wrapper that behaves as llama-cpp-python does with its
default --interrupt_requests: the running stream ends with [DONE] and no finish_reason once another request
comes in. Unlike llama.cpp it does so after text was sent, so the retry must pick up where the client is.
"""
import re
import threading

import pytest
from api_helpers import idle, wait_until
from live_server import live_server

from nsample.remote import RemoteConfig, RemoteEngine
from nsample.server import ServerConfig, create_app

LONG = {"max_tokens": 40, "ignore_eos": True, "temperature": 1.0}
DONE = b"data: [DONE]\n\n"
TEXT = re.compile(rb'"(text|content)":"[^"]')  # a chunk with text in it


class Interrupter:
    """ASGI wrapper: a POST's stream is cut short (after its current chunk) when a later POST has arrived."""

    def __init__(self, app):
        self.app, self.arrived, self.cuts = app, 0, 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        self.arrived += 1
        mine, cut = self.arrived, False

        async def cutting(message):
            nonlocal cut
            if cut:
                return  # the app goes on generating; nobody hears it
            texts = message["type"] == "http.response.body" and TEXT.search(message.get("body", b""))
            if texts and self.arrived != mine and message.get("more_body"):
                cut = True
                self.cuts += 1
                message = {**message, "body": message["body"] + DONE, "more_body": False}
            await send(message)

        await self.app(scope, receive, cutting)


@pytest.fixture
def upstream(tiny_engine):
    interrupter = Interrupter(create_app(tiny_engine, ServerConfig()))
    with live_server(interrupter) as url:
        interrupter.url = url + "/v1"
        yield interrupter
    assert wait_until(lambda: idle(tiny_engine), timeout=30)


def test_a_cut_stream_is_resumed_one_request_at_a_time_and_said_once(upstream, tiny_engine, caplog):
    engine = RemoteEngine(RemoteConfig(upstream.url))  # auto
    try:
        first = engine.stream("Once upon a time", n=1, seed=5, **LONG)
        events = [next(first)]
        while not events[-1].text:
            events.append(next(first))  # text reached the client: the cut comes after it
        second: list = []
        other = threading.Thread(target=lambda: second.extend(engine.stream("The sea", n=1, seed=6, **LONG)))
        other.start()
        events += list(first)
        other.join(timeout=60)
        assert upstream.cuts >= 1 and engine.upstream.serial
        for evs, prompt, seed in ((events, "Once upon a time", 5), (second, "The sea", 6)):
            alone = tiny_engine.generate(prompt, n=1, seed=seed, **LONG).choices[0]
            assert "".join(ev.text for ev in evs) == alone.text  # the retry continued, nothing sent twice
            assert [ev.finish_reason for ev in evs if ev.finish_reason] == ["length"]
        cuts = upstream.cuts
        assert engine.generate("Hello", n=3, seed=1, max_tokens=8).choices[2].seed == 3
        assert upstream.cuts == cuts  # one at a time now: nothing more to cut
    finally:
        engine.close()
    said = [r for r in caplog.records if r.name == "nsample.remote" and "one request at a time" in r.getMessage()]
    assert len(said) == 1
