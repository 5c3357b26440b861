"""Concurrency benchmark: many requests sharing the engine against one request with the same number of rows.

Scenarios (each in a fresh process, after a warm-up, on the same model, 64 new tokens per choice, eos ignored):
  1 x n=16             one request of n=16
  8 x n=2              8 requests of n=2 (different prompts of the same length) submitted at once
  8 x n=2, staggered   the same, each submitted once the previous one has its first token (so no two start
                       decoding at the same step and each is a cohort of its own)
  16 x n=1             16 requests of n=1 submitted at once
  1 x n=8, prompt 1024 one request with a long prompt
  ttft                 time to the first token of a short request, alone and submitted while a 1024-token
                       prompt is being prefilled (prefill chunked, and with chunking off)
Columns: nsample with its default weights (quantize auto), nsample with float32 weights (quantize none), and with
--baseline DIR another checkout of nsample (e.g. a git worktree of an earlier commit, float32), side by side.
Usage: python scripts/bench_concurrency.py [--model M] [--prompt 16] [--baseline DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

from bench_measure import prompt_of

SCENARIOS = {"single": (1, 16, None), "8x2": (8, 2, None), "8x2-staggered": (8, 2, None), "16x1": (16, 1, None),
             "long": (1, 8, 1024)}
# name: (requests, n each, prompt tokens; None = --prompt)


def measure(args) -> dict:
    import nsample

    config = {"prefill_chunk": args.prefill_chunk} if args.prefill_chunk else {}  # a baseline knows neither
    config |= {"quantize": args.quantize} if args.quantize else {}
    engine = nsample.load(args.model, device=args.device, **config)
    if args.one == "ttft":
        return ttft(engine, args)
    requests, n, length = SCENARIOS[args.one]
    prompts = [prompt_of(engine.tokenizer, length or args.prompt, offset=k) for k in range(requests)]
    kw = dict(n=n, seed=0, max_tokens=args.new_tokens, ignore_eos=True)
    engine.generate(prompts[0], **{**kw, "max_tokens": 2})  # warm-up
    t0 = time.perf_counter()
    reqs = []
    for p in prompts:
        reqs.append(engine.submit(p, **kw))
        while args.one.endswith("staggered") and not reqs[-1].started:  # until its first token (it decodes)
            time.sleep(0.001)  # polled: an iterator left unfinished would cancel the request
    results = [r.result() for r in reqs]
    wall = time.perf_counter() - t0
    tokens = sum(r.usage.completion_tokens for r in results)
    engine.close()
    return {"wall": wall, "tokens": tokens, "model": engine.name, "device": str(engine.device)}


def ttft(engine, args) -> dict:
    """Seconds to the first event of a short request: alone, and submitted while a 1024-token prompt prefills."""
    short, long_ = prompt_of(engine.tokenizer, args.prompt), prompt_of(engine.tokenizer, 1024, offset=1)
    engine.generate(short, max_tokens=2)  # warm-up

    def first_event(prompt) -> float:
        t0 = time.perf_counter()
        events = iter(engine.submit(prompt, n=1, seed=0, max_tokens=8))
        next(events)
        elapsed = time.perf_counter() - t0
        for _ in events:
            pass
        return elapsed

    alone = first_event(short)
    t0 = time.perf_counter()
    long_req = engine.submit(long_, n=1, seed=0, max_tokens=1)
    threading.Event().wait(0.05)  # the long prefill is under way
    during = first_event(short)
    long_req.result()
    long_prefill = time.perf_counter() - t0
    engine.close()
    return {"alone": alone, "during": during, "long_prefill": long_prefill, "model": engine.name}


def spawn(args, scenario: str, checkout: str | None, quantize: str | None, prefill_chunk: int | None = None) -> dict:
    cmd = [sys.executable, __file__, "--one", scenario, "--prompt", str(args.prompt), "--new-tokens",
           str(args.new_tokens), "--device", args.device] + (["--model", args.model] if args.model else [])
    cmd += ["--prefill-chunk", str(prefill_chunk)] if prefill_chunk else []
    cmd += ["--quantize", quantize] if quantize else []
    env = dict(os.environ)
    if checkout:
        env["PYTHONPATH"] = os.path.abspath(checkout)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens of each request")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--baseline", default=None, help="another nsample checkout to measure side by side")
    ap.add_argument("--prefill-chunk", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--quantize", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args)))
        return
    columns = {"nsample": (None, None), "nsample fp32": (None, "none"),  # name: (checkout, quantize)
               **({"baseline": (args.baseline, None)} if args.baseline else {})}
    print(f"{args.new_tokens} new tokens per choice, eos ignored, each scenario in a fresh process; prompt "
          f"{args.prompt} tokens unless said")
    print(f"{'scenario':<22}" + "".join(f"{name:>24}" for name in columns))
    rates = {}
    for scenario, (requests, n, length) in SCENARIOS.items():
        cells = []
        for name, (checkout, quantize) in columns.items():
            r = spawn(args, scenario, checkout, quantize)
            rates[name, scenario] = r["tokens"] / r["wall"]
            cells.append(f"{r['wall']:8.2f} s {rates[name, scenario]:7.1f} t/s")
        label = f"{requests} x n={n}" + (f", prompt {length}" if length else "") + (
            ", staggered" if scenario.endswith("staggered") else "")
        print(f"{label:<22}" + "".join(f"{c:>24}" for c in cells), flush=True)
    for name in columns:
        single = rates[name, "single"]
        print(f"{name}: 8 x n=2 aggregate = {rates[name, '8x2'] / single:.2f}x one n=16 (staggered "
              f"{rates[name, '8x2-staggered'] / single:.2f}x); 16 x n=1 = {rates[name, '16x1'] / single:.2f}x")
    if args.baseline:
        ratio = rates["nsample fp32", "long"] / rates["baseline", "long"]
        print(f"prompt 1024, n=8: nsample fp32 / baseline = {ratio:.2f}x (tokens/s)")
    for name, (checkout, quantize) in columns.items():
        chunked = spawn(args, "ttft", checkout, quantize)
        whole = spawn(args, "ttft", checkout, quantize, prefill_chunk=10**6) if not checkout else None
        print(f"{name}: time to first token of a {args.prompt}-token request: alone {chunked['alone']:.3f} s; "
              f"while a 1024-token prompt prefills {chunked['during']:.3f} s"
              + (f" (prefill unchunked: {whole['during']:.3f} s)" if whole else "")
              + f"; the long request's own first token after {chunked['long_prefill']:.2f} s")


if __name__ == "__main__":
    main()
