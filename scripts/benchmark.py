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
       [--prompts 16 512 1024] [--n 1 4 8 16] [--new-tokens 64] [--isa avx2|avxvnni|avx512|avx512vnni|neon]
       [--rounds K] [--device cuda] [--dtype bfloat16] [--decode-width W]
With --rounds K (for a busy machine, whose speed moves by tens of percent from minute to minute), each row runs every
method K times, alternated, and shows each method's median run and the range of the rounds' fast/llama ratios.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# No torch (nor nsample) at import: scripts/bench_llamacpp.py imports this module's helpers and must stay torch-free.

TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how "
        "books were made, copied and read across Europe and beyond. ")
METHODS = ("fast", "fast-int8", "int8", "fp32", "nrs", "llama", "llama-seq")
NSAMPLE_METHODS = ("fast", "fast-int8", "int8", "fp32", "nrs")  # the order the header takes nsample's figures in
LLAMA = Path(__file__).with_name("bench_llamacpp.py")
QUANTIZE = {"fast": "auto", "fast-int8": "auto", "int8": "int8"}  # method -> nsample quantize (others: none)
ACTIVATIONS = {"fast-int8": "int8"}  # method -> decode_activations (others: float32)
HF_KINDS = {"embed_tokens": "token_embd", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
            "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate",
            "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "lm_head": "output", "norm": "output_norm",
            "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}  # transformers' names -> GGUF's
MIB = 2**20


@dataclass
class Target:
    """One model the table runs on: what nsample.load takes (None: the embedded one) and its GGUF file, if any."""
    model: str | None
    gguf: Path | None


def prompt_of(tokenizer, length: int, offset: int = 0) -> list[int]:
    """`length` tokens of TEXT, starting `offset` words in (different prompts of the same length)."""
    words = (TEXT * (length // 10 + 2)).split(" ")
    ids = tokenizer(" ".join(words[offset:]), add_special_tokens=False)["input_ids"]
    return ids[:length]


def status_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (peak resident since the last reset) of this process, in MiB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def memory(when: str) -> dict:
    """{"rss_<when>_mib": VmRSS, "hwm_<when>_mib": VmHWM} of this process now."""
    return {f"rss_{when}_mib": status_mib("VmRSS"), f"hwm_{when}_mib": status_mib("VmHWM")}


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # Linux >= 4.0: "5" resets VmHWM to the current RSS
        f.write("5")


def load_engine(args, quantize: str, activations: str = "float32"):
    """nsample.load(args.model) with its wall time and this process's memory right after it. The libraries it
    imports first (torch, transformers: several seconds on a slow disk) are timed apart, as import_s: llama.cpp's
    load_s counts no library import either."""
    t0 = time.perf_counter()
    import nsample
    import nsample.engine.engine  # noqa: F401 - torch and transformers, which nsample.load imports lazily

    imported = memory("imports")  # the runtime's own floor: Python, torch, transformers, before any model
    t1 = time.perf_counter()
    engine = nsample.load(args.model, device=args.device, dtype=args.dtype, quantize=quantize,
                          decode_activations=activations, decode_width=args.decode_width)
    return engine, {"import_s": t1 - t0, "load_s": time.perf_counter() - t1, **imported, **memory("load")}


def weights(engine) -> dict:
    """The kernels' instruction set and nsample.cpu.weights_report.describe(engine.model), or None where missing."""
    from nsample.cpu import kernels

    try:
        from nsample.cpu.weights_report import describe
    except ImportError:
        describe = None
    report = describe(engine.model) if describe else None
    isa = getattr(kernels, "isa", lambda: None)()
    built = getattr(kernels, "built_isa", lambda: isa)()  # an older checkout builds no other set than isa()
    if isa is not None and kernels.ops() is None:
        isa += " (kernels not built)"
    elif built != isa:
        isa = f"{built} (built in place of {isa}, which did not compile)"
    elif isa is not None and report is not None and report.get("isa") is None:
        isa += " (this model decodes without them)"
    return {"kernels_isa": isa, "report": report}


def measure_load(args) -> dict:
    """--load-only: one nsample.load (quantize auto) in this process: its time, memory and decode paths."""
    engine, report = load_engine(args, "auto")
    report |= weights(engine) | {"quantize": engine.quantize}
    engine.close()
    return report


def measure(args) -> dict:
    """One torch method at one (prompt, n), in this process: warm up, then time it; peak memory above the model."""
    import torch

    method, P, n = args.one
    engine, loaded = load_engine(args, QUANTIZE.get(method, "none"), ACTIVATIONS.get(method, "float32"))
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
    peak_before = status_mib("VmHWM")  # the load's and warm-up's peak, before the reset below
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        _reset_peak_rss()
        base = status_mib("VmRSS")
    t0 = time.perf_counter()
    run(T)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    peak = (torch.cuda.max_memory_allocated() - base) / 2**20 if dev.type == "cuda" else status_mib("VmHWM") - base
    end = memory("end")
    end["hwm_end_mib"] = max(end["hwm_end_mib"], peak_before)  # the process's peak over its whole life
    engine.close()
    return {"wall": wall, "peak_mib": peak, "device": str(dev), "dtype": str(model.dtype), "model": engine.name,
            "quantize": engine.quantize, **loaded, **end}


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
    return [sys.executable, __file__, *mode, "--new-tokens", str(args.new_tokens), "--device", args.device,
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


def fmt(value, spec: str = "8.2f") -> str:
    """`value` formatted by `spec`, or "-" as wide where there is none."""
    return "-".rjust(int(re.match(r"\d*", spec).group() or 0)) if value is None else format(value, spec)


def ratio(a, b) -> str:
    return f"{a / b:6.2f}x" if a is not None and b else "      -"


def engine_lines(loads: list[dict], ns: dict, ll: dict) -> list[str]:
    """Load times and memory, nsample beside llama.cpp, with their ratio."""
    first, cached = (loads + [{}, {}])[:2]
    imports = cached.get("import_s")
    rows = [("load s, first", first.get("load_s"), ll.get("load_s")),
            ("load s, cached", cached.get("load_s"), ll.get("load_s")),
            ("imports s (torch etc.)", imports, None),
            ("cached load + imports s", None if imports is None else imports + cached["load_s"], ll.get("load_s"))]
    rows.append(("RSS MiB, after imports", ns.get("rss_imports_mib"), ll.get("rss_imports_mib")))
    for when, what in (("load", "after load"), ("end", "end of run")):
        for field, name in (("rss", "RSS"), ("hwm", "peak RSS")):
            key = f"{field}_{when}_mib"
            rows.append((f"{name} MiB, {what}", ns.get(key), ll.get(key)))
    # The model's own memory above each runtime's floor, at the end of the run: the weights it read (a mapped file's
    # pages count once touched, so not yet after load), its KV cache and buffers.
    above = [None if e.get("rss_imports_mib") is None or e.get("rss_end_mib") is None
             else e["rss_end_mib"] - e["rss_imports_mib"] for e in (ns, ll)]
    rows.append(("RSS MiB, end - imports", *above))
    head = f"  {'':24} {'nsample':>8} {'llama.cpp':>9} {'ratio':>7}"
    return [head] + [f"  {name:24} {fmt(a)} {fmt(b, '9.2f')} {ratio(a, b)}" for name, a, b in rows]


def gguf_kinds(kind: str) -> list[str]:
    """weights_report's kind as the GGUF names it: self_attn.q_proj -> [attn_q]; a grouped layer, e.g.
    self_attn.q_proj_k_proj_v_proj -> [attn_q, attn_k, attn_v]; one it does not know stays as it is."""
    prefix, _, last = kind.rpartition(".")
    members = [f"{prefix}.{m}" if prefix else m for m in re.findall(r"[a-z]+_proj", last)] or [kind]
    return [HF_KINDS[m] for m in members] if all(m in HF_KINDS for m in members) else [HF_KINDS.get(kind, kind)]


def kinds(report: dict | None) -> dict:
    """weights_report's {"paths": {kind: path}} by the GGUF's kinds; a grouped layer's path says its group."""
    paths = {}
    for kind, path in (report or {}).get("paths", {}).items():
        group = gguf_kinds(kind)
        for k in group:
            paths[k] = path + (f" [{'+'.join(group)}]" if len(group) > 1 else "")
    return paths


def path_lines(target: Target, report: dict | None) -> list[str]:
    """Every layer kind's decode path in nsample and its tensor types in the GGUF; the bytes a decode step reads."""
    from make_fixtures import contents, kind_types, kinds_of

    info = contents(target.gguf) if target.gguf else None
    paths = kinds(report)
    names = kinds_of(info, paths) if info else sorted(paths)
    w1, w2 = max(map(len, names + ["layer kind"])), max(map(len, list(paths.values()) + ["nsample decode path"]))
    lines = [f"  {'layer kind':{w1}} {'nsample decode path':{w2}} GGUF tensors"]
    lines += [f"  {k:{w1}} {paths.get(k, '-'):{w2}} {kind_types(info, k) if info else '-'}" for k in names]
    ns_bytes = (report or {}).get("decode_bytes")
    gguf_bytes = info["decode_bytes"] if info else None
    lines.append(f"  weights read per decode step: nsample {fmt(ns_bytes and ns_bytes / MIB, '.1f')} MiB, "
                 f"GGUF {fmt(gguf_bytes and gguf_bytes / MIB, '.1f')} MiB, ratio {ratio(ns_bytes, gguf_bytes).strip()}")
    return lines


def first_of(row: dict, methods) -> dict:
    return next((row[m] for m in methods if m in row), {})


def llama_isas(row: dict) -> str:
    """Each llama.cpp column's build flags, once where the columns agree."""
    flags = {m: " ".join(row[m]["isa"]) for m in ("llama", "llama-seq") if m in row}
    if len(set(flags.values())) == 1:
        return f"llama.cpp ({', '.join(flags)}) {next(iter(flags.values()))}"
    return " | ".join(f"{m} {f}" for m, f in flags.items()) or "llama.cpp -"


def header(args, target: Target, loads: list[dict], row: dict) -> str:
    """The lines printed once above a model's table."""
    import torch

    cached = loads[-1] if loads else {}
    ns = {**cached, **first_of(row, NSAMPLE_METHODS)}  # the table's process where one ran, else the cached load's
    name = ns.get("model") or (target.gguf.stem if target.gguf else target.model)
    lines = [(f"model {name} on {ns.get('device', '-')} ({ns.get('dtype', '-')}; fast = quantize "
              f"{row.get('fast', cached).get('quantize', '-')}), torch {torch.__version__}, {args.threads} threads, "
              f"{args.new_tokens} new tokens per choice, temperature 1, eos ignored, each measurement in a fresh "
              "process" + (f"; nsample's decode_width {args.decode_width}" if args.decode_width else ""))]
    if target.gguf:
        from make_fixtures import summary

        lines.append(f"file {target.gguf}\n  {summary(target.gguf, per_kind=False)}")
    forced = f" (forced: --isa {args.isa})" if args.isa else ""
    lines.append(f"instruction sets: nsample kernels {cached.get('kernels_isa') or '-'}{forced} | "
                 f"{llama_isas(row)}")
    lines += engine_lines(loads, ns, first_of(row, ("llama", "llama-seq")))
    lines += path_lines(target, cached.get("report"))
    return "\n".join(lines)


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
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "PROMPT", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one or args.load_only:
        if args.one:
            args.one = [args.one[0], int(args.one[1]), int(args.one[2])]
        print(json.dumps(measure(args) if args.one else measure_load(args)))
        return
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
