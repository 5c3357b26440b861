"""nsample against Hugging Face generate(num_return_sequences=n) and n sequential generate calls.

For each prompt length and n, the three methods run side by side in one benchmark run, each in a
fresh process (so no method inherits another's allocator state: a prior HF run was seen to slow the
next run by 20%), on the same model, with max_new_tokens new tokens per choice (eos ignored). It
prints wall time, aggregate tokens/s, peak memory above the loaded model, and the ratios.
Usage: python scripts/benchmark.py [--model M] [--prompts 16 512 1024] [--n 1 4 8 16] [--new-tokens 64]
"""
import argparse
import json
import subprocess
import sys
import time

import torch

TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how "
        "books were made, copied and read across Europe and beyond. ")
METHODS = ("nsample", "nrs", "seq")


def prompt_of(tokenizer, length: int, offset: int = 0) -> list[int]:
    """`length` tokens of TEXT, starting `offset` words in (different prompts of the same length)."""
    words = (TEXT * (length // 10 + 2)).split(" ")
    ids = tokenizer(" ".join(words[offset:]), add_special_tokens=False)["input_ids"]
    return ids[:length]


def _status_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (peak resident since the last reset) of this process, in MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # Linux >= 4.0: "5" resets VmHWM to the current RSS
        f.write("5")


def measure(args) -> dict:
    """One method at one (prompt, n), in this process: warm up, then time it; peak memory above the loaded model."""
    import nsample

    engine = nsample.load(args.model, device=args.device)
    model, tok, dev = engine.model, engine.tokenizer, engine.device
    ids, n, T = prompt_of(tok, args.one[1]), args.one[2], args.new_tokens
    hf = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, pad_token_id=tok.eos_token_id)

    def run(tokens: int):
        if args.one[0] == "nsample":
            return engine.generate(ids, n=n, seed=0, max_tokens=tokens, ignore_eos=True)
        x = torch.tensor([ids], device=dev)
        with torch.inference_mode():
            for _ in range(n if args.one[0] == "seq" else 1):
                model.generate(x, num_return_sequences=1 if args.one[0] == "seq" else n,
                               max_new_tokens=tokens, min_new_tokens=tokens, **hf)

    run(2)  # warm-up
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        _reset_peak_rss()
        base = _status_mib("VmRSS")
    t0 = time.perf_counter()
    run(T)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    if dev.type == "cuda":
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = _status_mib("VmHWM") - base
    engine.close()
    return {"wall": wall, "peak_mib": peak, "device": str(dev), "dtype": str(model.dtype), "model": engine.name}


def spawn(args, method: str, P: int, n: int) -> dict:
    cmd = [sys.executable, __file__, "--one", method, str(P), str(n), "--new-tokens", str(args.new_tokens),
           "--device", args.device] + (["--model", args.model] if args.model else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--prompts", type=int, nargs="+", default=[16, 512, 1024])
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--skip-sequential-above", type=int, default=64, help="skip n sequential calls for larger n")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "PROMPT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        args.one = [args.one[0], int(args.one[1]), int(args.one[2])]
        print(json.dumps(measure(args)))
        return

    T = args.new_tokens
    header = (f"{'prompt':>6} {'n':>3} | {'nsample s':>9} {'tok/s':>7} {'MiB':>6} | {'nrs s':>7} {'tok/s':>7} "
              f"{'MiB':>6} | {'seq s':>7} {'tok/s':>7} | {'vs nrs':>6} {'vs seq':>6}")
    rates, first = {}, True
    for P in args.prompts:
        for n in args.n:
            r = {m: spawn(args, m, P, n) for m in METHODS if m != "seq" or n <= args.skip_sequential_above}
            if first:
                print(f"model {r['nsample']['model']} on {r['nsample']['device']} ({r['nsample']['dtype']}), torch "
                      f"{torch.__version__}, {torch.get_num_threads()} threads, {T} new tokens per choice, eos "
                      f"ignored, each measurement in a fresh process\n{header}\n{'-' * len(header)}")
                first = False
            toks = n * T
            ns, nrs = r["nsample"], r["nrs"]
            seq = r.get("seq", {"wall": float("nan")})
            rates[P, n] = toks / ns["wall"]
            print(f"{P:>6} {n:>3} | {ns['wall']:9.2f} {toks / ns['wall']:7.1f} {ns['peak_mib']:6.0f} | "
                  f"{nrs['wall']:7.2f} {toks / nrs['wall']:7.1f} {nrs['peak_mib']:6.0f} | {seq['wall']:7.2f} "
                  f"{toks / seq['wall']:7.1f} | {nrs['wall'] / ns['wall']:5.2f}x {seq['wall'] / ns['wall']:5.2f}x",
                  flush=True)
    for P in args.prompts:
        if (P, 1) in rates and (P, 8) in rates:
            print(f"prompt {P}: nsample n=8 aggregate tokens/s = {rates[P, 8] / rates[P, 1]:.2f}x its n=1")


if __name__ == "__main__":
    main()
