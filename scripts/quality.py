"""Greedy output of a fast decode path (EngineConfig.quantize) against float32, on the embedded model or a GGUF file.

For each prompt, a 64-token greedy continuation from the float32 engine and from the fast one, through the
public API; prints per prompt whether the continuations are identical, where they first differ and the mean
|Δ logprob| of the chosen tokens while they agree, then the share of identical continuations (issue 10's
bar: >= 90%) and the mean |Δ logprob| over all agreeing positions.
Usage: python scripts/quality.py [--model FILE.gguf] [--mode auto] [--activations float32] [--llama]
                                 [--max-tokens 64] [--prompts 20] [--threads 2]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import nsample
from nsample.engine import Engine

PROMPTS = [
    "What is the capital of France?", "Write a haiku about autumn.", "Explain photosynthesis to a child.",
    "Give me three names for a cat.", "How do I reverse a list in Python?", "What causes rain?",
    "Tell me a short joke.", "Summarize the plot of Romeo and Juliet.", "List four prime numbers.",
    "Why is the sky blue?", "Write a limerick about a programmer.", "What is the difference between a virus and "
    "a bacterium?", "Suggest a name for a bakery.", "How does a refrigerator work?", "Translate 'good morning' "
    "into Spanish and German.", "Write the opening sentence of a mystery novel.", "What are the benefits of "
    "exercise?", "Describe the water cycle.", "Give me a recipe idea with eggs and spinach.",
    "Explain what a black hole is in two sentences.",
]


Continuation = tuple[list[int], list[float]]  # token ids, the chosen tokens' logprobs


def continuations(engine: Engine, prompts: list[str], max_tokens: int) -> tuple[list[Continuation], float]:
    """Each prompt's greedy continuation, and the seconds they took."""
    t0, out = time.perf_counter(), []
    for p in prompts:
        c = engine.generate([{"role": "user", "content": p}], n=1, temperature=0, max_tokens=max_tokens,
                            logprobs=True).choices[0]
        out.append((c.token_ids, [lp.logprob for lp in c.logprobs]))
    return out, time.perf_counter() - t0


def compare(ref: list[Continuation], fast: list[Continuation]) -> list[dict]:
    rows = []
    for (ids_a, lp_a), (ids_b, lp_b) in zip(ref, fast):
        agree = next((i for i, (a, b) in enumerate(zip(ids_a, ids_b)) if a != b), min(len(ids_a), len(ids_b)))
        deltas = [abs(a - b) for a, b in zip(lp_a[:agree], lp_b[:agree])]
        rows.append({"identical": ids_a == ids_b, "first_diff": None if ids_a == ids_b else agree, "deltas": deltas})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct (a GGUF file)")
    ap.add_argument("--mode", default="auto", help="the fast path, an EngineConfig.quantize value")
    ap.add_argument("--activations", default="float32", help="a GGUF's decode activations, an "
                    "EngineConfig.decode_activations value (float32, int8)")
    ap.add_argument("--llama", action="store_true", help="also llama.cpp's greedy continuations of the same file "
                    "against the same float32 reference (scripts/greedy_llamacpp.py, in its own process)")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=len(PROMPTS))
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = PROMPTS[: args.prompts]
    reference = nsample.load(args.model, quantize="none")  # a GGUF file dequantized to float32 by transformers
    fast = nsample.load(args.model, quantize=args.mode, decode_activations=args.activations)
    mode = fast.quantize + (" (int8 activations)" if fast.int8_activations else "")
    ref, ref_s = continuations(reference, prompts, args.max_tokens)
    got, fast_s = continuations(fast, prompts, args.max_tokens)
    llama = llama_continuations(fast, prompts, args) if args.llama else None
    reference.close()
    fast.close()
    report(f"{reference.name}: float32 vs quantize={mode}", prompts, compare(ref, got), args)
    print(f"time, greedy n=1 (a busy machine makes this rough): float32 {ref_s:.1f}s, {mode} {fast_s:.1f}s, "
          f"{ref_s / fast_s:.2f}x")
    if llama is not None:
        report(f"{reference.name}: float32 vs llama.cpp on the same file", prompts, compare(ref, llama), args)


def llama_continuations(engine: Engine, prompts: list[str], args) -> list[Continuation]:
    """llama.cpp's greedy continuations of the same prompt ids (the engine's chat template), in its own process."""
    from nsample.models.embedded import embedded_gguf

    job = {"gguf": str(args.model or embedded_gguf()), "max_tokens": args.max_tokens, "eos": sorted(engine.eos_ids),
           "threads": torch.get_num_threads(),
           "prompts": [engine.tokenize([{"role": "user", "content": p}]) for p in prompts]}
    script = Path(__file__).with_name("greedy_llamacpp.py")
    done = subprocess.run([sys.executable, str(script)], input=json.dumps(job), capture_output=True, text=True,
                          check=True)
    return [(ids, lps) for ids, lps in json.loads(done.stdout)]


def report(title: str, prompts: list[str], rows: list[dict], args) -> None:
    print(f"{title}, greedy, {args.max_tokens} tokens, {torch.get_num_threads()} threads\n"
          f"{'prompt':<48} {'same':>4} {'diff@':>5} {'mean|Δlp|':>9}")
    for p, r in zip(prompts, rows):
        mean = statistics.fmean(r["deltas"]) if r["deltas"] else float("nan")
        diff = "-" if r["first_diff"] is None else r["first_diff"]
        print(f"{p[:48]:<48} {'yes' if r['identical'] else 'no':>4} {diff:>5} {mean:9.5f}")
    same = sum(r["identical"] for r in rows)
    deltas = [d for r in rows for d in r["deltas"]]
    print(f"identical continuations: {same}/{len(rows)} = {100 * same / len(rows):.0f}% (bar: >= 90%)")
    print(f"mean |Δ logprob| of the chosen tokens where the continuations agree: {statistics.fmean(deltas):.5f} "
          f"(max {max(deltas):.5f}, {len(deltas)} tokens)")


if __name__ == "__main__":
    main()
