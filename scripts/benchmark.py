"""nsample against Hugging Face generate(num_return_sequences=n) and llama.cpp's own batched decoding.

For each prompt length and n, every method runs side by side in one benchmark run, each in a fresh process
(so none inherits another's allocator or OpenMP state: a prior HF run was seen to slow the next by 20%, and
llama.cpp loaded next to torch ran up to 1.6x slower), on the same model and threads, with new_tokens new
tokens per choice (temperature 1, eos ignored):
  fast       nsample with its default weights here (EngineConfig.quantize="auto": gguf on AVX-512 CPUs with
             native int8 dot products, int8 on other CPUs with them)
  int8       nsample with quantize="int8" (decode on two-level int8 too), where fast is gguf
  fp32       nsample with the weights as loaded (quantize="none")
  nrs        Hugging Face generate(num_return_sequences=n) on the float32 model
  llama      llama.cpp's batched example on the GGUF nsample embeds (scripts/bench_llamacpp.py)
  llama-seq  llama.cpp, the n choices one after another
It prints wall time, aggregate tokens/s, nsample's peak memory above the loaded model, and the ratios.
Usage: python scripts/benchmark.py [--model M] [--prompts 16 512 1024] [--n 1 4 8 16] [--new-tokens 64]
"""
import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from nsample.quantize import resolve_quantize

TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how "
        "books were made, copied and read across Europe and beyond. ")
METHODS = ("fast", "int8", "fp32", "nrs", "llama", "llama-seq")
LLAMA = Path(__file__).with_name("bench_llamacpp.py")


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
    """One torch method at one (prompt, n), in this process: warm up, then time it; peak memory above the model."""
    import nsample

    method, P, n = args.one
    engine = nsample.load(args.model, device=args.device, dtype=args.dtype,
                          quantize={"fast": "auto", "int8": "int8"}.get(method, "none"))
    model, tok, dev = engine.model, engine.tokenizer, engine.device
    ids, T = prompt_of(tok, P), args.new_tokens
    hf = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, pad_token_id=tok.eos_token_id)

    def run(tokens: int):
        if method != "nrs":
            return engine.generate(ids, n=n, seed=0, max_tokens=tokens, ignore_eos=True)
        with torch.inference_mode():
            model.generate(torch.tensor([ids], device=dev), num_return_sequences=n, max_new_tokens=tokens,
                           min_new_tokens=tokens, **hf)

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
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if dev.type == "cuda" else _status_mib("VmHWM") - base
    engine.close()
    return {"wall": wall, "peak_mib": peak, "device": str(dev), "dtype": str(model.dtype), "model": engine.name,
            "quantize": engine.quantize}


def spawn(args, method: str, P: int, n: int) -> dict:
    if method.startswith("llama"):
        mode = "sequential" if method == "llama-seq" else "batched"
        cmd = [sys.executable, str(LLAMA), "--mode", mode, "--prompt", str(P), "--n", str(n), "--new-tokens",
               str(args.new_tokens), "--threads", str(torch.get_num_threads())]
    else:
        cmd = [sys.executable, __file__, "--one", method, str(P), str(n), "--new-tokens", str(args.new_tokens),
               "--device", args.device, "--dtype", args.dtype] + (["--model", args.model] if args.model else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--prompts", type=int, nargs="+", default=[16, 512, 1024])
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "PROMPT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        args.one = [args.one[0], int(args.one[1]), int(args.one[2])]
        print(json.dumps(measure(args)))
        return
    llama = args.model is None and importlib.util.find_spec("llama_cpp") is not None  # the embedded GGUF only
    if not llama and any(m.startswith("llama") for m in args.methods):
        print("llama.cpp columns skipped: they need the embedded model and llama-cpp-python (make test installs it)")
    methods = [m for m in args.methods if llama or not m.startswith("llama")]
    if resolve_quantize("auto", args.device if args.device != "auto" else "cpu") != "gguf":
        methods = [m for m in methods if m != "int8"]  # fast is int8 (or none) here already
    T, first = args.new_tokens, True
    header = f"{'prompt':>6} {'n':>3} | " + " | ".join(f"{m + ' s':>11} {'tok/s':>6}" for m in methods) + \
             f" | {'MiB':>5} | fast/llama int8/llama fast/nrs fp32/llama"
    for P in args.prompts:
        for n in args.n:
            r = {m: spawn(args, m, P, n) for m in methods}
            if first:
                info = r.get("fast") or r.get("fp32")
                print(f"model {info['model']} on {info['device']} ({info['dtype']}; fast = quantize "
                      f"{r['fast']['quantize'] if 'fast' in r else '-'}), torch {torch.__version__}, "
                      f"{torch.get_num_threads()} threads, {T} new tokens per choice, temperature 1, eos ignored, "
                      f"each measurement in a fresh process\n{header}\n{'-' * len(header)}")
                first = False
            toks = n * T
            ratio = lambda a, b: f"{r[b]['wall'] / r[a]['wall']:5.2f}x" if a in r and b in r else "    -"  # noqa: E731
            mib = r.get("fast", r.get("fp32", {})).get("peak_mib", float("nan"))
            print(f"{P:>6} {n:>3} | " + " | ".join(f"{r[m]['wall']:11.2f} {toks / r[m]['wall']:6.1f}" for m in methods)
                  + f" | {mib:5.0f} | {ratio('fast', 'llama'):>10} {ratio('int8', 'llama'):>10} "
                  f"{ratio('fast', 'nrs'):>8} {ratio('fp32', 'llama'):>10}", flush=True)


if __name__ == "__main__":
    main()
