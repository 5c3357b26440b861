"""The decode weights: float (`none`) or two-level int8 (`int8`) for every linear layer and the tied LM head.

Why two-level int8 (nsample/int8_linear.py); SmolLM2-135M-Instruct, one thread of an AMX CPU, busy machine:
- Decode reads every weight once per step, so bytes per weight are the lever, and oneDNN's prepacked int8
  GEMM (AMX / VNNI) costs about the same for 1 to 16 rows where float32 grows with the rows: a decode step
  of 8 rows took 85 ms against 170 ms in float32 (bfloat16 weights: 69 ms; one-level int8: 55 ms).
- Quality decides the rest. The embedded weights are 4-bit groups (Q4_1, head Q8_0), so one 8-bit-per-channel
  rounding moves greedy output; argmax flips per token, teacher-forced over 640 tokens: weight-only int8
  per channel 4.4%, int8 activations per row 7.2%, bfloat16 activations 0.5%, bfloat16 weights,
  activations and outputs 2.0% (all far below 90% of 64-token continuations identical). Two int8 levels
  for weights and activations: no flip, mean |Δ logprob| 0.0007; scripts/quality.py: 20 of 20 identical.
- The other kernels torch ships, on the LM head (49152x576): `torch._weight_int8pack_mm` (weight-only,
  per channel) rounds activations and outputs to bfloat16 and grows with the rows (1.8 / 6.4 / 12.5 ms
  at 1 / 8 / 16 rows, oneDNN int8: 1.3-1.6 ms); `torch._int_mm` repacks the weight on every call (3.4 ms);
  torchao 0.18 on CPU: Int8WeightOnlyConfig 64 ms, Int8DynamicActivationInt8WeightConfig 3.7-5.5 ms;
  `_weight_int4pack_mm_for_cpu` and FBGEMM fp16 are fast only for bfloat16 activations or one row.
  `quantize_dynamic` (FBGEMM) is not used: one activation scale per batch would couple the rows.
- Rows stay independent, bitwise: integer sums are exact and every float step is per row.
- CPUs: auto picks int8 only where int8 dot products are native (AMX-INT8, AVX512-VNNI, AVX-VNNI); on plain
  AVX2, oneDNN halves int8 weights to avoid int16 saturation, which would cost the precision above.
"""
from pathlib import Path

import torch
from torch import nn

from nsample.int8_linear import Int8Embedding, Int8Linear, Member, SharedInput, int8_gemm_available

MODES = ("none", "int8", "gguf")
INT8_FLAGS = frozenset({"amx_int8", "avx512_vnni", "avx_vnni"})  # /proc/cpuinfo names of native int8 dot products
SHARED_INPUTS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # siblings that read the same input


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (/proc/cpuinfo on Linux; torch's own probes elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        return frozenset(next(line for line in text.splitlines() if line.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration, IndexError):
        probes = {"amx_int8": "_is_amx_tile_supported", "avx512_vnni": "_is_vnni_supported"}
        return frozenset(f for f, probe in probes.items() if getattr(torch.cpu, probe, lambda: False)())


def resolve_quantize(mode: str, device: str | torch.device) -> str:
    """The decode weights for `mode` on `device`, on this machine."""
    return choose_quantize(mode, torch.device(device).type, cpu_flags(), int8_gemm_available())


def choose_quantize(mode: str, device_type: str, flags: frozenset[str], int8_ops: bool) -> str:
    """auto = gguf on a CPU with AVX-512 and native int8 dot products, int8 on one with native int8 dot products
    only (both need oneDNN's int8 ops), else none."""
    if mode not in ("auto", *MODES):
        raise ValueError(f"quantize must be one of auto, {', '.join(MODES)}; got {mode!r}")
    cpu = device_type == "cpu"
    if mode in ("int8", "gguf") and not (cpu and int8_ops):
        raise ValueError(f"quantize={mode!r} needs a CPU and a torch build with oneDNN (x86); use 'none' here")
    if mode == "gguf" and "avx512f" not in flags:
        raise ValueError("quantize='gguf' needs a CPU with AVX-512; use 'int8' here")
    if mode != "auto":
        return mode
    if not (cpu and int8_ops and flags & INT8_FLAGS):
        return "none"
    return "gguf" if "avx512f" in flags else "int8"


def quantize(model: nn.Module, mode: str) -> nn.Module:
    """Swap `model`'s linear layers (and a tied input embedding) in place for `mode`'s kind; return it."""
    if mode == "none" or any(isinstance(m, Int8Linear) for m in model.modules()):
        return model  # none, or swapped already: a second call changes nothing
    assert mode in ("int8", "gguf"), mode
    gguf = mode == "gguf"
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    tied = type(head) is nn.Linear and embed is not None and head.weight is embed.weight
    for parent in list(model.modules()):
        _swap_children(parent, skip=head, gguf=gguf)  # the head is swapped below, with its embedding
    if type(head) is nn.Linear:
        new_head = Int8Linear(head.weight, head.bias, keep_rows=tied, gguf=gguf)
        model.set_output_embeddings(new_head)
        if tied:
            model.set_input_embeddings(Int8Embedding(new_head, embed.weight.dtype))
    return model


def _swap_children(parent: nn.Module, skip: nn.Module | None, gguf: bool) -> None:
    linears = {name: m for name, m in parent.named_children() if type(m) is nn.Linear and m is not skip}
    for names in SHARED_INPUTS:
        if all(n in linears for n in names):
            group = SharedInput([linears.pop(n) for n in names], gguf=gguf)
            parent.add_module("_".join(names), group)  # registered once, here; members refer to it
            for i, n in enumerate(names):
                setattr(parent, n, Member(group, i))
    for name, m in linears.items():
        setattr(parent, name, Int8Linear(m.weight, m.bias, gguf=gguf))
