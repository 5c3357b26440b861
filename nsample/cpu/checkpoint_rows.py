"""A hub model's or folder's weights as its checkpoint stores them (bf16, f16 or f32 rows), in nsample's C++ kernels.

transformers loads such a model as float32 modules on the CPU: 4 bytes a weight, and each decode step a chain of
torch operators (SmolLM2-135M here: 14 tokens/s for one choice, 73 for eight). The GGUF kernels read plain F32, F16
and BF16 rows as well as blocks (csrc/gguf_formats.h), expanded in registers to exactly their float32 values, so
each projection becomes a GGUFLinear on its own weight's bytes in the narrowest of bf16, f16 and f32 that holds
every value exactly (a bf16 checkpoint's weights, upcast by transformers, go back to bf16 bit for bit), the input
embedding a GGUFEmbedding (a tied LM head reads its rows), a mixture of experts' router a GGUFRouter and its experts
(Qwen 2 and 3 MoE's, Mixtral's fused 3-D parameters) a GGUFExperts on their rows, norms and the rest float32; and the
model decodes in the fused C++ layers (fused_decode.py), as a GGUF file's does. A partial rotary embedding
(Phi-4-mini's) is made one of whole heads, its q/k rows put in whole_head_rotary's order, as a GGUF file's are. The
numbers are the float32 model's up to the order of sums: no weight is rounded.
"""
import torch
from torch import nn

from nsample.cpu import gguf_experts, whole_head_rotary
from nsample.cpu.gguf_experts import GGUFExperts
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear, embedding_scale, readable

ROW_TYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 30}  # ggml's F32, F16, BF16
LOADED_AS = "nsample_loaded_as"  # the model attribute that says its weights are rows ("rows"; gguf_model: blocks)
QK = ("q_proj", "k_proj", "qkv_proj")  # the projections a partial rotary's turn reorders (Phi 3's joined q|k|v)
FUSED_EXPERTS = {"Qwen2MoeExperts", "Qwen3MoeExperts", "MixtralExperts"}  # gate_up_proj (E, 2F, H), gate's rows
# first, and down_proj (E, H, F); gpt-oss's (transposed, gate and up interleaved, biased) stay float32


def exact_rows(w: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(w's rows as bytes (N, row bytes), their ggml type): w itself where it is bf16 or f16, else the first of bf16
    and f16 that holds every value of it exactly (the same bits back in float32), else float32."""
    if w.dtype not in ROW_TYPES:
        raise ValueError(f"a weight of {w.dtype} has no row type the kernels read")
    if w.dtype == torch.float32:
        for narrow in (torch.bfloat16, torch.float16):
            n = w.to(narrow)
            if torch.equal(n.float(), w):  # NaN never compares equal: such a weight stays float32
                w = n
                break
    w = w.detach().contiguous()
    return w.view(torch.uint8).view(len(w), -1), ROW_TYPES[w.dtype]


def to_rows(model: nn.Module) -> nn.Module:
    """Swap `model`'s linear layers (K a multiple of 32) and its plain or Gemma-scaled input embedding, in place,
    for the kernels' layers on their exact rows (a tied LM head on the embedding's); the rest becomes float32."""
    head = model.get_output_embeddings()
    embed = model.get_input_embeddings()
    tied = type(head) is nn.Linear and head.weight is getattr(embed, "weight", None)
    scale = embedding_scale(embed)
    if scale is not False and readable(0, embed.embedding_dim):
        raw, type_id = exact_rows(embed.weight)
        model.set_input_embeddings(GGUFEmbedding(raw, type_id, embed.embedding_dim, scale))
        if tied:  # the same bytes, through a view of its own (as a GGUF's tied head: counted once, as a head)
            model.set_output_embeddings(GGUFLinear(raw.view(raw.shape), type_id, head.in_features, _bias(head)))
    cfg = model.config.get_text_config(decoder=True)
    turned = whole_head_rotary.turnable(cfg, any(  # Phi-4-mini's partial rotary
        type(m) is nn.Linear and m.bias is not None and n.endswith(QK) for n, m in model.named_modules()))
    for parent in list(model.modules()):
        for name, m in list(parent.named_children()):
            if type(m) is nn.Linear and readable(0, m.in_features):
                raw, type_id = exact_rows(m.weight)
                if turned and name in QK:  # a copy, in whole heads' order
                    raw = raw[whole_head_rotary.qk_rows(cfg.num_attention_heads, cfg.num_key_value_heads, *turned,
                                                        len(raw))]
                setattr(parent, name, GGUFLinear(raw, type_id, m.in_features, _bias(m)))
            elif gguf_experts.is_router(m) and getattr(m, "bias", None) is None and readable(0, m.weight.shape[1]):
                setattr(parent, name, gguf_experts.router_of(m, GGUFLinear(*exact_rows(m.weight), m.weight.shape[1])))
            elif type(m).__name__ in FUSED_EXPERTS and readable(0, m.hidden_dim) and readable(0, m.intermediate_dim):
                setattr(parent, name, _experts(m))
    if turned:
        whole_head_rotary.install(model)
    if isinstance(head := model.get_output_embeddings(), GGUFLinear):
        head.head = True
    model.float()  # norms, biases, buffers: what is left
    setattr(model, LOADED_AS, "rows")
    return model


def _bias(m: nn.Linear) -> torch.Tensor | None:
    return None if m.bias is None else m.bias.detach().float()


def _experts(m: nn.Module) -> GGUFExperts:
    """A fused experts module's projections on their rows (E, rows, row bytes); gate and up the halves of gate|up."""
    E, H, F = m.num_experts, m.hidden_dim, m.intermediate_dim
    gate_up, gt = exact_rows(m.gate_up_proj.reshape(E * 2 * F, H))
    down, dt = exact_rows(m.down_proj.reshape(E * H, F))
    gate, up = gate_up.view(E, 2 * F, -1).chunk(2, dim=1)  # views: each expert's rows stay contiguous
    return GGUFExperts({"gate": (gate, gt, H), "up": (up, gt, H), "down": (down.view(E, H, -1), dt, F)}, E, m.act_fn)

