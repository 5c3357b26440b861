"""A hub model's or folder's weights as its checkpoint stores them (bf16, f16 or f32 rows), in nsample's C++ kernels.

transformers loads such a model as float32 modules on the CPU: 4 bytes a weight, and each decode step a chain of
torch operators (SmolLM2-135M here: 14 tokens/s for one choice, 73 for eight). The GGUF kernels read plain F32, F16
and BF16 rows as well as blocks (csrc/gguf_formats.h), expanded in registers to exactly their float32 values, so
each projection becomes a GGUFLinear on its own weight's bytes in the narrowest of bf16, f16 and f32 that holds
every value exactly (a bf16 checkpoint's weights, upcast by transformers, go back to bf16 bit for bit), the input
embedding a GGUFEmbedding (a tied LM head reads its rows), norms and the rest float32; and the model decodes in the
fused C++ layers (fused_decode.py), as a GGUF file's does. The numbers are the float32 model's up to the order of
sums: no weight is rounded.
"""
import torch
from torch import nn

from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear, embedding_scale, readable

ROW_TYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 30}  # ggml's F32, F16, BF16
LOADED_AS = "nsample_loaded_as"  # the model attribute that says its weights are rows ("rows"; gguf_model: blocks)


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
    for parent in list(model.modules()):
        for name, m in list(parent.named_children()):
            if type(m) is nn.Linear and readable(0, m.in_features):
                setattr(parent, name, GGUFLinear(*exact_rows(m.weight), m.in_features, _bias(m)))
    if isinstance(head := model.get_output_embeddings(), GGUFLinear):
        head.head = True
    model.float()  # norms, biases, buffers: what is left
    setattr(model, LOADED_AS, "rows")
    return model


def _bias(m: nn.Linear) -> torch.Tensor | None:
    return None if m.bias is None else m.bias.detach().float()

