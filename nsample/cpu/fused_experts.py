"""A layer's experts as the fused C++ decode runs them (fused_decode.py): Qwen 2 and 3 MoE's and gpt-oss's experts on a
GGUF file's blocks (gguf_experts.py) in place of the MLP, the router's top k in torch, each routed expert's SwiGLU
(gpt-oss's clamped one, with its biases) in csrc/moe.cpp, and Qwen 2 MoE's gated shared expert on the kernels'
Linears."""
from dataclasses import dataclass

import torch
from torch import nn

from nsample.cpu import gguf_experts
from nsample.cpu.gguf_experts import GGUFExperts, GGUFRouter

SILU = {"SiLU", "SiLUActivation"}  # torch's and transformers' x·sigmoid(x)


@dataclass
class Moe:
    """A layer's experts in place of its MLP: the model's own RMSNorm module before them, the router (the kernels'
    Linear on its blocks), its top k and normalization (or gpt-oss's softmax over the top k), the experts' C++ layer
    (csrc/moe.cpp), and Qwen 2 MoE's shared expert (its gate|up and down Linears, its MLP size, the Linear of its
    one-row sigmoid gate)."""
    norm: nn.Module
    router: object
    top_k: int
    norm_topk_prob: bool
    experts: object
    shared: tuple | None = None
    top_k_first: bool = False

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        x = self.norm(h).contiguous()  # (M, E)
        logits = self.router(x)  # (M, experts)
        weights, experts = (gguf_experts.route_top_k_first(logits, self.top_k) if self.top_k_first else
                            gguf_experts.route(logits, self.top_k, self.norm_topk_prob))  # (M, k) each
        y = self.experts(x, experts, weights)  # (M, E)
        if self.shared is not None:  # as Qwen2MoeSparseMoeBlock: experts + sigmoid(gate(x)) * shared MLP(x)
            gate_up, down, F, gate = self.shared
            gu = gate_up(x)  # (M, 2F)
            y = y + torch.sigmoid(gate(x)) * down(nn.functional.silu(gu[:, :F]) * gu[:, F:])
        return y


def build(layer: nn.Module, ops, prefill: bool, joined) -> Moe:
    """Experts on a GGUF's blocks with a router (Qwen 3 MoE's block; gpt-oss's, its router `router`), and a gated
    shared expert (Qwen 2 MoE's); `joined(ops, linears, prefill)` the kernels' Linear of projections
    (fused_decode._joined)."""
    mlp = layer.mlp
    children = set(dict(mlp.named_children()))
    router = gguf_experts.block_router(mlp)
    if (children not in ({"experts", "gate"}, {"experts", "router"},
                         {"experts", "gate", "shared_expert", "shared_expert_gate"})
            or not isinstance(mlp.experts, GGUFExperts) or not isinstance(router, GGUFRouter)
            or (mlp.experts.swiglu is None and type(mlp.experts.act_fn).__name__ not in SILU)):
        raise ValueError("not experts on a GGUF's blocks with a plain router and SiLU (or gpt-oss's SwiGLU)")
    experts = mlp.experts.kernel(q8=False if prefill else None)
    if experts is None:
        raise ValueError("no experts kernel")
    shared = None
    if "shared_expert" in children:
        s = mlp.shared_expert
        if type(s.act_fn).__name__ not in SILU:
            raise ValueError("a shared expert of another activation")
        shared = (joined(ops, [s.gate_proj, s.up_proj], prefill), joined(ops, [s.down_proj], prefill),
                  s.gate_proj.out_features, joined(ops, [mlp.shared_expert_gate], prefill))
    return Moe(layer.post_attention_layernorm, joined(ops, [router.linear], prefill), router.top_k,
               router.norm_topk_prob, experts, shared, router.top_k_first)
