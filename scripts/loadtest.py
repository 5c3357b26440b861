"""Load test: C concurrent clients for D seconds; every answer must equal the same request run alone.

    python scripts/loadtest.py --clients 32 --duration 60                    # starts `nsample serve` on the tiny model
    python scripts/loadtest.py --model embedded --clients 32 --duration 60   # the embedded SmolLM2-135M-Instruct
    python scripts/loadtest.py --url http://127.0.0.1:8000 --clients 8       # a running server

A fixed-seed pool of requests (chat and completions, n = 1..8, some greedy, some with a stop string) is first run
alone, one at a time. Then C clients, half on the official `openai` async client and half on raw SSE over httpx,
send those requests again, streamed or not, for D seconds. Each answer must equal its request alone (text, finish
reason, seed and usage of every choice); each stream must carry every index 0..n-1 with exactly one finish chunk,
exactly one usage chunk (last, with no choices), and end with [DONE]. 429s are counted apart from errors.
Prints requests, errors, mismatches, 429s, p50/p95 latency and time to first token; exits 1 on any error or mismatch.
"""
import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

import httpx
import openai
from server_process import add_arguments, target

CHATS = [[{"role": "user", "content": "Give me a name for a cat."}],
         [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Describe the sea."}],
         [{"role": "user", "content": "List three fruits."}]]
TEXTS = ["Once upon a time", "The three most important things in life are", "def fibonacci(n):"]


@dataclass(frozen=True)
class Spec:
    """One request of the pool, sent alone first and then again under load."""

    chat: bool
    prompt: int
    n: int
    seed: int
    max_tokens: int
    temperature: float
    stop: str | None

    def body(self, model: str, stream: bool) -> dict:
        b = {"model": model, "n": self.n, "seed": self.seed, "max_tokens": self.max_tokens,
             "temperature": self.temperature, "stream": stream}
        b["messages" if self.chat else "prompt"] = CHATS[self.prompt] if self.chat else TEXTS[self.prompt]
        if self.stop:
            b["stop"] = [self.stop]
        if stream:
            b["stream_options"] = {"include_usage": True}
        return b

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"


@dataclass
class Answer:
    """What a request returned, in one shape for every client: per index (seed, text, finish reason), usage."""

    choices: dict[int, tuple[int, str, str]]
    usage: tuple[int, int]
    ttft: float | None = None  # seconds to the first content


@dataclass
class Tally:
    requests: int = 0
    errors: Counter = field(default_factory=Counter)
    mismatches: list = field(default_factory=list)
    rate_limited: int = 0
    latency: list = field(default_factory=list)
    ttft: list = field(default_factory=list)
    completion_tokens: int = 0


def make_pool(size: int, seed: int, max_n: int) -> list[Spec]:
    rng = random.Random(seed)
    return [Spec(chat=rng.random() < 0.5, prompt=rng.randrange(3), n=rng.randint(1, max_n),
                 seed=rng.randrange(2**31), max_tokens=rng.choice((8, 16, 32)),
                 temperature=rng.choice((0.0, 0.7, 1.0, 1.0)), stop=rng.choice((None, None, None, ".")))
            for _ in range(size)]


def from_json(spec: Spec, data: dict) -> Answer:
    content = (lambda c: c["message"]["content"]) if spec.chat else (lambda c: c["text"])
    choices = {c["index"]: (c["seed"], content(c) or "", c["finish_reason"]) for c in data["choices"]}
    return Answer(choices, (data["usage"]["prompt_tokens"], data["usage"]["completion_tokens"]))


def from_chunks(spec: Spec, chunks: list[dict], done: bool, first: float | None) -> Answer:
    """Merge a stream's chunks; raise ValueError when the stream breaks its shape."""
    if not done:
        raise ValueError("the stream did not end with [DONE]")
    texts, seeds, finishes, usages = {}, {}, {}, []
    for k, chunk in enumerate(chunks):
        if "error" in chunk:
            raise ValueError(f"error event: {chunk['error']}")
        if chunk.get("usage") is not None:
            usages.append(k)
        for c in chunk["choices"]:
            i = c["index"]
            text = (c["delta"].get("content") if spec.chat else c["text"]) or ""
            texts[i] = texts.get(i, "") + text
            if seeds.setdefault(i, c["seed"]) != c["seed"]:
                raise ValueError(f"index {i} changed its seed")
            if c["finish_reason"] is not None:
                finishes.setdefault(i, []).append(c["finish_reason"])
    if sorted(texts) != list(range(spec.n)):
        raise ValueError(f"indices {sorted(texts)}, expected 0..{spec.n - 1}")
    if any(len(finishes.get(i, [])) != 1 for i in range(spec.n)):
        raise ValueError(f"finish chunks per index: { {i: len(finishes.get(i, [])) for i in range(spec.n)} }")
    if usages != [len(chunks) - 1] or chunks[-1]["choices"]:
        raise ValueError(f"usage chunks at {usages} of {len(chunks)}; expected one, last, without choices")
    u = chunks[-1]["usage"]
    return Answer({i: (seeds[i], texts[i], finishes[i][0]) for i in texts}, (u["prompt_tokens"],
                                                                             u["completion_tokens"]), first)


async def raw(http: httpx.AsyncClient, spec: Spec, model: str, stream: bool) -> Answer:
    start = time.perf_counter()
    if not stream:
        r = await http.post(spec.path, json=spec.body(model, False))
        r.raise_for_status()
        return from_json(spec, r.json())
    chunks, done, first = [], False, None
    async with http.stream("POST", spec.path, json=spec.body(model, True)) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                continue
            chunks.append(json.loads(line[6:]))
            if first is None and any(_content(spec, c) for c in chunks[-1]["choices"]):
                first = time.perf_counter() - start
    return from_chunks(spec, chunks, done, first)


async def official(client: openai.AsyncOpenAI, spec: Spec, model: str, stream: bool) -> Answer:
    start, body = time.perf_counter(), spec.body(model, stream)
    create = client.chat.completions.create if spec.chat else client.completions.create
    if not stream:
        return from_json(spec, (await create(**body)).model_dump())
    chunks, first = [], None
    async for chunk in await create(**body):
        chunks.append(chunk.model_dump())
        if first is None and any(_content(spec, c) for c in chunks[-1]["choices"]):
            first = time.perf_counter() - start
    return from_chunks(spec, chunks, True, first)  # the client stops at [DONE] and raises if the stream breaks


def _content(spec: Spec, choice: dict) -> str:
    return ((choice.get("delta") or {}).get("content") if spec.chat else choice.get("text")) or ""


async def run(args, url: str) -> tuple[Tally, float]:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=args.clients + 4)
    async with httpx.AsyncClient(base_url=url, timeout=args.timeout, headers=headers, limits=limits) as http:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key=args.api_key or "unused", max_retries=0,
                                    timeout=args.timeout,
                                    http_client=httpx.AsyncClient(limits=limits, timeout=args.timeout))
        model = (await http.get("/v1/models")).json()["data"][0]["id"]
        pool = make_pool(args.pool, args.seed, args.max_n)
        alone = [await raw(http, spec, model, False) for spec in pool]  # the reference: one request at a time
        print(f"{len(pool)} requests run alone; now {args.clients} clients for {args.duration:g} s", file=sys.stderr)
        tally, end = Tally(), time.perf_counter() + args.duration

        async def worker(w: int) -> None:
            rng = random.Random(args.seed * 1000 + w)
            while time.perf_counter() < end:
                k = rng.randrange(len(pool))
                stream, use_openai = rng.random() < 0.5, w % 2 == 0
                start = time.perf_counter()
                try:
                    got = await (official(client, pool[k], model, stream) if use_openai
                                 else raw(http, pool[k], model, stream))
                except (openai.RateLimitError, httpx.HTTPStatusError) as e:
                    status = e.response.status_code
                    if status != 429:
                        tally.errors[f"HTTP {status}: {e.response.text[:200]}"] += 1
                        continue
                    tally.rate_limited += 1
                    await asyncio.sleep(float(e.response.headers.get("retry-after", 1)))
                    continue
                except Exception as e:  # noqa: BLE001 - every failure is counted and named
                    tally.errors[f"{type(e).__name__}: {str(e)[:200]}"] += 1
                    continue
                tally.requests += 1
                tally.latency.append(time.perf_counter() - start)
                tally.completion_tokens += got.usage[1]
                if stream and got.ttft is not None:
                    tally.ttft.append(got.ttft)
                want = alone[k]
                if (got.choices, got.usage) != (want.choices, want.usage):
                    tally.mismatches.append({"spec": asdict(pool[k]), "stream": stream, "openai": use_openai,
                                             "alone": asdict(want), "under_load": asdict(got)})

        started = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(args.clients)))
        await client.close()
        return tally, time.perf_counter() - started


def pct(values: list[float], q: int) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def report(args, tally: Tally, wall: float) -> dict:
    ms = lambda v: None if v is None else round(v * 1000)  # noqa: E731
    return {"clients": args.clients, "duration_s": args.duration, "wall_s": round(wall, 1), "requests": tally.requests,
            "errors": sum(tally.errors.values()), "mismatches": len(tally.mismatches),
            "rate_limited_429": tally.rate_limited, "latency_p50_ms": ms(pct(tally.latency, 50)),
            "latency_p95_ms": ms(pct(tally.latency, 95)), "ttft_p50_ms": ms(pct(tally.ttft, 50)),
            "ttft_p95_ms": ms(pct(tally.ttft, 95)), "completion_tokens_per_s": round(tally.completion_tokens / wall, 1),
            "error_kinds": dict(tally.errors), "mismatch_examples": tally.mismatches[:3]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--clients", type=int, default=32, help="concurrent clients (C)")
    p.add_argument("--duration", type=float, default=60, help="seconds of load (D)")
    p.add_argument("--pool", type=int, default=24, help="distinct requests, each run alone first")
    p.add_argument("--max-n", type=int, default=8, help="n is drawn from 1..max-n")
    p.add_argument("--seed", type=int, default=0, help="seed of the request pool and of each client's choices")
    p.add_argument("--timeout", type=float, default=300, help="seconds a request may take (then it is an error)")
    p.add_argument("--json", help="also write the report to this file")
    args = p.parse_args(argv)
    with target(args) as server:
        tally, wall = asyncio.run(run(args, server.url))
    out = report(args, tally, wall)
    print(json.dumps({k: v for k, v in out.items() if k != "mismatch_examples"}, indent=1))
    for example in out["mismatch_examples"]:
        print("mismatch:", json.dumps(example)[:2000], file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if out["errors"] or out["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
