"""llama.cpp's own batched decoding of n choices, through llama-cpp-python's low-level bindings: one JSON line.

"batched" is llama.cpp's batched example: the prompt decoded once on sequence 0, its KV copied to sequences
1..n-1 (llama_memory_seq_cp), then one llama_batch of n tokens per step, one seeded dist sampler per
sequence (seed + i, temperature 1), eos ignored. "sequential" is n single-sequence runs of the same.
Runs without torch or nsample imported (both would load a second OpenMP runtime into this process; that
was measured up to 1.6x slower), so scripts/benchmark.py spawns it once per (prompt, n). Besides the timings,
the JSON has the load time (model load + context creation), this process's VmRSS and peak VmHWM after load and
at the end of the run, and the instruction sets llama.cpp was built with (the "= 1" flags of its system info).
Usage: python scripts/bench_llamacpp.py [--mode batched|sequential] [--prompt 16] [--n 8] [--new-tokens 64]
       [--threads 2] [--gguf PATH] [--no-extra-bufts]
"""
import argparse
import json
import re
import sys
import time
from pathlib import Path

import llama_cpp
import llama_cpp.llama_cpp as lib
from bench_measure import TEXT, memory  # torch-free at import, checked below

from nsample.models.embedded import embedded_gguf

if "torch" in sys.modules:
    raise SystemExit("bench_llamacpp.py must run without torch in its process (see above)")


def isa_flags() -> list[str]:
    """The features llama.cpp's CPU backend was built with: the "NAME = 1" flags of llama_print_system_info()."""
    return re.findall(r"(\w+) = 1\b", lib.llama_print_system_info().decode())


class Bench:
    """One model and one context with room for n sequences of prompt + new tokens."""

    def __init__(self, args):
        lib.llama_log_set(LOG_NOTHING, None)
        lib.llama_backend_init()
        t0 = time.perf_counter()
        mp = lib.llama_model_default_params()
        mp.use_extra_bufts = not args.no_extra_bufts  # off: no AMX weight repacking (it crashes some VMs)
        self.model = lib.llama_model_load_from_file(str(args.gguf or embedded_gguf()).encode(), mp)
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.args = args
        cp = lib.llama_context_default_params()
        cp.n_ctx = args.prompt + args.n * args.new_tokens + 16
        cp.n_batch = cp.n_ubatch = max(args.prompt, args.n)
        cp.n_seq_max = args.n
        cp.kv_unified = True  # one KV buffer shared by the sequences, so the prompt's cells are shared too
        cp.n_threads = cp.n_threads_batch = args.threads
        cp.no_perf = True
        self.ctx = lib.llama_init_from_model(self.model, cp)
        self.load_s = time.perf_counter() - t0  # model load + context creation
        self.memory = lib.llama_get_memory(self.ctx)
        self.batch = lib.llama_batch_init(cp.n_batch, 0, args.n)

    def prompt(self, length: int) -> list[int]:
        """The benchmark's prompt, cut to `length` tokens of llama.cpp's own tokenizer (no special tokens)."""
        text = (TEXT * (length // 10 + 1)).encode()
        tokens = (lib.llama_token * (len(text) + 8))()
        count = lib.llama_tokenize(self.vocab, text, len(text), tokens, len(tokens), False, False)
        assert count >= length, count
        return list(tokens[:length])

    def decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """One llama_batch of (token, position, sequence, wants logits) entries."""
        b = self.batch
        b.n_tokens = len(entries)
        for j, (tok, pos, seq, logits) in enumerate(entries):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = tok, pos, 1, logits
            b.seq_id[j][0] = seq
        if lib.llama_decode(self.ctx, b) != 0:
            raise RuntimeError("llama_decode failed")

    def run(self, ids: list[int], n: int, new_tokens: int, seed: int) -> tuple[float, float]:
        """n choices of `new_tokens` tokens after `ids`, decoded together; (prefill s, decode s)."""
        lib.llama_memory_clear(self.memory, True)
        samplers = [sampler(seed + i) for i in range(n)]
        t0 = time.perf_counter()
        P = len(ids)
        self.decode([(tok, pos, 0, pos == P - 1) for pos, tok in enumerate(ids)])
        for seq in range(1, n):
            lib.llama_memory_seq_cp(self.memory, 0, seq, -1, -1)
        tokens = [lib.llama_sampler_sample(s, self.ctx, P - 1) for s in samplers]
        t1 = time.perf_counter()
        for step in range(1, new_tokens):
            self.decode([(tok, P + step - 1, seq, True) for seq, tok in enumerate(tokens)])
            tokens = [lib.llama_sampler_sample(s, self.ctx, seq) for seq, s in enumerate(samplers)]
        t2 = time.perf_counter()
        for s in samplers:
            lib.llama_sampler_free(s)
        return t1 - t0, t2 - t1

    def close(self) -> None:
        lib.llama_batch_free(self.batch)
        lib.llama_free(self.ctx)
        lib.llama_model_free(self.model)


def sampler(seed: int):
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed % 2**32))  # temperature 1: the full softmax
    return chain


LOG_NOTHING = lib.llama_log_callback(lambda level, text, user_data: None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("batched", "sequential"), default="batched")
    ap.add_argument("--prompt", type=int, default=16, help="prompt tokens")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gguf", type=Path, default=None, help="default: the GGUF nsample embeds")
    ap.add_argument("--no-extra-bufts", action="store_true", help="no AMX/repacked weight buffers")
    args = ap.parse_args()
    imported = memory("imports")  # Python and llama.cpp's libraries, before any model
    bench = Bench(args)
    loaded = memory("load")
    ids = bench.prompt(args.prompt)
    rows = args.n if args.mode == "batched" else 1
    bench.run(ids, rows, 2, args.seed)  # warm-up
    t0 = time.perf_counter()
    if args.mode == "batched":
        prefill, decode = bench.run(ids, args.n, args.new_tokens, args.seed)
    else:
        parts = [bench.run(ids, 1, args.new_tokens, args.seed + i) for i in range(args.n)]
        prefill, decode = sum(p for p, _ in parts), sum(d for _, d in parts)
    wall = time.perf_counter() - t0
    end = memory("end")
    bench.close()
    tokens = args.n * args.new_tokens
    print(json.dumps({"engine": "llama.cpp", "mode": args.mode, "prompt": args.prompt, "n": args.n,
                      "new_tokens": args.new_tokens, "threads": args.threads, "extra_bufts": not args.no_extra_bufts,
                      "wall": wall, "tok_s": tokens / wall, "prefill_s": prefill, "decode_s": decode,
                      "decode_step_ms": 1e3 * decode / (args.new_tokens - 1) / (1 if rows > 1 else args.n),
                      "llama_cpp": llama_cpp.__version__, "gguf": str(args.gguf or embedded_gguf()),
                      "load_s": bench.load_s, **imported, **loaded, **end, "isa": isa_flags()}))


if __name__ == "__main__":
    main()
