"""The decode weights: float (`none`) or two-level int8 (`int8`) for every linear layer and the tied LM head.

Why two-level int8 (see nsample/int8_linear.py), measured on SmolLM2-135M-Instruct, 2 threads, AMX CPU:
- Decode reads every weight once per step, so fewer bytes per weight is the lever; oneDNN's prepacked int8
  GEMM (AMX / VNNI) also costs about the same at 1, 8 or 16 rows, where float32 GEMM grows with the rows.
- Quality is the constraint: the embedded weights are 4-bit groups of 32 (Q4_1) and the head 8-bit groups
  (Q8_0), so any single 8-bit-per-channel rounding, of weights or of activations, moves greedy output:
  per token, weight-only int8 per channel flipped 4.4% of argmaxes, int8 activations per row 7.2%,
  bfloat16 activations 0.5% and bfloat16 weights+activations+outputs 2%, far from 90% of 64-token
  continuations identical. Two int8 levels for both (each exact to ~1/65000 of its row's maximum) flipped
  none of 640 teacher-forced tokens (mean |Δ logprob| 0.0007), at the bytes of bfloat16.
- What else torch ships is slower or not better: `torch._weight_int8pack_mm` (weight-only, per channel)
  rounds activations and outputs to bfloat16 and its time grows with the rows (LM head, 1 thread: 1.8 ms
  at 1 row, 6.3 ms at 8, 12.5 ms at 16, against 1.4-1.8 ms for oneDNN int8); `torch._int_mm` re-packs the
  weight on every call (3.4 ms); torchao 0.18's Int8WeightOnlyConfig (64 ms) and
  Int8DynamicActivationInt8WeightConfig (3.7-5.5 ms) on CPU are slower still;
  `_weight_int4pack_mm_for_cpu` is fast only with bfloat16 activations and outputs (the quality above).
  `quantize_dynamic` (FBGEMM) is not used: one activation scale per batch would couple the rows.
- Row independence: integer sums are exact and every float step is elementwise per row, so a row's
  logits are bitwise the same whatever else is in the batch (tests/test_quantize.py).
- CPUs: auto picks int8 only where the int8 dot products are native (AMX-INT8, AVX512-VNNI, AVX-VNNI); on
  plain AVX2, oneDNN halves int8 weights to avoid int16 saturation, which would break the exactness above.
"""
from pathlib import Path

import torch
from torch import nn

from nsample.int8_linear import Int8Embedding, Int8Linear, Member, SharedInput, int8_gemm_available

MODES = ("none", "int8")
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
    """auto = int8 on a CPU with native int8 dot products and oneDNN's int8 ops, else none."""
    if mode not in ("auto", *MODES):
        raise ValueError(f"quantize must be one of auto, {', '.join(MODES)}; got {mode!r}")
    cpu = device_type == "cpu"
    if mode == "int8" and not (cpu and int8_ops):
        raise ValueError("quantize='int8' needs a CPU and a torch build with oneDNN (x86); use 'none' here")
    if mode != "auto":
        return mode
    return "int8" if cpu and int8_ops and flags & INT8_FLAGS else "none"


def quantize(model: nn.Module, mode: str) -> nn.Module:
    """Swap `model`'s linear layers (and a tied input embedding) in place for `mode`'s kind; return it."""
    if mode == "none" or any(isinstance(m, Int8Linear) for m in model.modules()):
        return model  # already swapped: quantizing twice is a no-op
    assert mode == "int8", mode
    head = model.get_output_embeddings()
    embed = model.get_input_embeddings()
    tied = head is not None and embed is not None and head.weight is embed.weight
    for parent in list(model.modules()):
        _swap_children(parent, skip=head)  # the head is swapped below, with its embedding
    if head is not None:
        new_head = Int8Linear(head.weight, head.bias, keep_rows=tied)
        model.set_output_embeddings(new_head)
        if tied:
            model.set_input_embeddings(Int8Embedding(new_head, embed.weight.dtype))
    return model


def _swap_children(parent: nn.Module, skip: nn.Module | None) -> None:
    linears = {name: m for name, m in parent.named_children() if type(m) is nn.Linear and m is not skip}
    for names in SHARED_INPUTS:
        if all(n in linears for n in names):
            group = SharedInput([linears.pop(n) for n in names])
            parent.add_module("_".join(names), group)  # registered once, here; members refer to it
            for i, n in enumerate(names):
                setattr(parent, n, Member(group, i))
    for name, m in linears.items():
        setattr(parent, name, Int8Linear(m.weight, m.bias))
