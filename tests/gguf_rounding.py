"""Weights rounded to a GGUF's blocks as llama.cpp makes them, for tests of the decode path on blocks (gguf)."""
import pytest
import torch

from nsample import kernels
from nsample.quantize import resolve_quantize

HAS_GGUF = resolve_quantize("auto", "cpu") == "gguf" and kernels.ops() is not None
needs_gguf = pytest.mark.skipif(not HAS_GGUF, reason="no AVX-512 and int8 GEMM on this CPU, or no C++ toolchain")


def q4_1(w: torch.Tensor) -> torch.Tensor:
    """w rounded to Q4_1 blocks as llama.cpp makes them (per 32 along K: float16 m = min, d = (max - min)/15)."""
    blocks = w.view(len(w), -1, 32)
    m = blocks.amin(-1, keepdim=True).half().float()
    d = ((blocks.amax(-1, keepdim=True) - m) / 15).half().float()
    q = ((blocks - m) / d.clamp_min(torch.finfo(torch.float32).tiny)).round().clamp(0, 15)  # d = 0: all q = 0
    q.scatter_(-1, blocks.argmax(-1, keepdim=True), 15.0)  # the maximum is q = 15, the minimum q = 0
    q.scatter_(-1, blocks.argmin(-1, keepdim=True), 0.0)
    return torch.addcmul(m, q, d).view_as(w)


def q8_0(w: torch.Tensor) -> torch.Tensor:
    """w rounded to Q8_0 blocks as llama.cpp makes them (per 32 along K: float16 d = max |w| / 127)."""
    blocks = w.view(len(w), -1, 32)
    d = (blocks.abs().amax(-1, keepdim=True) / 127).half().float()
    return ((blocks / d.clamp_min(torch.finfo(torch.float32).tiny)).round().clamp(-127, 127) * d).view_as(w)


@torch.no_grad()
def round_to_q4_1(model: torch.nn.Module) -> torch.nn.Module:
    """Every linear layer's weight (the tied LM head's too) rounded to Q4_1 blocks, in place."""
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.weight.copy_(q4_1(m.weight))
    return model
