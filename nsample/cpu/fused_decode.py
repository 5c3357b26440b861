"""Decode steps of a quantized Llama-style model in C++: four kernel calls per layer (csrc/decode_layer.cpp,
attention.cpp).

On a 2-core CPU a decode step of the embedded model at n=1 spent about half its 30 ms outside the weights: some
forty ATen ops per layer (norms, rotary embedding, the attention's calls and merges, SiLU·mul, residual adds)
and the transformers modules' Python around them. Here a layer is:
    qkv = RMSNorm(h) · Wqkvᵀ                     norm_linear (Qwen 3: then each q and k head's own RMSNorm, the
                                                 model's q_norm and k_norm modules)
    a   = attention(rotary(q, k), v)             decode_attention: this step's k, v stored in the cohort buffers,
                                                 each query over its prompt and its own tokens in one softmax
    h  += a · Woᵀ                                linear_add
    h  += (SiLU(gate) · up)(RMSNorm(h)) · Wdᵀ    norm_swiglu, linear_add (Qwen 2 and 3 MoE: h += experts(RMSNorm(h)),
                                                 the model's norm module, the router's top k in torch, each routed
                                                 expert's SwiGLU in csrc/moe.cpp: gguf_experts.py; Qwen 2's gated
                                                 shared expert on the kernels' Linears)
with transformers' own embedding and rotary tables. Each step is per row in a fixed order, so a row's numbers do
not depend on its neighbours (the seed contract). The linear layers are what the model holds (csrc/linear.h):
a GGUF file's blocks (quantize="gguf", gguf_linear.py: the float32 model's arithmetic up to the order of sums, or
on int8 activations; q/k/v, and gate/up, as one layer of parts, each in its own format), or two-level int8, as
Int8Linear computes it.
It runs wherever the kernels run (AVX2, AVX-512, NEON: kernels.py) for quantized models of plain causal attention
(the shared-prefix layout); elsewhere the runner calls the model as before.

Short prompts (at most SHORT_PROMPT tokens) are prefilled here too (`prefill`): the same calls on the prompt's rows,
the projections on the decode kernels (float32 activations), the attention in prefill_attention. The model's
forward on the GEMM expands each weight once for a tile of 32 rows, and its modules' Python costs some 15 ms a
forward. Two threads, a prompt alone, milliseconds here / in the model's forward: the embedded Q4_1 model, 8 tokens
18 / 55, 16 tokens 33 / 57, 32 tokens 62 / 68; a 1.1B Q4_K_M model, 8 tokens 150 / 267, 16 tokens 263 / 257, 32
tokens 515 / 332. So 16, where the K-quants break even. Prompts that arrive together lose: eight of 16 tokens packed
took 235 ms here against 179 in one GEMM forward (embedded). Which path a prompt takes is its length's choice
alone, so its numbers never depend on the prompts packed with it.
"""
from dataclasses import dataclass

import torch
from torch import nn

from nsample.cpu import gguf_experts, kernels
from nsample.cpu.gguf_experts import GGUFExperts, GGUFRouter
from nsample.cpu.gguf_linear import GGUFLinear
from nsample.cpu.int8_linear import Int8Linear, Member
from nsample.cpu.whole_head_rotary import WholeHeadRotary
from nsample.engine.prefix_attention import Chunk, Group

FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "phi3", "smollm3"}  # LlamaDecoderLayer's,
# Qwen 3's with q/k RMSNorms per head, Qwen 2 and 3 MoE's with experts in place of the MLP on a GGUF file's blocks
# (gguf_experts.py), Phi 3's with q|k|v and gate|up each one projection (qkv_proj, gate_up_proj), SmolLM3's with
# no rotary embedding on every fourth layer (cos 1 and sin 0 there: the kernels' rotation leaves q and k as they are)
SILU = {"SiLU", "SiLUActivation"}  # torch's and transformers' x·sigmoid(x)
SHORT_PROMPT = 16  # prompts of at most this many tokens prefill here too (`prefill`), on the decode kernels


@dataclass
class Layer:
    eps: float
    norm1: torch.Tensor  # (E,) input_layernorm
    qkv: object  # the kernels' Linear (csrc/linear.h) of each projection
    o: object
    norm2: torch.Tensor  # (E,) post_attention_layernorm
    gate_up: object  # None where the layer has experts (moe)
    down: object
    qk_norms: tuple[nn.Module, nn.Module] | None = None  # Qwen 3: RMSNorm of each q and k head before the rotary
    moe: "Moe | None" = None
    rope: bool = True  # False: SmolLM3's layers without a rotary embedding


@dataclass
class Moe:
    """A layer's experts in place of its MLP: the model's own RMSNorm module before them, the router (the kernels'
    Linear on its blocks), its top k and normalization, the experts' C++ layer (csrc/moe.cpp), and Qwen 2 MoE's
    shared expert (its gate|up and down Linears, its MLP size, the Linear of its one-row sigmoid gate)."""
    norm: nn.Module
    router: object
    top_k: int
    norm_topk_prob: bool
    experts: object
    shared: tuple | None = None

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        x = self.norm(h).contiguous()  # (M, E)
        weights, experts = gguf_experts.route(self.router(x), self.top_k, self.norm_topk_prob)  # (M, k) each
        y = self.experts(x, experts, weights)  # (M, E)
        if self.shared is not None:  # as Qwen2MoeSparseMoeBlock: experts + sigmoid(gate(x)) * shared MLP(x)
            gate_up, down, F, gate = self.shared
            gu = gate_up(x)  # (M, 2F)
            y = y + torch.sigmoid(gate(x)) * down(nn.functional.silu(gu[:, :F]) * gu[:, F:])
        return y


class FusedDecoder:
    def __init__(self, model, ops, layers: list[Layer], prefill_layers: list[Layer], head):
        cfg = model.config.get_text_config(decoder=True)
        attn = model.model.layers[0].self_attn
        self.ops, self.layers, self.prefill_layers, self.head = ops, layers, prefill_layers, head
        self.embed, self.rotary, self.norm = model.model.embed_tokens, model.model.rotary_emb, model.model.norm
        self.heads, self.kv_heads, self.scale = cfg.num_attention_heads, cfg.num_key_value_heads, attn.scaling
        self.head_dim = attn.head_dim
        self.ropeless = not all(L.rope for L in layers)  # SmolLM3: a table of cos 1 and sin 0 is made each step

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, groups: list[Group]) -> torch.Tensor:
        """Next-token logits (B, V) for one token per row, ids and positions (B, 1), rows grouped by cohort."""
        h = self.embed(ids[:, 0]).float().contiguous()  # (B, E)
        tables = self._tables(*(x[:, 0].float().contiguous() for x in self.rotary(h, positions)))  # (B, D) each
        own = [v for g in groups for v in (g.start, g.cohort.length)]
        segments = [v for g in groups for s in g.segments for v in (g.start + s.start, g.start + s.stop)]
        prompts = [s.kv.prefix for g in groups for s in g.segments]
        return self._forward(h, self.layers, lambda i, qkv: self.ops.decode_attention(
            qkv, *tables[self.layers[i].rope], self.heads, self.kv_heads, self.scale, own,
            [g.cohort.keys[i] for g in groups], [g.cohort.values[i] for g in groups], segments,
            [p[i][0] for p in prompts], [p[i][1] for p in prompts]))

    @torch.inference_mode()
    def prefill(self, ids: torch.Tensor, positions: torch.Tensor, chunks: list[Chunk], keep: list[int]
                ) -> torch.Tensor:
        """Prefill short prompts' chunks packed into one sequence, ids and positions (T,), each chunk's keys and
        values stored in its request's SharedKV; the logits (len(keep), V) of the rows `keep`."""
        h = self.embed(ids).float().contiguous()  # (T, E)
        tables = self._tables(*(x[0].float().contiguous() for x in self.rotary(h, positions[None])))  # (T, D) each
        spans = [v for c in chunks for v in (c.start, c.stop, c.first)]
        return self._forward(h, self.prefill_layers, lambda i, qkv: self.ops.prefill_attention(
            qkv, *tables[self.prefill_layers[i].rope], self.heads, self.kv_heads, self.scale, spans,
            [c.kv.buffers[i][0] for c in chunks], [c.kv.buffers[i][1] for c in chunks]), keep)

    def _forward(self, h: torch.Tensor, layers: list[Layer], attention, keep: list[int] | None = None
                 ) -> torch.Tensor:
        """The layers on h (M, E), in place, `attention(i, qkv)` (M, H·D) layer i's; the logits (M or len(keep), V)."""
        ops = self.ops
        for i, L in enumerate(layers):
            qkv = ops.norm_linear(h, L.norm1, L.eps, L.qkv)  # (M, (H + 2·Hkv)·D)
            if L.qk_norms is not None:
                self._norm_heads(qkv, *L.qk_norms)
            ops.linear_add(attention(i, qkv), L.o, h)
            if L.moe is None:
                ops.linear_add(ops.norm_swiglu(h, L.norm2, L.eps, L.gate_up), L.down, h)
            else:
                h += L.moe(h)
        h = h if keep is None else h[keep].contiguous()
        return ops.norm_linear(h, self.norm.weight, self.norm.variance_epsilon, self.head)

    def _tables(self, cos: torch.Tensor, sin: torch.Tensor) -> dict[bool, tuple[torch.Tensor, torch.Tensor]]:
        """The rotary tables of a layer with a rotary embedding (True) and, where the model has such layers, of one
        without (False: cos 1, sin 0)."""
        return {True: (cos, sin), **({False: (torch.ones_like(cos), torch.zeros_like(sin))} if self.ropeless else {})}

    def _norm_heads(self, qkv: torch.Tensor, q_norm: nn.Module, k_norm: nn.Module) -> None:
        """Qwen 3's q_norm and k_norm, the model's own modules, on each q and k head of qkv (M, (H + 2·Hkv)·D), in
        place: a head's numbers are its own, as in the model's forward on (B, T, H, D)."""
        M, D = len(qkv), self.head_dim
        q, k = qkv[:, :self.heads * D], qkv[:, self.heads * D:(self.heads + self.kv_heads) * D]
        q.copy_(q_norm(q.view(M, self.heads, D)).view(M, -1))
        k.copy_(k_norm(k.view(M, self.kv_heads, D)).view(M, -1))


def build(model) -> FusedDecoder | None:
    """The fused decoder of `model`, or None where it does not apply (then the model's own forward runs)."""
    cfg = model.config.get_text_config(decoder=True)
    quantized = any(type(m) in (Int8Linear, GGUFLinear) for m in model.modules())  # else no kernels are built
    if not quantized or cfg.model_type not in FAMILIES or model.dtype != torch.float32:
        return None
    ops = kernels.ops()
    if ops is None:
        return None
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if head_dim % 16 or cfg.hidden_size % 32 or getattr(cfg, "hidden_act", "silu") != "silu":
        return None
    if (cfg.rope_parameters.get("partial_rotary_factor", 1.0) != 1.0  # the kernels turn whole heads: Phi-4-mini's
            and not isinstance(model.model.rotary_emb, WholeHeadRotary)):  # partial one must be made so at load
        return None
    try:
        layers = [_layer(layer, ops) for layer in model.model.layers]
        int8 = any(m.int8_activations for m in model.modules() if type(m) is GGUFLinear)
        prefill_layers = [_layer(layer, ops, prefill=True) for layer in model.model.layers] if int8 else layers
        head = _joined(ops, [model.get_output_embeddings()])
    except (AttributeError, ValueError):
        return None
    return FusedDecoder(model, ops, layers, prefill_layers, head)


def _layer(layer: nn.Module, ops, prefill: bool = False) -> Layer:
    attn, mlp = layer.self_attn, layer.mlp
    moe = _moe(layer, ops, prefill) if hasattr(mlp, "experts") else None
    if moe is None and type(getattr(mlp, "act_fn", None) or mlp.activation_fn).__name__ not in SILU:
        raise ValueError("not a plain SiLU MLP")
    norms = layer.input_layernorm, layer.post_attention_layernorm
    if norms[0].variance_epsilon != norms[1].variance_epsilon:
        raise ValueError("two epsilons")
    qk_norms = (attn.q_norm, attn.k_norm) if hasattr(attn, "q_norm") else None
    mlp_parts = (None, None)
    if moe is None:
        gate_up = [mlp.gate_up_proj] if hasattr(mlp, "gate_up_proj") else [mlp.gate_proj, mlp.up_proj]  # Phi 3: one
        mlp_parts = (_joined(ops, gate_up, prefill), _joined(ops, [mlp.down_proj], prefill))
    qkv = [attn.qkv_proj] if hasattr(attn, "qkv_proj") else [attn.q_proj, attn.k_proj, attn.v_proj]
    return Layer(norms[0].variance_epsilon, norms[0].weight.float(), _joined(ops, qkv, prefill),
                 _joined(ops, [attn.o_proj], prefill), norms[1].weight.float(), *mlp_parts, qk_norms, moe,
                 bool(getattr(attn, "use_rope", True)))


def _moe(layer: nn.Module, ops, prefill: bool) -> Moe:
    """Experts on a GGUF's blocks with a router (Qwen 3 MoE's block), and a gated shared expert (Qwen 2 MoE's)."""
    mlp = layer.mlp
    children = set(dict(mlp.named_children()))
    if (children not in ({"experts", "gate"}, {"experts", "gate", "shared_expert", "shared_expert_gate"})
            or not isinstance(mlp.experts, GGUFExperts) or not isinstance(mlp.gate, GGUFRouter)
            or type(mlp.experts.act_fn).__name__ not in SILU):
        raise ValueError("not experts on a GGUF's blocks with a plain router and SiLU")
    experts = mlp.experts.kernel(q8=False if prefill else None)
    if experts is None:
        raise ValueError("no experts kernel")
    shared = None
    if "shared_expert" in children:
        s = mlp.shared_expert
        if type(s.act_fn).__name__ not in SILU:
            raise ValueError("a shared expert of another activation")
        shared = (_joined(ops, [s.gate_proj, s.up_proj], prefill), _joined(ops, [s.down_proj], prefill),
                  s.gate_proj.out_features, _joined(ops, [mlp.shared_expert_gate], prefill))
    return Moe(layer.post_attention_layernorm, _joined(ops, [mlp.gate.linear], prefill), mlp.gate.top_k,
               mlp.gate.norm_topk_prob, experts, shared)


def _joined(ops, linears: list[nn.Module], prefill: bool = False):
    """The kernels' Linear (csrc/linear.h) of sibling projections of one input, their outputs side by side: a
    GGUF's blocks (each its own format), or the int8 layer they share (quantize.SHARED_INPUTS) or are. A prefill's
    layers keep float32 activations where the decode's are int8 (gguf_linear.py: the prompt's KV as the float32
    model's)."""
    if all(type(m) is GGUFLinear for m in linears):
        biases = [m.bias if m.bias is not None else torch.zeros(m.out_features) for m in linears]
        bias = torch.cat(biases) if any(m.bias is not None for m in linears) else None
        return ops.gguf_block_linear([m.blocks for m in linears], [m.type_id for m in linears], bias,
                                     not prefill and any(m.int8_activations for m in linears))
    if len(linears) == 1 and type(linears[0]) is Int8Linear and linears[0].kernel is not None:
        return linears[0].kernel
    group = linears[0].group[0] if type(linears[0]) is Member else None
    if group is None or [(type(m), m.group[0], m.index) for m in linears] != [
            (Member, group, i) for i in range(len(group.sizes))] or group.linear.kernel is None:
        raise ValueError("projections neither a GGUF's blocks nor one int8 group")
    return group.linear.kernel
