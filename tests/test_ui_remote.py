"""The page's handlers on a RemoteEngine in front of a second nsample server: token counts from the relayed stream
(no token ids), logprob features, and their note when the upstream sends no logprobs."""
import json

import pytest
from live_server import live_server
from test_ui_handlers import collect, wait_idle

from nsample.errors import NSampleError
from nsample.remote import RemoteConfig, RemoteEngine
from nsample.server import ServerConfig, create_app
from nsample.ui import handlers, report
from nsample.ui.export import usage_table
from nsample.ui.ranking import rank
from nsample.ui.run import RunSpec
from nsample.ui.sweep import run_sweep

SPEC = RunSpec(mode="chat", user="Tell me a story.", n=3, seed=8, max_tokens=16)


class NoLogprobs:
    """ASGI middleware: the upstream ignores logprobs, as some servers do in streams."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        raw, more = b"", True
        while more:
            message = await receive()
            raw, more = raw + message.get("body", b""), message.get("more_body", False)
        body = {k: v for k, v in json.loads(raw).items() if k not in ("logprobs", "top_logprobs")}
        pending = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

        async def replay():
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)


class CutOff:
    """ASGI middleware: the upstream's streams break off after a few events, as when its server dies."""

    def __init__(self, app, events: int = 6):
        self.app, self.events = app, events

    async def __call__(self, scope, receive, send):
        sent = 0

        async def counting_send(message):
            nonlocal sent
            if message["type"] == "http.response.body" and message.get("more_body"):
                sent += 1
                if sent > self.events:
                    raise ConnectionResetError("upstream died")
            await send(message)

        await self.app(scope, receive, counting_send)


@pytest.fixture(scope="module")
def remote(tiny_engine):
    with live_server(create_app(tiny_engine, ServerConfig())) as url:
        engine = RemoteEngine(RemoteConfig(url + "/v1"))
        yield engine
        engine.close()


async def test_remote_cards_count_tokens(remote, tiny_engine):
    _, run = await collect(remote, SPEC)
    _, local = await collect(tiny_engine, SPEC)
    assert [c.text for c in run.cards] == [c.text for c in local.cards]  # the same choices, relayed
    assert all(c.counted and c.tokens > 0 for c in run.cards)
    assert all(r.tokens <= c.tokens for r, c in zip(run.cards, local.cards))  # held-back text merges chunks
    assert run.result.usage.completion_tokens == sum(c.tokens for c in local.cards)  # the upstream's usage
    rep = report.summarize(run)
    assert list(rep.tokens_figure.data[0].y) == [c.tokens for c in run.cards]
    assert (usage_table(run)["completion_tokens"] > 0).all()


async def test_remote_logprobs_count_tokens_exactly(remote, tiny_engine):
    spec = RunSpec(mode="completion", prompt="Once upon a time", n=2, seed=3, max_tokens=12, logprobs=True)
    _, run = await collect(remote, spec)
    _, local = await collect(tiny_engine, spec)
    assert [c.tokens for c in run.cards] == [c.tokens for c in local.cards] and not any(c.counted for c in run.cards)
    assert [c.mean_logprob for c in run.cards] == pytest.approx([c.mean_logprob for c in local.cards], abs=1e-4)
    assert rank(run, "logprob").order == rank(local, "logprob").order


async def test_one_remote_choice_takes_the_upstream_count(remote, tiny_engine):
    _, run = await collect(remote, RunSpec(mode="chat", user="Hi", n=1, seed=2, max_tokens=10))
    assert not run.cards[0].counted and run.cards[0].tokens == run.result.usage.completion_tokens > 0


async def test_upstream_without_logprobs_turns_the_features_off_with_a_note(tiny_engine):
    with live_server(NoLogprobs(create_app(tiny_engine, ServerConfig()))) as url:
        engine = RemoteEngine(RemoteConfig(url + "/v1"))
        try:
            _, run = await collect(engine, RunSpec(mode="completion", prompt="Hi", n=2, seed=1, max_tokens=8,
                                                   logprobs=True))
        finally:
            engine.close()
    await wait_idle(tiny_engine)
    assert run.spec.logprobs and not run.has_logprobs and all(c.tokens > 0 for c in run.cards)
    ranking = rank(run, "logprob")
    assert ranking.order == [0, 1] and "upstream server sent no logprobs" in ranking.note


async def test_a_failing_upstream_leaves_a_reported_partial_run(tiny_engine):
    with live_server(CutOff(create_app(tiny_engine, ServerConfig()))) as url:
        engine = RemoteEngine(RemoteConfig(url + "/v1", mode="native"))
        try:
            stream = handlers.generate(engine, RunSpec(mode="completion", prompt="Count:", n=2, seed=1,
                                                       max_tokens=200))
            with pytest.raises(NSampleError):
                async for run in stream:
                    pass
        finally:
            engine.close()
    await wait_idle(tiny_engine)
    assert run.error and not run.done and run.ended and not run.cancelled
    assert {c.finish_reason for c in run.cards} == {"error"} and sum(c.tokens for c in run.cards) > 0
    rep = report.summarize(run)
    assert "Failed run" in rep.headline and list(rep.tokens_figure.data[0].y) == [c.tokens for c in run.cards]


def test_sweep_on_the_remote_engine(remote):
    view = run_sweep(remote, RunSpec(mode="chat", user="Hi", n=2, seed=1, max_tokens=6), [0.5, 1.0], [1.0])
    assert view.summary["temperature"].tolist() == [0.5, 1.0] and view.quality_figure is not None
    assert (view.summary["completion_tokens"] > 0).all() and not view.note  # relayed tokens are counted
