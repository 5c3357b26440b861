"""Layers on a GGUF file's own quantized tensors, read as the file holds them (memory-mapped, never dequantized whole).

A projection keeps its weight as the file's blocks (N, row bytes) in one of llama.cpp's formats (Q4_0, Q4_1, Q5_0, Q5_1,
Q8_0, the K-quants Q2_K to Q6_K, the IQ formats IQ1_S to IQ4_XS, MXFP4, or plain F32/F16/BF16 rows:
csrc/gguf_formats.h).
Decode steps sum on the blocks, expanded in registers to exactly the float32 weights transformers would dequantize them
to, each row on its own in a fixed order (csrc/gguf_linear.cpp), so a row's numbers never depend on its batch. Prefill
expands a tile of weight rows at a time into an MKL GEMM (csrc/gguf_expand.cpp), so no float32 copy of a layer ever
exists. Which of the two runs is chosen by phase (`decoding()`, set by the runner around decode forwards), never by
batch size; but for the LM head by request too (`head_rows_decoded`): a prefill's one kept row per request, the one a
first token is drawn from, runs on the decode kernel, as every later token's logits do, at one row's cost (a 49152x576
Q8_0 head, 2 threads: 1.6 ms against 12 for the GEMM's 32-row tile); prompt-logprob rows, many per request, stay on the
GEMM. The embedding expands the rows it is asked for; a tied LM head reads the embedding's blocks.

With int8 activations (`use_int8_activations`; EngineConfig.decode_activations) each activation row is rounded to
int8 in blocks of 32 (256 for the K-quants) and multiplied by integer dot products on the blocks
(csrc/q8_linear.cpp), as llama.cpp does: several times fewer instructions per weight, at the cost of the
activations' rounding. The LM head (`head`) runs its prefill rows, the ones a first token is drawn from, on that
kernel too, so every drawn token's logits come from one kind of kernel; and it is the faster there (2 threads, a
1.1B model's 49152-row Q6_K head at a prompt's one last row: 11 ms against the GEMM's 96). The other layers' prefill
stays float32 (the prompt's KV as the float32 model's): on the q8 kernel too it was as fast or faster (Q4_K
5632x2048 at 16 rows: 4.1 against 9.9 ms), but greedy output moved further from float32 than llama.cpp's does
(scripts/quality.py: 1 of 20 continuations identical instead of 6, mean |Δ logprob| 0.069 instead of 0.054;
llama.cpp 2 of 20, 0.032). x86 with AVX2 only; F16, BF16, F32 and the IQ tensors below 4 bits keep float32 (IQ4_NL,
IQ4_XS and MXFP4 have the kernels: their tables' levels are signed bytes, as Q8_0's values).
"""
import contextlib
import threading

import torch
from torch import nn

from nsample.cpu import kernels

TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K",
              12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
              20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 29: "IQ1_M", 30: "BF16",
              39: "MXFP4"}  # what the kernels read
BLOCK_WEIGHTS = {t: 32 if name in ("F32", "F16", "BF16", "IQ4_NL", "MXFP4")
                 or name.startswith("Q") and not name.endswith("_K") else 256
                 for t, name in TYPE_NAMES.items()}  # F32, F16, BF16: read 32 at a time
_phase = threading.local()


@contextlib.contextmanager
def decoding():
    """Inside: this thread's forwards are decode steps, which run on the decode kernels (nestable)."""
    before, _phase.decoding = in_decode(), True
    try:
        yield
    finally:
        _phase.decoding = before


def in_decode() -> bool:
    return getattr(_phase, "decoding", False)


@contextlib.contextmanager
def head_rows_decoded(rows: int):
    """Inside: this thread's prefill forwards run the LM head's first `rows` rows on the decode kernel (the runner
    puts there each request's one kept row, where it keeps only its last position's logits), the rest on the GEMM."""
    before, _phase.head_rows = head_rows(), rows
    try:
        yield
    finally:
        _phase.head_rows = before


def head_rows() -> int:
    """The LM head rows this thread's prefill forwards run on the decode kernel (head_rows_decoded), else 0."""
    return getattr(_phase, "head_rows", 0)


def readable(type_id: int, in_features: int) -> bool:
    """Whether the kernels read a (N, in_features) tensor of this ggml type as it is."""
    return type_id in BLOCK_WEIGHTS and in_features % BLOCK_WEIGHTS[type_id] == 0 and in_features % 32 == 0


class GGUFLinear(nn.Module):
    """y = x·Wᵀ + b with W a GGUF tensor's blocks (N, row bytes) of ggml type `type_id`."""

    def __init__(self, blocks: torch.Tensor, type_id: int, in_features: int, bias: torch.Tensor | None = None):
        super().__init__()
        assert readable(type_id, in_features), (type_id, in_features)
        # Plain attributes, none a parameter, buffer or module, set as nn.Module's __setattr__ would set them, without
        # its checks: a Qwen3-30B-A3B file has 18432 of these layers (its experts'). One took 45 us here, 24 without
        # the checks (in-process A/B); a layer of 128 experts 31 ms, 15 (48 such layers: 1.5 s of load, 0.7).
        self.__dict__.update(
            blocks=blocks, type_id=type_id,  # the blocks: never copied or cast
            out_features=len(blocks), in_features=in_features,
            weight=torch.empty((len(blocks), in_features), device="meta"),  # shape only, for transformers
            ops=kernels.ops(),
            int8_activations=False,  # decode on int8 activations (use_int8_activations)
            head=False)  # the LM head: with int8 activations, its prefill rows too
        self.bias = None if bias is None else nn.Parameter(bias.float(), requires_grad=False)

    @property
    def format(self) -> str:
        return TYPE_NAMES[self.type_id]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features).float().contiguous()  # (M, K)
        rows = head_rows() if self.head and not in_decode() else 0
        if self.int8_activations and (self.head or in_decode()):
            y = self.ops.gguf_decode_q8_linear(x2, self.blocks, self.type_id, self.bias)  # (M, N)
        elif in_decode() or rows >= len(x2):
            y = self.ops.gguf_decode_linear(x2, self.blocks, self.type_id, self.bias)
        elif rows:
            y = torch.cat([self.ops.gguf_decode_linear(x2[:rows], self.blocks, self.type_id, self.bias),
                           self.ops.gguf_prefill_linear(x2[rows:], self.blocks, self.type_id, self.bias)])
        else:
            y = self.ops.gguf_prefill_linear(x2, self.blocks, self.type_id, self.bias)
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def dequantize(self) -> torch.Tensor:
        """The float32 weight (N, K), as transformers dequantizes it (for tests and references)."""
        return self.ops.gguf_dequantize(self.blocks, self.type_id, self.in_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, format={self.format}"


def int8_activations(mode: str) -> bool:
    """Whether EngineConfig.decode_activations `mode` (float32 or int8) decodes a GGUF's blocks on int8 activations;
    int8 where this machine's kernels have none (they need x86 with AVX2, or ARM64) is an error, not a silent
    float32."""
    if mode not in ("float32", "int8"):
        raise ValueError(f"decode_activations must be float32 or int8; got {mode!r}")
    ops = kernels.ops()
    if mode == "int8" and (ops is None or not ops.q8_available()):
        raise ValueError("decode_activations='int8' needs nsample's kernels (an x86 CPU with AVX2, or ARM64); use "
                         "'float32'")
    return mode == "int8"


def use_int8_activations(model: nn.Module, on: bool) -> list[str]:
    """Decode `model`'s GGUF layers on int8 activations (on) or float32 ones; returns the formats left on float32
    (those with no int8 kernel: F32, F16, BF16 and the IQ formats below 4 bits)."""
    left = set()
    for m in model.modules():
        if isinstance(m, GGUFLinear):
            m.int8_activations = on and m.ops.q8_readable(m.type_id)
            if on and not m.int8_activations:
                left.add(m.format)
    return sorted(left)


def embedding_scale(module: nn.Module) -> float | None | bool:
    """How GGUFEmbedding stands in for `module`: None for a plain embedding, the factor of one that scales its rows
    (Gemma's `scalar_embed_scale`), False for any other kind (which it cannot)."""
    if type(module) is nn.Embedding:
        return None
    scale = getattr(module, "scalar_embed_scale", None)
    return scale if isinstance(scale, float) and "embed_scale" in dict(module.named_buffers()) else False


class GGUFEmbedding(nn.Module):
    """An embedding on a GGUF tensor's blocks: each looked-up row expanded to float32 when asked for, and multiplied
    by `scale` where the model's embedding scales its rows (Gemma's, by sqrt(hidden), as a float32 tensor)."""

    def __init__(self, blocks: torch.Tensor, type_id: int, dim: int, scale: float | None = None):
        super().__init__()
        assert readable(type_id, dim), (type_id, dim)
        self.blocks, self.type_id, self.dim = blocks, type_id, dim
        self.num_embeddings = len(blocks)
        self.weight = torch.empty((self.num_embeddings, dim), device="meta")
        self.scale = None if scale is None else torch.tensor(scale, dtype=torch.float32)
        self.ops = kernels.ops()

    @property
    def format(self) -> str:
        return TYPE_NAMES[self.type_id]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.ops.gguf_rows(self.blocks, self.type_id, self.dim, ids.contiguous())  # (*ids.shape, dim)
        return rows if self.scale is None else rows * self.scale

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dim}, format={self.format}" + (
            "" if self.scale is None else f", scale={self.scale.item():g}")
