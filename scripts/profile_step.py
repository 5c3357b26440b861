"""Where one decode step goes: milliseconds per step by part, for one request of n choices (or several requests).

The runner is stepped on this thread (no engine worker), with wall-clock hooks around the model's parts: the
projections (q/k/v, o, gate/up, down), the LM head, the attention core (rotary embedding excluded), the norms,
sampling, and the rest (prefill, per-row bookkeeping, Python). Where decode steps run in the C++ kernels
(nsample/cpu/fused_decode.py, quantize gguf), the parts are those kernels' calls instead, a short prompt's prefill
(which runs in them too) included. The hooks cost a little.
Usage: python scripts/profile_step.py [--model PATH] [--quantize auto|none] [--decode-activations float32|int8]
                                     [--requests 1] [--n 8] [--prompt 16] [--new-tokens 64] [--stagger]
"""
import argparse
import collections
import time

import torch
from bench_measure import prompt_of

import nsample
from nsample.engine import model_runner, prefix_attention, request_state
from nsample.request import Request
from nsample.sampling_params import SamplingParams

PARTS = {"q_proj": "q/k/v", "k_proj": "q/k/v", "v_proj": "q/k/v", "o_proj": "o", "gate_proj": "gate/up",
         "up_proj": "gate/up", "down_proj": "down", "lm_head": "LM head", "input_layernorm": "norms",
         "post_attention_layernorm": "norms", "norm": "norms", "act_fn": "silu", "router": "MoE router",
         "experts": "MoE experts"}  # the experts' module (in the fused decode, main() times fused_experts.Moe's parts)


def timed(spent: dict, part: str, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[part] += time.perf_counter() - t0
    return wrapper


def hook(model, spent: dict) -> None:
    """Time each named part: forward pre/post hooks on its modules."""
    starts = {}
    for name, module in model.named_modules():
        part = PARTS.get(name.rsplit(".", 1)[-1])
        if part is None:
            continue
        module.register_forward_pre_hook(lambda m, a: starts.__setitem__(m, time.perf_counter()))
        module.register_forward_hook(lambda m, a, o, p=part: spent.__setitem__(p, spent[p] + time.perf_counter()
                                                                                - starts.pop(m)))


FUSED = {"norm_linear": "norm + q/k/v", "decode_attention": "rotary + KV append + attention",
         "linear_add": "o, down + residual", "norm_swiglu": "norm + gate/up + SiLU·mul",
         "linear_norm_add": "o, down + norm + residual", "norm_geglu": "norm + gate/up + GELU·mul",
         "prefill_attention": "prefill rotary + KV store + attention"}


class TimedOps:
    """The fused decoder's kernels, each call timed into its part (the LM head is norm_linear at vocabulary width)."""

    def __init__(self, ops, spent: dict, vocab: int):
        self.ops, self.spent, self.vocab = ops, spent, vocab

    def __getattr__(self, name):
        def call(*args):
            t0 = time.perf_counter()
            out = getattr(self.ops, name)(*args)
            head = out is not None and out.shape[-1] == self.vocab
            self.spent["norm + LM head" if head else FUSED[name]] += time.perf_counter() - t0
            return out
        return call


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a .gguf path, hub id or folder (default: the embedded model)")
    ap.add_argument("--quantize", default="auto")
    ap.add_argument("--decode-activations", default="float32")
    ap.add_argument("--requests", type=int, default=1)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--stagger", action="store_true", help="the requests join one a step (each a cohort of its own)")
    args = ap.parse_args()
    engine = nsample.load(args.model, quantize=args.quantize, decode_activations=args.decode_activations)
    engine.close()  # the runner is stepped here instead
    runner = model_runner.ModelRunner(engine.model, engine.tokenizer, engine.config, engine.eos_ids,
                                      engine.vocab_size, engine.shared_prefix, engine.token_bytes)
    spent = collections.defaultdict(float)
    hook(engine.model, spent)  # prefill, and decode where the model's own forward runs it
    if runner.fused is not None:
        runner.fused.ops = TimedOps(runner.fused.ops, spent, engine.vocab_size)
        for moe in (L.moe for L in runner.fused.layers if L.moe is not None):  # fused_experts.Moe's parts
            moe.router, moe.experts = timed(spent, "MoE router", moe.router), timed(spent, "MoE experts", moe.experts)
    for name in ("attend", "attend_cpu"):  # the decode attention: one is used, by device
        setattr(prefix_attention, name, timed(spent, "attention core", getattr(prefix_attention, name)))
    request_state.sampler.sample_rows = timed(spent, "sampling", request_state.sampler.sample_rows)

    def run() -> tuple[int, float]:
        waiting = []
        for k in range(args.requests):
            p = SamplingParams(n=args.n, seed=k, max_tokens=args.new_tokens, ignore_eos=True)
            waiting.append(Request(prompt_of(engine.tokenizer, args.prompt, offset=k), p,
                                   [k * 1000 + i for i in range(args.n)], args.new_tokens, engine.name))
        steps, t0 = 0, time.perf_counter()
        while waiting or runner.busy:
            for req in waiting[:1] if args.stagger else waiting:  # staggered: one joins each step
                runner.add(req)
            waiting = waiting[1:] if args.stagger else []
            for _ in runner.step():  # the updates of one step
                pass
            steps += 1
        return steps, time.perf_counter() - t0

    run()  # warm-up
    spent.clear()
    steps, wall = run()
    fused = " (fused decode)" if runner.fused else ""
    print(f"{engine.name}, quantize {engine.quantize}{fused}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; "
          f"{args.requests} request(s) of n={args.n}{', staggered' * args.stagger}, prompt {args.prompt}, "
          f"{args.new_tokens} tokens: "
          f"{wall / steps * 1e3:.1f} ms per step, {args.requests * args.n * args.new_tokens / wall:.0f} tokens/s")
    rest = wall - sum(spent.values())
    for part, seconds in sorted({**spent, "rest (prefill, rows, Python)": rest}.items(), key=lambda x: -x[1]):
        print(f"| {part:<30} | {seconds / steps * 1e3:6.1f} ms | {seconds / wall:4.0%} |")


if __name__ == "__main__":
    main()
