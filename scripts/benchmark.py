"""nsample against Hugging Face generate(num_return_sequences=n) and llama.cpp's own batched decoding.

For each prompt length and n, every method runs side by side in one benchmark run, each in a fresh process
(so none inherits another's allocator or OpenMP state: a prior HF run was seen to slow the next by 20%, and
llama.cpp loaded next to torch ran up to 1.6x slower), on the same model and threads, with new_tokens new
tokens per choice (temperature 1, eos ignored):
  fast       nsample with its default weights here (EngineConfig.quantize="auto": a GGUF file's own blocks
             where nsample's kernels build, int8 for other models on CPUs with AMX)
  fast-int8  the same with decode_activations="int8": a GGUF's decode steps on int8 activations, as llama.cpp
  int8       nsample with quantize="int8" (the file dequantized, then two-level int8), where it is fast (AMX)
  fp32       nsample with the weights as loaded (quantize="none")
  nrs        Hugging Face generate(num_return_sequences=n) on the float32 model
  llama      llama.cpp's batched example on the same GGUF (scripts/bench_llamacpp.py)
  llama-seq  llama.cpp, the n choices one after another
It prints wall time, aggregate tokens/s, nsample's peak memory above the loaded model, and the ratios.

The model is the embedded SmolLM2-135M-Instruct GGUF, --model (a hub id or folder: no llama.cpp columns), or each
--gguf FILE in turn (scripts/make_fixtures.py makes some): nsample loads the file (nsample.load(FILE)) and llama.cpp
the same file. Above each model's table it prints, once:
  - each engine's load time, in its own process: nsample.load's wall time twice, a first load (with an empty
    nsample cache) and a second, cached one (each alone in a process, quantize auto), with the imports of torch
    and transformers before it timed apart (and added back in a row of their own); llama.cpp's model load and
    context creation (its first row's process; its library import is not counted either);
  - each engine's RSS (VmRSS, and peak VmHWM) after load and at the end of its run, from its first row's process
    (nsample: the first of fast, int8, fp32, nrs that runs), its RSS after its imports (the runtime's floor: Python
    with torch and transformers, or with llama.cpp's library) and its RSS at the end above that floor;
  - the instruction set of nsample's kernels (nsample.cpu.kernels.built_isa(); --isa forces one) and of each llama.cpp
    column (the "= 1" flags of llama_print_system_info());
  - the decode path of every layer kind and the weight bytes read per decode step: nsample's, as
    nsample.cpu.weights_report.describe() gives them ("-" without it), and the GGUF's own tensor types and bytes.
Usage: python scripts/benchmark.py [--model M | --gguf FILE [FILE ...]] [--methods fast llama ...]
       [--prompts 16 512 1024] [--n 1 4 8 16] [--new-tokens 64] [--isa avx2|avxvnni|avx512|avx512vnni|neon|neondot]
       [--rounds K] [--device cuda] [--dtype bfloat16] [--decode-width W]
With --rounds K (for a busy machine, whose speed moves by tens of percent from minute to minute), each row runs every
method K times, alternated, and shows each method's median run and the range of the rounds' fast/llama ratios.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench_header import NSAMPLE_METHODS, header

# No torch (nor nsample) at import, here as in bench_header.py and bench_measure.py: bench_llamacpp.py, which must stay
# torch-free, imports bench_measure's helpers.

METHODS = ("fast", "fast-int8", "int8", "fp32", "nrs", "llama", "llama-seq")
LLAMA = Path(__file__).with_name("bench_llamacpp.py")
MEASURE = Path(__file__).with_name("bench_measure.py")  # one nsample measurement, in its own process


@dataclass
class Target:
    """One model the table runs on: what nsample.load takes (None: the embedded one) and its GGUF file, if any."""
    model: str | None
    gguf: Path | None


def nsample_env(args, **extra: str) -> dict:
    """The environment of nsample's processes: NSAMPLE_ISA=--isa where given."""
    return os.environ | ({"NSAMPLE_ISA": args.isa} if args.isa else {}) | extra


def run_json(cmd: list[str], env: dict | None = None) -> dict:
    """The last stdout line of `cmd`, as JSON; its stderr shown where it fails."""
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def nsample_cmd(args, target: Target, *mode: str) -> list[str]:
    return [sys.executable, str(MEASURE), *mode, "--new-tokens", str(args.new_tokens), "--device", args.device,
            "--dtype", args.dtype] + (["--model", target.model] if target.model else []) + \
        (["--decode-width", str(args.decode_width)] if args.decode_width else [])


def spawn(args, target: Target, method: str, P: int, n: int) -> dict:
    """One method at one (prompt, n) in a fresh process."""
    if method.startswith("llama"):
        mode = "sequential" if method == "llama-seq" else "batched"
        cmd = [sys.executable, str(LLAMA), "--mode", mode, "--prompt", str(P), "--n", str(n), "--new-tokens",
               str(args.new_tokens), "--threads", str(args.threads)]
        return run_json(cmd + (["--gguf", str(target.gguf)] if target.gguf else []))
    return run_json(nsample_cmd(args, target, "--one", method, str(P), str(n)), nsample_env(args))


def spawn_loads(args, target: Target) -> list[dict]:
    """nsample.load twice, each in its own process, sharing an nsample cache that starts empty: first, cached."""
    from nsample.models.embedded import cache_dir

    cache_dir().mkdir(parents=True, exist_ok=True)
    cache = tempfile.mkdtemp(prefix=".bench-first-load-", dir=cache_dir())
    try:
        env = nsample_env(args, NSAMPLE_CACHE_DIR=cache)
        return [run_json(nsample_cmd(args, target, "--load-only"), env) for _ in range(2)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def targets_of(args) -> list[Target]:
    if args.gguf:
        return [Target(str(path), path) for path in args.gguf]
    if args.model is None:
        from nsample.models.embedded import embedded_gguf

        return [Target(None, embedded_gguf())]
    path = Path(args.model).expanduser()
    return [Target(args.model, path if args.model.endswith(".gguf") else None)]


def methods_for(args, target: Target) -> list[str]:
    """--methods less those that cannot run on `target` here (said once where asked for)."""
    from nsample.cpu.quantize import resolve_quantize

    llama = target.gguf is not None and importlib.util.find_spec("llama_cpp") is not None
    if not llama and any(m.startswith("llama") for m in args.methods):
        print("llama.cpp columns skipped: they need a GGUF file and llama-cpp-python (make test installs it)")
    methods = [m for m in args.methods if llama or not m.startswith("llama")]
    if target.gguf is None:
        methods = [m for m in methods if m != "fast-int8"]  # no blocks: decode_activations changes nothing
    if resolve_quantize("auto", args.device if args.device != "auto" else "cpu") != "int8":
        methods = [m for m in methods if m != "int8"]  # oneDNN's int8 GEMM is slow here (quantize.INT8_FLAGS)
    return methods


def speedup(row: dict, a: str, b: str) -> str:
    """How many times faster method a ran than b in this row."""
    return f"{row[b]['wall'] / row[a]['wall']:5.2f}x" if a in row and b in row else "    -"


def measured(args, target: Target, methods: list[str], P: int, n: int) -> tuple[dict, list[dict]]:
    """Each method's run at (prompt, n), and every round's runs. With --rounds K each method runs K times,
    alternated (the methods in turn, in reverse order every other round) so that a slow minute slows them alike; the
    run of median wall time (the lower one of an even K) stands for the method."""
    rounds = [{m: spawn(args, target, m, P, n) for m in (methods if k % 2 == 0 else methods[::-1])}
              for k in range(args.rounds)]
    middle = (args.rounds - 1) // 2
    return {m: sorted((rd[m] for rd in rounds), key=lambda run: run["wall"])[middle] for m in methods}, rounds


def by_round(rounds: list[dict], a: str, b: str) -> str:
    """The lowest and highest of each round's a-over-b speedup (b's wall time over a's, in the same round)."""
    ratios = sorted(rd[b]["wall"] / rd[a]["wall"] for rd in rounds if a in rd and b in rd)
    return f"{ratios[0]:.2f}-{ratios[-1]:.2f}x" if ratios else "-"


def table(args, target: Target) -> None:
    """The header, then one row per (prompt, n): each method in a fresh process (--rounds times, alternated)."""
    methods = methods_for(args, target)
    loads = spawn_loads(args, target) if any(m in NSAMPLE_METHODS for m in methods) else []
    T, first = args.new_tokens, True
    rounds = args.rounds > 1
    head = f"{'prompt':>6} {'n':>3} | " + " | ".join(f"{m + ' s':>11} {'tok/s':>6}" for m in methods) + \
           f" | {'MiB':>5} | fast/llama i8act/llama int8/llama fast/nrs fp32/llama" + \
           (f" | fast/llama, each of {args.rounds} rounds" if rounds else "")
    for P in args.prompts:
        for n in args.n:
            r, each = measured(args, target, methods, P, n)
            if first:
                print(f"{header(args, target, loads, r)}\n{head}\n{'-' * len(head)}")
                first = False
            toks = n * T
            mib = next((r[m]["peak_mib"] for m in ("fast", "fast-int8", "fp32") if m in r), float("nan"))
            print(f"{P:>6} {n:>3} | " + " | ".join(f"{r[m]['wall']:11.2f} {toks / r[m]['wall']:6.1f}" for m in methods)
                  + f" | {mib:5.0f} | {speedup(r, 'fast', 'llama'):>10} {speedup(r, 'fast-int8', 'llama'):>10} "
                  f"{speedup(r, 'int8', 'llama'):>10} "
                  f"{speedup(r, 'fast', 'nrs'):>8} {speedup(r, 'fp32', 'llama'):>10}"
                  + (f" | {by_round(each, 'fast', 'llama')}" if rounds else ""), flush=True)


def main():
    from nsample.cpu.instruction_sets import ISA_FLAGS  # torch-free; here, as this module imports no nsample

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    ap.add_argument("--gguf", type=Path, nargs="+", action="extend", default=[], metavar="FILE",
                    help="GGUF file(s) to run the table on, one table each (repeatable); both engines load the file")
    ap.add_argument("--device", default="auto", help="nsample's device (auto: cuda, mps, else cpu)")
    ap.add_argument("--dtype", default="auto", help="nsample's dtype (auto: bfloat16 on cuda, else float32)")
    ap.add_argument("--decode-width", type=int, default=None,
                    help="nsample's decode_width (EngineConfig: rows padded to a multiple of it, for batch invariance)")
    ap.add_argument("--prompts", type=int, nargs="+", default=[16, 512, 1024], help="prompt lengths, in tokens")
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 8, 16], help="choices per request")
    ap.add_argument("--new-tokens", type=int, default=64, help="new tokens per choice")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS, help="columns to run")
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs of each method per row, alternated; the table shows each method's median run")
    ap.add_argument("--isa", choices=ISA_FLAGS, default=None,
                    help="force nsample's kernel build (NSAMPLE_ISA) in its processes")
    args = ap.parse_args()
    if args.gguf and args.model:
        ap.error("--model and --gguf name the model both ways: give one")
    if args.rounds < 1:
        ap.error("--rounds: at least 1")
    import torch

    args.threads = torch.get_num_threads()
    for target in targets_of(args):
        table(args, target)


if __name__ == "__main__":
    main()
