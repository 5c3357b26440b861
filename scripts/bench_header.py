"""The lines scripts/benchmark.py prints once above each model's table: what ran and what it held. Each engine's
load time and memory beside the other's, the instruction sets of nsample's kernels and of llama.cpp's build, and the
decode path of every layer kind with the weight bytes a decode step reads, nsample's and the GGUF's own.
Torch-free at import, as benchmark.py is.
"""
import re

NSAMPLE_METHODS = ("fast", "fast-int8", "int8", "fp32", "nrs")  # the order the header takes nsample's figures in
HF_KINDS = {"embed_tokens": "token_embd", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
            "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate",
            "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "lm_head": "output", "norm": "output_norm",
            "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate": "ffn_gate_inp",
            "mlp.experts.gate": "ffn_gate_exps", "mlp.experts.up": "ffn_up_exps", "mlp.experts.down": "ffn_down_exps",
            "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
            "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
            "self_attn.qkv_proj": "attn_qkv", "mlp.gate_up_proj": "ffn_up",
            }  # transformers' names -> GGUF's (Qwen 2 and 3 MoE's experts, router and shared expert; Phi 3's q|k|v and
# gate|up, each one tensor, ffn_up holding both)
MIB = 2**20


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


def path_lines(target, report: dict | None) -> list[str]:
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
    ns_token, gguf_token = (report or {}).get("token_bytes"), info and info.get("token_bytes")
    if gguf_token and gguf_bytes and gguf_token < gguf_bytes:  # a mixture of experts: a token reads its top k
        lines.append(f"  one token's (its experts only): nsample {fmt(ns_token and ns_token / MIB, '.1f')} MiB, "
                     f"GGUF {gguf_token / MIB:.1f} MiB, ratio {ratio(ns_token, gguf_token).strip()}")
    return lines


def first_of(row: dict, methods) -> dict:
    return next((row[m] for m in methods if m in row), {})


def llama_isas(row: dict) -> str:
    """Each llama.cpp column's build flags, once where the columns agree."""
    flags = {m: " ".join(row[m]["isa"]) for m in ("llama", "llama-seq") if m in row}
    if len(set(flags.values())) == 1:
        return f"llama.cpp ({', '.join(flags)}) {next(iter(flags.values()))}"
    return " | ".join(f"{m} {f}" for m, f in flags.items()) or "llama.cpp -"


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo's on Linux, else the platform's), with its vendor, family and model where
    Linux gives them: figures from an Intel Xeon and an AMD EPYC differ (docs/benchmarks.md, stop 49)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            info = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        return platform.processor() or platform.machine()
    info = {k.strip(): v.strip() for k, v in info.items()}
    ids = ", ".join(f"{k} {info[k]}" for k in ("vendor_id", "cpu family", "model") if k in info)
    return (info.get("model name") or platform.processor() or platform.machine()) + (f" ({ids})" if ids else "")


def header(args, target, loads: list[dict], row: dict) -> str:
    """The lines printed once above a model's table (target: benchmark.Target)."""
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
    lines.append(f"cpu: {cpu_name()}")
    lines.append(f"instruction sets: nsample kernels {cached.get('kernels_isa') or '-'}{forced} | "
                 f"{llama_isas(row)}")
    lines += engine_lines(loads, ns, first_of(row, ("llama", "llama-seq")))
    lines += path_lines(target, cached.get("report"))
    return "\n".join(lines)
