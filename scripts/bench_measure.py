"""One nsample measurement of scripts/benchmark.py, in a process of its own: a load alone (its time, memory and decode
paths), or one method at one (prompt, n) timed after a warm-up, with the process's memory. benchmark.py spawns it
and reads the JSON line it prints last. Torch-free at import (scripts/bench_llamacpp.py takes TEXT and memory).
Usage: python scripts/bench_measure.py (--one METHOD PROMPT N | --load-only) [--model M] [--new-tokens 64]
       [--device auto] [--dtype auto] [--decode-width W]
"""
import argparse
import json
import time

TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how "
        "books were made, copied and read across Europe and beyond. ")
QUANTIZE = {"fast": "auto", "fast-int8": "auto", "int8": "int8"}  # method -> nsample quantize (others: none)
ACTIVATIONS = {"fast-int8": "int8"}  # method -> decode_activations (others: float32)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--one", nargs=3, metavar=("METHOD", "PROMPT", "N"), help="one method at one (prompt, n)")
    what.add_argument("--load-only", action="store_true", help="nsample.load alone (quantize auto)")
    ap.add_argument("--model", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--decode-width", type=int, default=None)
    args = ap.parse_args()
    if args.one:
        args.one = [args.one[0], int(args.one[1]), int(args.one[2])]
    print(json.dumps(measure(args) if args.one else measure_load(args)))


if __name__ == "__main__":
    main()
