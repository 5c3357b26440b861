"""Decode steps of a quantized Llama-style model in C++: four kernel calls per layer (csrc/decode_layer.cpp).

On a 2-core CPU a decode step of the embedded model at n=1 spent about half its 30 ms outside the weights: some
forty ATen ops per layer (norms, rotary embedding, the attention's calls and merges, SiLU·mul, residual adds)
and the transformers modules' Python around them. Here a layer is:
    qkv = RMSNorm(h) · Wqkvᵀ                     norm_linear
    a   = attention(rotary(q, k), v)             decode_attention: this step's k, v stored in the cohort buffers,
                                                 each query over its prompt and its own tokens in one softmax
    h  += a · Woᵀ                                linear_add
    h  += (SiLU(gate) · up)(RMSNorm(h)) · Wdᵀ    norm_swiglu, linear_add
with transformers' own embedding and rotary tables. Each step is per row in a fixed order, so a row's numbers do
not depend on its neighbours (the seed contract). The linear layers are what quantize made them (csrc/linear.h):
a GGUF's blocks where a layer has them (quantize="gguf", the float32 model's arithmetic up to the order of sums),
else two-level int8, as Int8Linear computes it. It runs on AVX-512 CPUs for quantized (int8 or gguf) models of
plain causal attention (the shared-prefix layout); elsewhere the runner calls the model as before.
"""
from dataclasses import dataclass

import torch
from torch import nn

from nsample import kernels
from nsample.int8_linear import Int8Linear, Member
from nsample.prefix_attention import Group
from nsample.quantize import cpu_flags

FAMILIES = {"llama", "mistral", "qwen2"}  # decoder layers exactly transformers' LlamaDecoderLayer
SILU = {"SiLU", "SiLUActivation"}  # torch's and transformers' x·sigmoid(x)


@dataclass
class Layer:
    eps: float
    norm1: torch.Tensor  # (E,) input_layernorm
    qkv: object  # the kernels' Linear (csrc/linear.h) of each projection
    o: object
    norm2: torch.Tensor  # (E,) post_attention_layernorm
    gate_up: object
    down: object


class FusedDecoder:
    def __init__(self, model, ops, layers: list[Layer], head):
        cfg = model.config.get_text_config(decoder=True)
        attn = model.model.layers[0].self_attn
        self.ops, self.layers, self.head = ops, layers, head
        self.embed, self.rotary, self.norm = model.model.embed_tokens, model.model.rotary_emb, model.model.norm
        self.heads, self.kv_heads, self.scale = cfg.num_attention_heads, cfg.num_key_value_heads, attn.scaling

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, groups: list[Group]) -> torch.Tensor:
        """Next-token logits (B, V) for one token per row, ids and positions (B, 1), rows grouped by cohort."""
        h = self.embed(ids[:, 0]).float().contiguous()  # (B, E)
        cos, sin = (x[:, 0].float().contiguous() for x in self.rotary(h, positions))  # (B, D) each
        own = [v for g in groups for v in (g.start, g.cohort.length)]
        segments = [v for g in groups for s in g.segments for v in (g.start + s.start, g.start + s.stop)]
        prompts = [s.kv.prefix for g in groups for s in g.segments]
        ops = self.ops
        for i, L in enumerate(self.layers):
            qkv = ops.norm_linear(h, L.norm1, L.eps, L.qkv)  # (B, (H + 2·Hkv)·D)
            a = ops.decode_attention(qkv, cos, sin, self.heads, self.kv_heads, self.scale, own,
                                     [g.cohort.keys[i] for g in groups], [g.cohort.values[i] for g in groups],
                                     segments, [p[i][0] for p in prompts], [p[i][1] for p in prompts])  # (B, H·D)
            ops.linear_add(a, L.o, h)
            ops.linear_add(ops.norm_swiglu(h, L.norm2, L.eps, L.gate_up), L.down, h)
        return ops.norm_linear(h, self.norm.weight, self.norm.variance_epsilon, self.head)  # (B, V)


def build(model) -> FusedDecoder | None:
    """The fused decoder of `model`, or None where it does not apply (then the model's own forward runs)."""
    cfg = model.config.get_text_config(decoder=True)
    quantized = any(type(m) is Int8Linear for m in model.modules())  # else the kernels are not even built
    if not quantized or "avx512f" not in cpu_flags() or cfg.model_type not in FAMILIES or model.dtype != torch.float32:
        return None
    ops = kernels.ops()
    if ops is None:
        return None
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    if head_dim % 16 or cfg.hidden_size % 32 or getattr(cfg, "hidden_act", "silu") != "silu":
        return None
    try:
        layers = [_layer(layer) for layer in model.model.layers]
        head = _linear(model.get_output_embeddings())
    except (AttributeError, ValueError):
        return None
    return FusedDecoder(model, ops, layers, head)


def _layer(layer: nn.Module) -> Layer:
    attn, mlp = layer.self_attn, layer.mlp
    qkv, gate_up = _group(attn.q_proj, ("q_proj", "k_proj", "v_proj")), _group(mlp.gate_proj, ("gate_proj", "up_proj"))
    siblings = attn.k_proj.group[0], attn.v_proj.group[0], mlp.up_proj.group[0]
    if type(mlp.act_fn).__name__ not in SILU or siblings != (qkv, qkv, gate_up):
        raise ValueError("not a plain SiLU MLP with shared q/k/v")
    norms = layer.input_layernorm, layer.post_attention_layernorm
    if norms[0].variance_epsilon != norms[1].variance_epsilon:
        raise ValueError("two epsilons")
    return Layer(norms[0].variance_epsilon, norms[0].weight.float(), _linear(qkv.linear),
                 _linear(attn.o_proj), norms[1].weight.float(), _linear(gate_up.linear),
                 _linear(mlp.down_proj))


def _group(member: nn.Module, names: tuple[str, ...]):
    if type(member) is not Member or member.index != 0 or len(member.group[0].sizes) != len(names):
        raise ValueError("projections not grouped")
    return member.group[0]


def _linear(linear: nn.Module):
    """The kernels' Linear an Int8Linear decodes on: its GGUF blocks where it has them, else its int8."""
    if type(linear) is not Int8Linear or linear.decode_kernel is None:
        raise ValueError("not quantized with the kernels")
    return linear.decode_kernel
