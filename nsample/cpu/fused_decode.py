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
Gemma 2 and 3 and OLMo 2 and 3 norm each branch's output before its residual add (linear_norm_add); Gemma's MLP is
GELU's (norm_geglu), OLMo 2's layers read the residual without a norm first and norm q and k over all heads; the
sliding-window layers of Gemma 2 and 3 and OLMo 3 attend to the window's positions alone (Gemma 3's on their own rotary
table); Gemma 2 soft-caps its attention scores (decode_attention's `softcap`) and its logits (soft_cap_); gpt-oss has a
sink per head beside its scores (decode_attention's `sinks`), a bias on every projection, experts in place of the MLP.
With transformers' own embedding and rotary tables. Each step is per row in a fixed order, so a row's numbers do
not depend on its neighbours (the seed contract). The linear layers are what the model holds (csrc/linear.h):
a GGUF file's blocks (quantize="gguf", gguf_linear.py: the float32 model's arithmetic up to the order of sums, or
on int8 activations; q/k/v, and gate/up, as one layer of parts, each in its own format), or two-level int8, as
Int8Linear computes it.
It runs wherever the kernels run (AVX2, AVX-512, NEON: kernels.py) for quantized models of the shared-prefix layout
(causal attention, plain or in a sliding window: decode_attention's `window`); elsewhere the runner calls the model as
before.

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

from nsample.cpu import fused_experts, kernels
from nsample.cpu.fused_experts import SILU, Moe
from nsample.cpu.gguf_linear import GGUFLinear
from nsample.cpu.int8_linear import Int8Linear, Member
from nsample.cpu.whole_head_rotary import WholeHeadRotary
from nsample.engine.prefix_attention import Chunk, Group

FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mixtral", "phi3", "smollm3", "granite",
            "gemma2", "gemma3_text", "olmo2", "olmo3", "gpt_oss"}  # LlamaDecoderLayer's, Qwen 3's with q/k RMSNorms per
# head, Qwen 2 and 3 MoE's, Mixtral's and gpt-oss's with experts in place of the MLP on a GGUF file's blocks
# (fused_experts.py; gpt-oss's attention with a sink per head and biases, its rotary tables half a head wide), Phi 3's
# with q|k|v and gate|up each one projection (qkv_proj, gate_up_proj), SmolLM3's with no rotary embedding on every
# fourth layer (cos 1 and sin 0 there: the kernels' rotation leaves q and k as they are), Granite's with its
# multipliers (embeddings, residual branches, logits), Gemma 2 and 3's and OLMo 2 and 3's with norms after the
# attention and MLP (Gemma 2's scores and logits soft-capped)
GELU_TANH = {"GELUTanh", "PytorchGELUTanh"}  # transformers' gelu_pytorch_tanh (Gemma's)
GEMMA_NORMS = {"Gemma2RMSNorm", "Gemma3RMSNorm"}  # x / rms(x) · (1 + w): the kernels' norm multiplies by 1 + w
SHORT_PROMPT = 16  # prompts of at most this many tokens prefill here too (`prefill`), on the decode kernels


@dataclass
class Layer:
    eps: float
    norm1: torch.Tensor | None  # (E,) input_layernorm as the kernels multiply (Gemma's 1 + w); None: OLMo 2's none
    qkv: object  # the kernels' Linear (csrc/linear.h) of each projection
    o: object
    norm2: torch.Tensor | None  # (E,) the MLP's: post_attention_layernorm (Llama's), pre_feedforward_layernorm
    gate_up: object  # None where the layer has experts (moe)
    down: object
    qk_norms: tuple[nn.Module, nn.Module] | None = None  # Qwen 3, Gemma 3: RMSNorm of each q and k head before the
    # rotary (OLMo 2: of all q and of all k)
    moe: "Moe | None" = None
    rope: str = "model"  # the rotary table: the model's; "none" (SmolLM3's layers without); a layer type (Gemma 3's)
    window: int = 0  # a sliding window's positions (0: none)
    post_norms: tuple[torch.Tensor, torch.Tensor] | None = None  # Gemma's and OLMo 2's after the attention, the MLP
    gelu: bool = False  # the MLP's activation GELU's tanh form, else SiLU
    residual: float = 1.0  # what each branch's output is multiplied by before its residual add (Granite's)
    sinks: torch.Tensor | None = None  # (H,) gpt-oss's sink per head, beside each softmax's scores


class FusedDecoder:
    def __init__(self, model, ops, layers: list[Layer], prefill_layers: list[Layer], head):
        cfg = model.config.get_text_config(decoder=True)
        attn = model.model.layers[0].self_attn
        self.ops, self.layers, self.prefill_layers, self.head = ops, layers, prefill_layers, head
        self.embed, self.rotary = model.model.embed_tokens, model.model.rotary_emb
        self.norm, self.norm_eps = _norm(model.model.norm)
        self.heads, self.kv_heads, self.scale = cfg.num_attention_heads, cfg.num_key_value_heads, attn.scaling
        self.softcap = getattr(cfg, "attn_logit_softcapping", None) or 0.0  # Gemma 2's caps: its scores' (0: none)
        self.final_softcap = getattr(cfg, "final_logit_softcapping", None)
        self.embedding_multiplier = getattr(cfg, "embedding_multiplier", None)  # Granite's, and its logits' divisor
        self.logits_scaling = getattr(cfg, "logits_scaling", None)
        self.head_dim = attn.head_dim
        self.tables = {L.rope for L in layers}  # which rotary tables a step makes

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, positions: torch.Tensor, groups: list[Group]) -> torch.Tensor:
        """Next-token logits (B, V) for one token per row, ids and positions (B, 1), rows grouped by cohort."""
        h = self._embed(ids[:, 0])  # (B, E)
        tables = self._tables(h, positions, lambda x: x[:, 0])  # (B, D) each
        own = [v for g in groups for v in (g.start, g.cohort.length)]
        segments = [v for g in groups for s in g.segments for v in (g.start + s.start, g.start + s.stop)]
        prompts = [s.kv.prefix for g in groups for s in g.segments]
        return self._forward(h, self.layers, lambda i, qkv: self.ops.decode_attention(
            qkv, *tables[self.layers[i].rope], self.heads, self.kv_heads, self.scale, own,
            [g.cohort.keys[i] for g in groups], [g.cohort.values[i] for g in groups], segments,
            [p[i][0] for p in prompts], [p[i][1] for p in prompts], self.layers[i].window, self.softcap,
            self.layers[i].sinks))

    @torch.inference_mode()
    def prefill(self, ids: torch.Tensor, positions: torch.Tensor, chunks: list[Chunk], keep: list[int]
                ) -> torch.Tensor:
        """Prefill short prompts' chunks packed into one sequence, ids and positions (T,), each chunk's keys and
        values stored in its request's SharedKV; the logits (len(keep), V) of the rows `keep`."""
        h = self._embed(ids)  # (T, E)
        tables = self._tables(h, positions[None], lambda x: x[0])  # (T, D) each
        spans = [v for c in chunks for v in (c.start, c.stop, c.first)]
        return self._forward(h, self.prefill_layers, lambda i, qkv: self.ops.prefill_attention(
            qkv, *tables[self.prefill_layers[i].rope], self.heads, self.kv_heads, self.scale, spans,
            [c.kv.buffers[i][0] for c in chunks], [c.kv.buffers[i][1] for c in chunks],
            self.prefill_layers[i].window, self.softcap, self.prefill_layers[i].sinks), keep)

    def _forward(self, h: torch.Tensor, layers: list[Layer], attention, keep: list[int] | None = None
                 ) -> torch.Tensor:
        """The layers on h (M, E), in place, `attention(i, qkv)` (M, H·D) layer i's; the logits (M or len(keep), V)."""
        ops = self.ops
        for i, L in enumerate(layers):
            qkv = L.qkv(h) if L.norm1 is None else ops.norm_linear(h, L.norm1, L.eps, L.qkv)  # (M, (H + 2·Hkv)·D)
            if L.qk_norms is not None:
                self._norm_qk(qkv, *L.qk_norms)
            if L.post_norms is None:
                ops.linear_add(attention(i, qkv), L.o, h, L.residual)
            else:
                ops.linear_norm_add(attention(i, qkv), L.o, L.post_norms[0], L.eps, h)
            if L.moe is not None:
                h += L.moe(h)
                continue
            act = (ops.norm_geglu if L.gelu else ops.norm_swiglu)(h, L.norm2, L.eps, L.gate_up)  # (M, I)
            if L.post_norms is None:
                ops.linear_add(act, L.down, h, L.residual)
            else:
                ops.linear_norm_add(act, L.down, L.post_norms[1], L.eps, h)
        h = h if keep is None else h[keep].contiguous()
        logits = ops.norm_linear(h, self.norm, self.norm_eps, self.head)  # (M, V)
        if self.final_softcap:
            ops.soft_cap_(logits, self.final_softcap)
        return logits if self.logits_scaling is None else logits.div_(self.logits_scaling)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows (M, E) of ids (M,): the model's embedding, times Granite's multiplier as its forward has it."""
        h = self.embed(ids)
        return (h if self.embedding_multiplier is None else h * self.embedding_multiplier).float().contiguous()

    def _tables(self, h: torch.Tensor, positions: torch.Tensor, rows) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """The rotary tables (cos, sin) the layers use, `rows` of each: the model's, each layer type's (Gemma 3's),
        or none's (cos 1, sin 0: SmolLM3's layers without)."""
        tables = {}
        for key in self.tables - {"none"}:
            turned = self.rotary(h, positions) if key == "model" else self.rotary(h, positions, key)
            turned = (torch.cat([x, x], -1) if x.shape[-1] < self.head_dim else x for x in turned)  # gpt-oss's: half
            tables[key] = tuple(rows(x).float().contiguous() for x in turned)
        if "none" in self.tables:
            cos = next(iter(tables.values()))[0] if tables else rows(self.rotary(h, positions)[0]).float()
            tables["none"] = (torch.ones_like(cos), torch.zeros_like(cos))
        return tables

    def _norm_qk(self, qkv: torch.Tensor, q_norm: nn.Module, k_norm: nn.Module) -> None:
        """The q_norm and k_norm, the model's own modules, on the q and k of qkv (M, (H + 2·Hkv)·D), in place: of each
        head (Qwen 3's, Gemma 3's), a head's numbers its own, as in the model's forward on (B, T, H, D); or of all
        heads at once (OLMo 2's)."""
        M, D = len(qkv), self.head_dim
        q, k = qkv[:, :self.heads * D], qkv[:, self.heads * D:(self.heads + self.kv_heads) * D]
        if q_norm.weight.numel() == D:
            q.copy_(q_norm(q.view(M, self.heads, D)).view(M, -1))
            k.copy_(k_norm(k.view(M, self.kv_heads, D)).view(M, -1))
        else:
            q.copy_(q_norm(q))
            k.copy_(k_norm(k))


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
    if head_dim % 16 or cfg.hidden_size % 32:
        return None
    rotary = model.model.rotary_emb
    if (cfg.rope_parameters.get("partial_rotary_factor", 1.0) != 1.0  # the kernels turn whole heads: Phi-4-mini's
            and not isinstance(rotary, WholeHeadRotary)):  # partial one must be made so at load
        return None
    types = cfg.layer_types if hasattr(rotary, "layer_types") else [None] * cfg.num_hidden_layers  # a table each
    try:
        layers = [_layer(layer, ops, kind) for layer, kind in zip(model.model.layers, types)]
        int8 = any(m.int8_activations for m in model.modules() if type(m) is GGUFLinear)
        prefill_layers = [_layer(layer, ops, kind, prefill=True) for layer, kind in zip(model.model.layers, types)
                          ] if int8 else layers
        head = _joined(ops, [model.get_output_embeddings()])
    except (AttributeError, ValueError):
        return None
    return FusedDecoder(model, ops, layers, prefill_layers, head)


def _layer(layer: nn.Module, ops, layer_type: str | None, prefill: bool = False) -> Layer:
    """A decoder layer as the kernels run it; `layer_type` names its rotary table where the model has one per type."""
    attn, mlp = layer.self_attn, layer.mlp
    moe = fused_experts.build(layer, ops, prefill, _joined) if hasattr(mlp, "experts") else None
    post = (layer.post_attention_layernorm, layer.post_feedforward_layernorm) if hasattr(
        layer, "post_feedforward_layernorm") else None  # Gemma's, OLMo 2's: a norm on each branch's output
    pre = ((getattr(layer, "input_layernorm", None), getattr(layer, "pre_feedforward_layernorm", None)) if post else
           (layer.input_layernorm, layer.post_attention_layernorm))  # OLMo 2: none
    act = type(getattr(mlp, "act_fn", None) or getattr(mlp, "activation_fn", None)).__name__
    if moe is None and not (act in SILU or act in GELU_TANH and post):
        raise ValueError("an MLP of another activation")
    norms = [_norm(m) if m is not None else (None, None) for m in (*pre, *(post or ()))]
    if len({eps for w, eps in norms if w is not None}) != 1:
        raise ValueError("two epsilons")
    eps = next(eps for w, eps in norms if w is not None)
    qk_norms = (attn.q_norm, attn.k_norm) if hasattr(attn, "q_norm") else None
    mlp_parts = (None, None)
    if moe is None:
        gate_up = [mlp.gate_up_proj] if hasattr(mlp, "gate_up_proj") else [mlp.gate_proj, mlp.up_proj]  # Phi 3: one
        mlp_parts = (_joined(ops, gate_up, prefill), _joined(ops, [mlp.down_proj], prefill))
    qkv = [attn.qkv_proj] if hasattr(attn, "qkv_proj") else [attn.q_proj, attn.k_proj, attn.v_proj]
    rope = (layer_type or "model") if getattr(attn, "use_rope", True) else "none"
    window = attn.sliding_window if hasattr(attn, "sliding_window") else getattr(attn.config, "sliding_window", None)
    # (as the module passes it to the attention: its own, Gemma 3's and Qwen's per layer, or its config's, Mistral's)
    sinks = attn.sinks.detach().float().contiguous() if hasattr(attn, "sinks") else None  # gpt-oss's
    return Layer(eps, norms[0][0], _joined(ops, qkv, prefill), _joined(ops, [attn.o_proj], prefill), norms[1][0],
                 *mlp_parts, qk_norms, moe, rope, window or 0,
                 (norms[2][0], norms[3][0]) if post else None, act in GELU_TANH,
                 getattr(layer, "residual_multiplier", 1.0), sinks)


def _norm(module: nn.Module) -> tuple[torch.Tensor, float]:
    """(weight as the kernels' RMSNorm multiplies by it, epsilon) of an RMSNorm module: Llama's w, Gemma's 1 + w."""
    if type(module).__name__ in GEMMA_NORMS:
        return 1 + module.weight.float(), module.eps
    if not hasattr(module, "variance_epsilon"):
        raise ValueError(f"a norm of another kind: {type(module).__name__}")
    return module.weight.float(), module.variance_epsilon


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
