"""Slow and oversized clients: a 413 the client can read, 408 for a body that trickles in, closed connections for
a head that never completes; meanwhile other clients are served. (The full runs: scripts/abuse.py.)"""
import socket
import time

import httpx
import pytest
from api_helpers import HELLO, MODEL, TIMEOUT, chat_body, error_of
from live_server import live_server

from nsample.server import ServerConfig, create_app
from nsample.server.connections import with_head_deadline

CHAT = "/v1/chat/completions"
DEADLINE = 1.0  # seconds, for head and body


@pytest.fixture(scope="module")
def url(tiny_engine):
    app = create_app(tiny_engine, ServerConfig(request_timeout_s=DEADLINE))
    with live_server(app, http=with_head_deadline(DEADLINE)) as url:
        yield url


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=TIMEOUT)


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_oversized_bodies_get_a_413_the_client_can_read(url):
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * (10 * 2**20) + b'"}]}'
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        r = http.post(CHAT, content=big, headers={"content-type": "application/json"})  # was a connection reset
        assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"
        r = http.post(CHAT, content=iter([big[k:k + 2**20] for k in range(0, len(big), 2**20)]),
                      headers={"content-type": "application/json"})
        assert r.status_code == 413 and "content-length" not in r.request.headers
        assert http.post(CHAT, json=chat_body()).status_code == 200


def test_a_body_that_trickles_in_gets_408_and_others_are_served(url):
    body = b'{"model": "' + MODEL.encode() + b'", "messages": []}'
    with connect(url) as sock, httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:5])
        start = time.monotonic()
        assert http.post(CHAT, json=chat_body()).status_code == 200  # not stalled behind the slow one
        head, _, payload = answer(sock).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408") and b"connection: close" in head.lower()
        assert b'"code":"request_timeout"' in payload
        assert DEADLINE - 0.1 < time.monotonic() - start < DEADLINE + 5


@pytest.mark.parametrize("sent", [b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"])
def test_a_head_that_never_completes_is_closed(url, sent):
    with connect(url) as sock:
        sock.sendall(sent)
        start = time.monotonic()
        assert answer(sock) == b""
        assert DEADLINE - 0.1 < time.monotonic() - start < DEADLINE + 5


def test_kept_alive_connections_serve_requests_and_are_closed_when_idle(url):
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        for _ in range(3):
            assert http.get("/v1/models").status_code == 200
            time.sleep(DEADLINE / 3)
    request = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with connect(url) as sock:
        sock.sendall(request)
        time.sleep(0.2)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        start = time.monotonic()
        assert answer(sock) == b""  # then closed: by the next head's deadline or uvicorn's keep-alive timeout
        assert time.monotonic() - start < DEADLINE + 6


def test_a_thousand_messages_and_huge_stop_strings(url, tiny_engine):
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        many = [{"role": ("user", "assistant")[i % 2], "content": f"message {i}"} for i in range(1000)]
        r = http.post(CHAT, json=chat_body(messages=many))
        assert r.status_code == 400 and error_of(r)["code"] == "context_length_exceeded"
        stops = ["x" * 100_000] * 4
        r = http.post(CHAT, json=chat_body(messages=HELLO, n=4, max_tokens=16, stop=stops, ignore_eos=True))
        assert r.status_code == 200 and [c["finish_reason"] for c in r.json()["choices"]] == ["length"] * 4
