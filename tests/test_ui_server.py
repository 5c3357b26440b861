"""The one server (API routes + mounted page) on a real uvicorn: routes, the Gradio queue's concurrency, cancel."""
import time

import httpx
import pytest
from gradio_client import Client
from live_server import live_server

from nsample.server.config import ServerConfig
from nsample.ui import build_app

TIMEOUT = 120


@pytest.fixture(scope="module")
def server(tiny_engine):
    with live_server(build_app(tiny_engine)) as base:
        yield base
        wait_idle(tiny_engine)  # nothing may still wake this server's event loop once it is gone


def wait_idle(engine, timeout=20.0):
    deadline = time.monotonic() + timeout
    while engine.load_info != {"waiting": 0, "active": 0}:
        assert time.monotonic() < deadline, f"engine still busy: {engine.load_info}"
        time.sleep(0.05)


def inputs(n, max_tokens, seed="", prompt="Once upon a time", logprobs=False, json_schema=""):
    """The Generate inputs in page order: mode, system, user, prompt, n, seed, temperature, top_p, max_tokens, stop,
    logprobs, JSON schema."""
    return ["completion", "", "", prompt, n, seed, 1.0, 1.0, max_tokens, [], logprobs, json_schema]


def status_of(outputs) -> str:
    """The status line among the /generate outputs (cards, status, report, downloads; layout and state excluded)."""
    return next(v for v in outputs if isinstance(v, str) and v.split(":")[0] in ("Done", "Generating", "Stopped"))


def test_routes_share_the_port(server, tiny_engine):
    page = httpx.get(server + "/", timeout=30)
    assert page.status_code == 200 and "<html" in page.text.lower()
    models = httpx.get(server + "/v1/models", timeout=30).json()
    assert [m["id"] for m in models["data"]] == [tiny_engine.name]
    assert httpx.get(server + "/health", timeout=30).json()["status"] == "ok"
    assert httpx.get(server + "/gradio_api/info", timeout=30).status_code == 200


def test_generate_endpoint_streams_cards(server):
    client = Client(server, verbose=False)
    try:
        # 400 tokens: long enough to outlast the page's 50 ms update interval (24 took under one in C++ decode)
        job = client.submit(*inputs(3, 400, seed="5"), api_name="/generate")
        final = job.result(timeout=TIMEOUT)
        updates = job.outputs()
    finally:
        client.close()
    cards, status = final[:3], status_of(final)
    assert all('data-finish="length"' in c or 'data-finish="stop"' in c for c in cards)
    assert [f"seed {s}" in c for c, s in zip(cards, (5, 6, 7))] == [True] * 3
    assert status.startswith("Done: 3 choices")
    assert len(updates) >= 3  # submit, at least one partial update, the end


def test_each_page_session_is_its_own_client_for_fairness(server, tiny_engine, monkeypatch):
    clients, submit = [], tiny_engine.submit
    monkeypatch.setattr(tiny_engine, "submit", lambda *a, **kw: clients.append(kw.get("client")) or submit(*a, **kw))
    users = [Client(server, verbose=False) for _ in range(2)]
    try:
        for user in users:
            user.submit(*inputs(1, 4, seed="1"), api_name="/generate").result(timeout=TIMEOUT)
    finally:
        for user in users:
            user.close()
    assert len(clients) == 2 and all(c.startswith("page:") for c in clients) and clients[0] != clients[1]


def test_two_users_at_once_and_cancel_frees_the_engine(server, tiny_engine):
    long_client, short_client = Client(server, verbose=False), Client(server, verbose=False)
    try:
        long_job = long_client.submit(*inputs(4, 1000), api_name="/generate")
        deadline = time.monotonic() + TIMEOUT
        while tiny_engine.load_info["active"] < 1:  # the long run is decoding
            assert time.monotonic() < deadline
            time.sleep(0.02)
        short = short_client.submit(*inputs(2, 8), api_name="/generate").result(timeout=TIMEOUT)
        assert status_of(short).startswith("Done: 2 choices")
        assert not long_job.done(), "the second user waited for the first: the queue serialised them"
        long_job.cancel()
        wait_idle(tiny_engine)  # cancelling the Gradio event cancelled the engine request
    finally:
        long_client.close()
        short_client.close()


def test_sweep_endpoint_runs_the_grid(server):
    client = Client(server, verbose=False)
    try:
        # then the Answers panel's extractor and check (none here: no pass@k figure)
        job = client.submit("0.5, 1.2", "1.0", *inputs(2, 6, seed="3"), "last number", "", "none", "",
                            api_name="/sweep")
        status, diversity, quality, table = job.result(timeout=TIMEOUT)[:4]
    finally:
        client.close()
    assert status.startswith("Done: 2 points × 2 choices")
    assert diversity and quality  # both figures of the notebook
    assert [row[:2] for row in table["value"]["data"]] == [[0.5, 1.0], [1.2, 1.0]]


def test_api_key_guards_v1_only(tiny_engine):
    with live_server(build_app(tiny_engine, ServerConfig(api_key="sesame"))) as base:
        assert httpx.get(base + "/v1/models", timeout=30).status_code == 401
        ok = httpx.get(base + "/v1/models", headers={"Authorization": "Bearer sesame"}, timeout=30)
        assert ok.status_code == 200
        assert httpx.get(base + "/", timeout=30).status_code == 200  # the page stays open
