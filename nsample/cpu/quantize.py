"""The decode weights: float (`none`), two-level int8 (`int8`) for every linear layer and the tied LM head, a GGUF
file's own blocks (`gguf`: loaded so by gguf_model.py), or a hub model's or folder's checkpoint rows in the C++
kernels (`rows`: loaded so by model_loader.py, checkpoint_rows.py); nothing to swap here for those two.

Why two-level int8 (nsample/cpu/int8_linear.py); SmolLM2-135M-Instruct, one thread of an AMX CPU, busy machine:
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
- CPUs: auto picks int8 only where oneDNN's int8 GEMM was measured fast (AMX-INT8; INT8_FLAGS); on plain AVX2,
  oneDNN halves int8 weights to avoid int16 saturation, which would cost the precision above, and on an AMD Zen 4
  (AVX512-VNNI) it ran its reference kernel, thousands of times slower.
"""
from pathlib import Path

import torch
from torch import nn

from nsample.cpu.checkpoint_rows import LOADED_AS
from nsample.cpu.gguf_linear import GGUFLinear
from nsample.cpu.int8_linear import Int8Embedding, Int8Linear, Member, SharedInput, int8_gemm_available

MODES = ("none", "int8", "gguf", "rows")
LOADED = {"gguf": "a GGUF file's blocks", "rows": "its checkpoint's rows in nsample's kernels"}  # the loader's modes
# /proc/cpuinfo names of the int8 units oneDNN's prepacked int8 GEMM was measured fast on. Not AVX512-VNNI alone: on
# an AMD EPYC (Zen 4: AVX512-VNNI, no AMX) oneDNN 3.12 ran qlinear_pointwise on its reference kernel (ref_int8;
# ONEDNN_VERBOSE=1 shows it), 7 s for the 576x49152 LM head at 4 rows, against 1.3-1.6 ms with AMX.
INT8_FLAGS = frozenset({"amx_int8"})
SHARED_INPUTS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # siblings that read the same input


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (/proc/cpuinfo on Linux; torch's own probes elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        return frozenset(next(line for line in text.splitlines() if line.startswith("flags")).split(":")[1].split())
    except (OSError, StopIteration, IndexError):
        probes = {"amx_int8": "_is_amx_tile_supported", "avx512_vnni": "_is_vnni_supported"}
        return frozenset(f for f, probe in probes.items() if getattr(torch.cpu, probe, lambda: False)())


def on_blocks(model: nn.Module) -> bool:
    """Whether `model`'s layers are the kernels' (GGUFLinear): a GGUF file's blocks or a checkpoint's rows."""
    return any(isinstance(m, GGUFLinear) for m in model.modules())


def loaded_as(model: nn.Module) -> str | None:
    """The mode the loader gave `model` (LOADED: gguf, rows), or None where it is for the engine to choose."""
    return getattr(model, LOADED_AS, None) or ("gguf" if on_blocks(model) else None)


def resolve_quantize(mode: str, device: str | torch.device, loaded: str | None = None) -> str:
    """The decode weights for `mode` on `device`, on this machine; `loaded`: the mode the loader gave the model."""
    return choose_quantize(mode, torch.device(device).type, cpu_flags(), int8_gemm_available(), loaded)


def choose_quantize(mode: str, device_type: str, flags: frozenset[str], int8_ops: bool,
                    loaded: str | None = None) -> str:
    """The loader's mode for a model it loaded as a GGUF file's blocks or a checkpoint's rows (model_loader decides:
    as_blocks, as_rows); otherwise auto = int8 on a CPU with AMX int8 units (it needs oneDNN's int8 ops; INT8_FLAGS
    says why only there), else none."""
    if mode not in ("auto", *MODES):
        raise ValueError(f"quantize must be one of auto, {', '.join(MODES)}; got {mode!r}")
    if loaded:
        if mode not in ("auto", loaded):
            raise ValueError(f"quantize={mode!r}: this model was loaded as {LOADED[loaded]}; load it with that mode "
                             f"instead")
        return loaded
    if mode == "gguf":
        raise ValueError("quantize='gguf' decodes on a GGUF file's blocks: load a .gguf model with it")
    if mode == "rows":
        raise ValueError("quantize='rows' decodes a checkpoint's rows in nsample's kernels: load a hub model or "
                         "folder with it (nsample.load)")
    cpu = device_type == "cpu"
    if mode == "int8" and not (cpu and int8_ops):
        raise ValueError(f"quantize={mode!r} needs a CPU and a torch build with oneDNN (x86); use 'none' here")
    if mode != "auto":
        return mode
    return "int8" if cpu and int8_ops and flags & INT8_FLAGS else "none"


def quantize(model: nn.Module, mode: str) -> nn.Module:
    """Swap `model`'s linear layers (and a tied input embedding) in place for `mode`'s kind; return it."""
    if mode in ("none", *LOADED) or any(isinstance(m, Int8Linear) for m in model.modules()):
        return model  # as loaded (a GGUF's blocks, a checkpoint's rows are loaded so), or swapped already: a second
        # call changes nothing
    assert mode == "int8", mode
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    embed = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    tied = type(head) is nn.Linear and embed is not None and head.weight is embed.weight
    for parent in list(model.modules()):
        _swap_children(parent, skip=head)  # the head is swapped below, with its embedding
    if type(head) is nn.Linear:
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
