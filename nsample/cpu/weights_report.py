"""What a model decodes on: each layer kind's weights (a GGUF's blocks of which format, int8, float) and the weight
bytes one decode step reads, for the benchmark and `/health`-style reports."""
import re

from torch import nn

from nsample.cpu import kernels
from nsample.cpu.gguf_experts import KINDS, GGUFExperts, GGUFRouter, block_router
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear
from nsample.cpu.int8_linear import Int8Embedding, Int8Linear


def describe(model: nn.Module) -> dict:
    """{"isa": the kernels' instruction set (None: no kernels in use), "paths": {layer kind: what it decodes on},
    "decode_bytes": weight bytes read per decode step (every projection and the LM head once; one embedding row a
    token is left out), "token_bytes": those one token's step reads (a mixture of experts' top k of its experts a
    layer, where decode_bytes counts them all; else decode_bytes)}."""
    paths: dict[str, set[str]] = {}
    total, uses_kernels = 0, False
    seen: set[int] = set()
    for name, m in model.named_modules():
        path, nbytes = _path(m)
        if path is None:
            continue
        kind = _kind(name)
        paths.setdefault(kind, set()).add(path)
        uses_kernels |= type(m) in (GGUFLinear, GGUFEmbedding) or getattr(m, "kernel", None) is not None
        key = id(m.blocks) if isinstance(m, (GGUFLinear, GGUFEmbedding)) else id(m)
        if key not in seen and not isinstance(m, (nn.Embedding, GGUFEmbedding, Int8Embedding)):
            total += nbytes  # an embedding is read a row a token; a tied head reads its blocks once
        seen.add(key)
    unread = sum(_unread_expert_bytes(m) for m in model.modules())
    return {"isa": kernels.built_isa() if uses_kernels else None,
            "paths": {k: ", ".join(sorted(v)) for k, v in sorted(paths.items())}, "decode_bytes": total,
            "token_bytes": total - unread}


def _unread_expert_bytes(block: nn.Module) -> float:
    """The bytes of a mixture-of-experts block's experts one token does not read (all but its router's top k: Qwen's
    `gate`, gpt-oss's `router`)."""
    experts = getattr(block, "experts", None)
    router = block_router(block)
    if not isinstance(experts, GGUFExperts) or not isinstance(router, GGUFRouter):
        return 0
    nbytes = sum(m.blocks.numel() for kind in KINDS for m in getattr(experts, kind))
    return nbytes * (1 - router.top_k / experts.num_experts)


def _path(m: nn.Module) -> tuple[str | None, int]:
    if isinstance(m, GGUFLinear):
        return f"{m.format} blocks{' × int8 activations' if m.int8_activations else ''}", m.blocks.numel()
    if isinstance(m, GGUFEmbedding):
        return f"{m.format} rows", m.blocks.numel()
    if isinstance(m, Int8Linear):
        return "int8 (two levels)", 2 * m.out_features * m.in_features
    if isinstance(m, Int8Embedding):
        return "int8 rows (the head's)", 0
    if type(m) is nn.Linear:
        return str(m.weight.dtype).removeprefix("torch."), m.weight.numel() * m.weight.element_size()
    if type(m) is nn.Embedding:
        return f"{str(m.weight.dtype).removeprefix('torch.')} rows", m.weight.numel() * m.weight.element_size()
    return None, 0


def _kind(name: str) -> str:
    """model.layers.3.self_attn.q_proj -> self_attn.q_proj; model.layers.3.mlp.experts.gate.5 -> mlp.experts.gate (an
    expert's projection, gguf_experts.py); a grouped int8 layer is named by its members."""
    name = re.sub(r"^(model\.)?(layers\.\d+\.)?", "", re.sub(r"\.linear$|(\.experts\.\w+)\.\d+$", r"\1", name))
    return re.sub(r"^model\.", "", name)

