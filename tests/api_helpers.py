"""Helpers for the API tests: request bodies, SSE parsing, the OpenAI error shape, waiting, cancellation, raw
sockets."""
import json
import socket
import time

import httpx

from nsample.engine import Engine

MODEL = "nsample/tiny-random"
TIMEOUT = 60  # seconds; every client call is bounded
HELLO = [{"role": "user", "content": "Hello! Tell me a story."}]


def chat_body(**kw) -> dict:
    return {"model": MODEL, "messages": HELLO, "max_tokens": 8, "seed": 1, **kw}


def sse(response: httpx.Response) -> list:
    """The `data:` payloads of an SSE response, decoded (the final "[DONE]" kept as a string)."""
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
        else:
            assert line == "", f"unexpected SSE line {line!r}"
    return out


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["message"], body
    return body["error"]


def wait_until(predicate, timeout: float = 10.0) -> bool:
    """Poll `predicate` (a state with no event to await, such as the engine's load) until true or `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def idle(engine: Engine) -> bool:
    return engine.load_info == {"waiting": 0, "active": 0}


def record_submits(engine: Engine, monkeypatch) -> list:
    """The requests `engine` is given from now on (by a server in front of it too), to check how they ended: a
    long request left to run finishes within a test's wait for idle on the tiny model, so idle alone proves no
    cancellation."""
    reqs, submit = [], engine.submit
    monkeypatch.setattr(engine, "submit", lambda *a, **kw: reqs.append(submit(*a, **kw)) or reqs[-1])
    return reqs


def cut_short(reqs: list, max_tokens: int) -> bool:
    """Each request was cancelled before any of its choices reached max_tokens."""
    return all(r.cancelled and all(len(c.token_ids) < max_tokens for c in r.choices) for r in reqs)


def raw_post(base_url: str, path: str, body: dict) -> socket.socket:
    """Send a POST over a plain socket and return it unread, so a test can hang up whenever it likes."""
    host, port = base_url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
    return sock
