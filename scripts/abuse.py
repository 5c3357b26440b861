"""Slow and oversized clients: each gets a 4xx or is cut off in time, without memory growth or stalling others.

    python scripts/abuse.py                          # starts `nsample serve` (tiny model, 5 s request timeout)
    python scripts/abuse.py --url http://127.0.0.1:8000 --pid PID --request-timeout 30

Cases: a 10 MB body (with Content-Length, and chunked), a body sent one byte a second, a request head sent one
byte a second, 200 idle connections, 50 slow bodies at once, 1,000 chat messages, four 100k-character stop
strings with n=4. Throughout, a bystander client keeps sending small requests; a case fails when it does not end
as expected, or when a bystander request fails or takes longer than --stall-s. The server's memory (RSS) after all
cases must be within --rss-growth of its level before them. Exits 1 on any failure.
"""
import argparse
import asyncio
import json
import sys
import time

import httpx
from server_process import add_arguments, target

CHAT = "/v1/chat/completions"
SMALL = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
BODY = json.dumps(SMALL).encode()
HEAD = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n\r\n"
MB = 2**20


async def trickle(host: str, port: int, sent: bytes, slow: bytes, limit_s: float) -> str:
    """Send `sent` at once, then `slow` a byte a second: 'status NNN', 'closed', or 'still open' after limit_s."""
    reader, writer = await asyncio.open_connection(host, port)
    start = time.perf_counter()
    try:
        writer.write(sent)
        await writer.drain()
        for k in range(len(slow) + 1):
            try:
                answer = await asyncio.wait_for(reader.read(4096), 1.0)
            except asyncio.TimeoutError:
                if time.perf_counter() - start > limit_s:
                    return "still open"
                if k < len(slow):
                    writer.write(slow[k:k + 1])
                    await writer.drain()
                continue
            return f"status {answer.split()[1].decode()}" if answer else "closed"
        return "still open"
    except ConnectionError:
        return "closed"
    finally:
        writer.close()


async def idle(host: str, port: int, count: int, limit_s: float) -> str:
    """Open `count` connections that send nothing: how many the server closes within `limit_s`."""
    conns = [await asyncio.open_connection(host, port) for _ in range(count)]

    async def closed(reader) -> bool:
        try:
            return await asyncio.wait_for(reader.read(1), limit_s) == b""
        except (asyncio.TimeoutError, ConnectionError):
            return False

    results = await asyncio.gather(*(closed(r) for r, _ in conns))
    for _, writer in conns:
        writer.close()
    return f"{sum(results)}/{count} closed"


async def together(count: int, make) -> str:
    results = await asyncio.gather(*(make() for _ in range(count)))
    return ", ".join(f"{results.count(k)} x {k}" for k in sorted(set(results)))


async def status(request) -> str:
    try:
        return f"status {(await request).status_code}"
    except httpx.HTTPError as e:
        return type(e).__name__


async def bystander(http: httpx.AsyncClient, latencies: list, failures: list, stop: asyncio.Event) -> None:
    """Small requests, one after another, while a case runs."""
    while not stop.is_set():
        start = time.perf_counter()
        try:
            r = await http.post(CHAT, json=SMALL)
            if r.status_code != 200:
                failures.append(f"HTTP {r.status_code}")
        except httpx.HTTPError as e:
            failures.append(type(e).__name__)
        latencies.append(time.perf_counter() - start)
        await asyncio.sleep(0.2)


def plan(http: httpx.AsyncClient, host: str, port: int, limit_s: float) -> dict:
    """case -> (coroutine factory, the results that pass)."""
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * (10 * MB) + b'"}]}'
    json_type = {"content-type": "application/json"}

    async def chunked():
        for k in range(0, len(big), MB):
            yield big[k:k + MB]

    many = {"messages": [{"role": ("user", "assistant")[i % 2], "content": f"message {i}"} for i in range(1000)],
            "max_tokens": 4}
    stops = {**SMALL, "n": 4, "max_tokens": 32, "stop": ["x" * 100_000] * 4}
    slow_body = lambda: trickle(host, port, HEAD.encode(), BODY, limit_s)  # noqa: E731
    return {
        "10 MB body": (lambda: status(http.post(CHAT, content=big, headers=json_type)), {"status 413"}),
        "10 MB body, chunked": (lambda: status(http.post(CHAT, content=chunked(), headers=json_type)), {"status 413"}),
        "body at 1 byte/s": (slow_body, {"status 408"}),
        "head at 1 byte/s": (lambda: trickle(host, port, b"", HEAD.encode() * 4, limit_s), {"closed"}),
        "200 idle connections": (lambda: idle(host, port, 200, limit_s), {"200/200 closed"}),
        "50 slow bodies at once": (lambda: together(50, slow_body), {"50 x status 408"}),
        "1000 messages": (lambda: status(http.post(CHAT, json=many)), {"status 200", "status 400"}),
        "4 stop strings of 100k chars, n=4": (lambda: status(http.post(CHAT, json=stops)),
                                              {"status 200", "status 400"}),
    }


async def run(url: str, args, server) -> tuple[list[dict], dict]:
    host, port = url.removeprefix("http://").split(":")
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        for _ in range(3):
            await http.post(CHAT, json=SMALL)  # warm
        before, out = server.rss_mib(), []
        for name, (make, passing) in plan(http, host, int(port), args.request_timeout + 10).items():
            latencies, failures, stop = [], [], asyncio.Event()
            watcher = asyncio.create_task(bystander(http, latencies, failures, stop))
            start = time.perf_counter()
            result = await make()
            seconds = time.perf_counter() - start
            stop.set()
            await watcher
            slow = [x for x in latencies if x > args.stall_s]
            out.append({"case": name, "result": result, "seconds": round(seconds, 1),
                        "ok": result in passing and not failures and not slow, "bystander_requests": len(latencies),
                        "bystander_max_s": round(max(latencies, default=0), 2), "bystander_failures": failures})
            print(json.dumps(out[-1]), file=sys.stderr)
        await asyncio.sleep(2)
        after = server.rss_mib()
    memory = {"rss_before_mib": before, "rss_after_mib": after}
    if before and after:
        memory |= {"rss_growth": round(after / before - 1, 4), "ok": after / before - 1 <= args.rss_growth}
    return out, memory


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--request-timeout", type=float, default=5.0,
                   help="the server's --request-timeout-s (set so on a server this starts)")
    p.add_argument("--stall-s", type=float, default=10.0, help="a bystander request slower than this is a stall")
    p.add_argument("--rss-growth", type=float, default=0.05, help="allowed growth of the server's RSS")
    p.add_argument("--json", help="also write the report to this file")
    args = p.parse_args(argv)
    if not args.url:
        args.serve_arg = [f"--request-timeout-s={args.request_timeout}", *args.serve_arg]
    with target(args) as server:
        results, memory = asyncio.run(run(server.url, args, server))
    report = {"cases": results, "memory": memory}
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if all(c["ok"] for c in results) and memory.get("ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
