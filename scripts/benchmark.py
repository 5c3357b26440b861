"""nsample against Hugging Face generate(num_return_sequences=n) and n sequential generate calls.

Every configuration runs the three methods side by side in one process, on the same model, with
max_new_tokens new tokens per choice (eos ignored), and prints wall time, aggregate tokens/s, peak
memory and the ratios. Usage: python scripts/benchmark.py [--model M] [--prompts 16 512 1024] [--n 1 4 8 16]
"""
import argparse
import os
import threading
import time

import torch

import nsample

TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how "
        "books were made, copied and read across Europe and beyond. ")


class PeakMemory:
    """Peak memory above the starting point: CUDA allocator stats, else the process RSS sampled every 5 ms."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def __enter__(self):
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return self
        self.base = self.peak = _rss()
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, _rss())
            time.sleep(0.005)

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.synchronize()
            self.mib = (torch.cuda.max_memory_allocated() - self.base) / 2**20
        else:
            self.running = False
            self.thread.join()
            self.mib = (self.peak - self.base) / 2**20


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def prompt_of(tokenizer, length: int) -> list[int]:
    ids = tokenizer(TEXT * (length // 10 + 1), add_special_tokens=False)["input_ids"]
    return ids[:length]


def timed(device, fn, *args):
    with PeakMemory(device) as mem:
        t0 = time.perf_counter()
        fn(*args)
        if device.type == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    return wall, mem.mib


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--prompts", type=int, nargs="+", default=[16, 512, 1024])
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--skip-sequential-above", type=int, default=64, help="skip n sequential calls for larger n")
    args = ap.parse_args()

    engine = nsample.load(args.model, device=args.device)
    model, tok, dev = engine.model, engine.tokenizer, engine.device
    T = args.new_tokens
    print(f"model {engine.name} on {dev} ({model.dtype}), torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, {T} new tokens per choice, eos ignored")
    hf = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=T, min_new_tokens=T,
              pad_token_id=tok.eos_token_id)

    def run_nsample(ids, n):
        engine.generate(ids, n=n, seed=0, max_tokens=T, ignore_eos=True)

    def run_nrs(ids, n):
        with torch.inference_mode():
            model.generate(torch.tensor([ids], device=dev), num_return_sequences=n, **hf)

    def run_seq(ids, n):
        with torch.inference_mode():
            for _ in range(n):
                model.generate(torch.tensor([ids], device=dev), **hf)

    run_nsample(prompt_of(tok, 16), 2), run_nrs(prompt_of(tok, 16), 2)  # warm-up
    header = (f"{'prompt':>6} {'n':>3} | {'nsample s':>9} {'tok/s':>7} {'MiB':>6} | {'nrs s':>7} {'tok/s':>7} "
              f"{'MiB':>6} | {'seq s':>7} {'tok/s':>7} | {'vs nrs':>6} {'vs seq':>6}")
    print(header)
    print("-" * len(header))
    rates = {}
    for P in args.prompts:
        ids = prompt_of(tok, P)
        for n in args.n:
            ns, ns_mem = timed(dev, run_nsample, ids, n)
            nrs, nrs_mem = timed(dev, run_nrs, ids, n)
            seq = timed(dev, run_seq, ids, n)[0] if n <= args.skip_sequential_above else float("nan")
            toks = n * T
            rates[P, n] = toks / ns
            print(f"{P:>6} {n:>3} | {ns:9.2f} {toks / ns:7.1f} {ns_mem:6.0f} | {nrs:7.2f} {toks / nrs:7.1f} "
                  f"{nrs_mem:6.0f} | {seq:7.2f} {toks / seq:7.1f} | {nrs / ns:5.2f}x {seq / ns:5.2f}x", flush=True)
    for P in args.prompts:
        if (P, 1) in rates and (P, 8) in rates:
            print(f"prompt {P}: nsample n=8 aggregate tokens/s = {rates[P, 8] / rates[P, 1]:.2f}x n=1")
    engine.close()


if __name__ == "__main__":
    main()
