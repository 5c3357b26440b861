"""A mixture of experts on a GGUF file's own blocks: Qwen 2 and Qwen 3 MoE (Qwen1.5-MoE, Qwen3-30B-A3B, ...), Mixtral
and gpt-oss.

A file holds each layer's experts as three 3-D tensors, (experts, rows, row bytes): ffn_gate_exps, ffn_up_exps and
ffn_down_exps (gpt-oss's with a bias each, (experts, rows)), or gate and up as one, ffn_gate_up_exps (each expert's
gate rows, then its up rows), read as its two halves in place. transformers' own GGUF loading dequantizes them into
its fused float32 parameters (gate_up_proj, with gate and up interleaved, and down_proj: 4 bytes a weight, 120 GB for
Qwen3-30B-A3B). Here each expert's projection is a GGUFLinear on its slice of the mapped file's rows (with its row of
the bias), so an expert costs nothing until a token is routed to it and then what its blocks cost, as in llama.cpp.
The router (ffn_gate_inp, float32 in llama.cpp's files) is a GGUFLinear too, so each row's routing, like its experts'
sums, never depends on the rows beside it (the seed contract).

The arithmetic is transformers':
- Qwen (Qwen3MoeTopKRouter, Qwen3MoeExperts; Qwen 2's are the same code) and Mixtral: softmax over the experts in
  float32, the top k, normalized where the config says (norm_topk_prob; Mixtral's always); each routed expert's
  down(act(gate(x)) * up(x));
- gpt-oss (GptOssTopKRouter, GptOssExperts): the top k of the (biased) router logits, then a softmax over those k; each
  routed expert's down((clamp(up) + 1) · g·σ(α·g)) with g = min(gate(x), limit), α 1.702 and limit 7 (its config's,
  the constants of llama.cpp's swiglu_oai);
each times its weight, summed into the token's row in ascending expert order.
"""
import torch
from torch import nn

from nsample.cpu.gguf_linear import GGUFLinear, in_decode

ROUTERS = {"Qwen2MoeTopKRouter": "config", "Qwen3MoeTopKRouter": "config", "MixtralTopKRouter": "normalized",
           "GptOssTopKRouter": "top_k_first"}  # transformers' classes whose arithmetic these repeat, and how each
# weighs its top k: normalized where its config's norm_topk_prob says, always (Mixtral), a softmax of the top k logits
EXPERTS = {"Qwen2MoeExperts", "Qwen3MoeExperts", "MixtralExperts", "GptOssExperts"}
KINDS = ("gate", "up", "down")  # ffn_{kind}_exps


class GGUFRouter(nn.Module):
    """transformers' top-k router with its logits on the file's blocks: (logits, top-k weights, top-k experts).
    `top_k_first`: gpt-oss's, a softmax over the top k logits (norm_topk_prob does not apply)."""

    def __init__(self, linear: GGUFLinear, top_k: int, norm_topk_prob: bool, top_k_first: bool = False):
        super().__init__()
        self.linear, self.top_k, self.norm_topk_prob, self.top_k_first = linear, top_k, norm_topk_prob, top_k_first

    def forward(self, hidden_states: torch.Tensor):
        logits = self.linear(hidden_states.reshape(-1, self.linear.in_features))  # (T, E)
        if self.top_k_first:
            return logits, *route_top_k_first(logits, self.top_k)
        return logits, *route(logits, self.top_k, self.norm_topk_prob)


def route(logits: torch.Tensor, top_k: int, norm_topk_prob: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Router logits (T, E) -> the top-k weights (T, k) and experts (T, k), as transformers' router computes them."""
    probs = torch.softmax(logits, dtype=torch.float, dim=-1)
    top, experts = torch.topk(probs, top_k, dim=-1)  # (T, k), (T, k)
    if norm_topk_prob:
        top = top / top.sum(dim=-1, keepdim=True)
    return top.to(logits.dtype), experts


def route_top_k_first(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt-oss's: router logits (T, E) -> the softmax of the top k logits (T, k) and their experts (T, k)."""
    top, experts = torch.topk(logits, top_k, dim=-1)  # (T, k), (T, k)
    return torch.softmax(top, dim=-1, dtype=top.dtype), experts


def clamped_swiglu(gate: torch.Tensor, up: torch.Tensor, alpha: float, limit: float) -> torch.Tensor:
    """gpt-oss's GLU (GptOssExperts._apply_gate, in its order): (clamp(up, ±limit) + 1) · g·σ(α·g), g = min(gate,
    limit). gate, up: (t, I)."""
    gate, up = gate.clamp(max=limit), up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


class GGUFExperts(nn.Module):
    """A layer's experts, each projection a GGUFLinear on its rows of the file's 3-D tensor, called as
    transformers' experts module is: (hidden (T, H), top-k experts (T, k), top-k weights (T, k)) -> (T, H)."""

    def __init__(self, tensors: dict[str, tuple[torch.Tensor, int, int]], num_experts: int, act_fn: nn.Module,
                 biases: dict[str, torch.Tensor] | None = None, swiglu: tuple[float, float] | None = None):
        """tensors: kind (KINDS) -> (the blocks (experts, rows, row bytes), each expert's rows contiguous (gate and up
        may be views of the halves of a fused gate|up), ggml type, columns); biases: kind -> float32 (experts, rows),
        where the file has them; swiglu: gpt-oss's (alpha, limit) (clamped_swiglu), else act_fn(gate) · up."""
        super().__init__()
        self.num_experts, self.act_fn, self.tensors, self.swiglu = num_experts, act_fn, tensors, swiglu
        self.biases = biases or {}
        for kind in KINDS:
            raw, type_id, K = tensors[kind]
            bias = self.biases.get(kind)
            setattr(self, kind, nn.ModuleList(GGUFLinear(raw[e], type_id, K, None if bias is None else bias[e])
                                              for e in range(num_experts)))
        self._kernels = {}

    def glu(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return self.act_fn(gate) * up if self.swiglu is None else clamped_swiglu(gate, up, *self.swiglu)

    def kernel(self, q8: bool | None = None):
        """The C++ layer (csrc/moe.cpp) on the same blocks, with the projections' int8 activations as they are set
        (use_int8_activations), or on float32 activations (q8=False: a fused prefill's); None without kernels."""
        ops = self.gate[0].ops
        if ops is None or not hasattr(ops, "gguf_experts"):
            return None
        key = ((self.gate[0].int8_activations or self.up[0].int8_activations, self.down[0].int8_activations)
               if q8 is None else (q8, q8))
        if key not in self._kernels:
            (gate, gt, _), (up, ut, _), (down, dt, _) = (self.tensors[k] for k in KINDS)
            self._kernels[key] = ops.gguf_experts(gate, gt, up, ut, down, dt, self.num_experts, *key,
                                                  *self._kernel_biases(), list(self.swiglu or ()))
        return self._kernels[key]

    def _kernel_biases(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The biases as csrc/moe.cpp takes them: gate|up's (experts, 2F) (a missing half zeros), down's (experts,
        H); None where the file has none."""
        gate, up = self.biases.get("gate"), self.biases.get("up")
        if gate is not None or up is not None:
            F = self.gate[0].out_features
            gate, up = (b if b is not None else torch.zeros(self.num_experts, F) for b in (gate, up))
            gate = torch.cat([gate, up], dim=1)
        return gate, self.biases.get("down")

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
        if in_decode() and (kernel := self.kernel()) is not None:  # the same sums in C++, bitwise
            return kernel(hidden_states.float().contiguous(), top_k_index, top_k_weights.float())
        out = torch.zeros_like(hidden_states)  # (T, H)
        for e in torch.unique(top_k_index).tolist():  # ascending: each row sums its experts in one order
            token, slot = torch.where(top_k_index == e)  # the rows routed to e, and where e is in their top k
            x = hidden_states[token]  # (t, H)
            y = self.down[e](self.glu(self.gate[e](x), self.up[e](x)))  # (t, H)
            out.index_add_(0, token, y * top_k_weights[token, slot, None])
        return out


def is_router(module: nn.Module) -> bool:
    return type(module).__name__ in ROUTERS


def router_of(module: nn.Module, linear: GGUFLinear) -> GGUFRouter:
    """The GGUFRouter on `linear` that weighs its top k as transformers' router `module` does (ROUTERS)."""
    kind = ROUTERS[type(module).__name__]
    return GGUFRouter(linear, module.top_k, module.norm_topk_prob if kind == "config" else kind == "normalized",
                      top_k_first=kind == "top_k_first")


def block_router(block: nn.Module) -> nn.Module | None:
    """A mixture-of-experts block's router module: Qwen's and Mixtral's `gate`, gpt-oss's `router` (None: neither).
    Looked up by name, never by a truth value of modules."""
    return block.gate if hasattr(block, "gate") else getattr(block, "router", None)


def is_experts(module: nn.Module) -> bool:
    return type(module).__name__ in EXPERTS
