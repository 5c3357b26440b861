"""Decode on a GGUF's own 4-bit blocks: the weights nsample embeds are Q4_1, every 32 weights of a row d·q + m.

A linear layer's float32 weight that came from such a file is exactly d·q + m block by block (q in 0..15, d and m
float16, rounded once), so the blocks can be read back from it and checked bitwise; decode then reads 0.75 bytes
per weight (4-bit q, float32 d and m) instead of two-level int8's 2, and csrc/q4_rows.cpp expands them in
registers to the same float32 weights and sums in float32. Prefill stays on the int8 GEMM (AMX / VNNI), which
is faster for many rows; which one runs is chosen by phase (`decoding()`, set by the runner around decode
forwards), never by batch size, so a row's numbers do not depend on its batch. A weight that is not exactly
such blocks (a hub model, the Q8_0 LM head) decodes on int8 as before.
"""
import contextlib
import threading

import torch

BLOCK = 32
_phase = threading.local()


@contextlib.contextmanager
def decoding():
    """Inside: this thread's forwards are decode steps, which run on the 4-bit blocks where a layer has them."""
    _phase.decoding = True
    try:
        yield
    finally:
        _phase.decoding = False


def in_decode() -> bool:
    return getattr(_phase, "decoding", False)


def split(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(q (N, K/2) uint8: weight j of a block in byte j's low nibble, 16 + j in its high; d, m (N, K/32) float32)
    if w (N, K) is exactly d·q + m per block of 32 along K with float16 d and m, else None."""
    w = w.detach().float()
    N, K = w.shape
    if K % BLOCK or w.device.type != "cpu":
        return None
    blocks = w.view(N, K // BLOCK, BLOCK)
    m = blocks.amin(-1)  # (N, K/32): a Q4_1 block's minimum is its m (q = 0 there), its maximum 15·d + m
    d = ((blocks.amax(-1) - m) / 15).half().float()
    if not (torch.equal(m.half().float(), m) and torch.isfinite(d).all()):
        return None
    q = ((blocks - m[..., None]) / d.clamp_min(torch.finfo(torch.float32).tiny)[..., None]).round_().clamp_(0, 15)
    if not torch.equal(torch.addcmul(m[..., None], q, d[..., None]), blocks):  # d·q exact, then + m: one rounding
        return None
    q = q.to(torch.uint8).view(N, K // BLOCK, 2, BLOCK // 2)
    return (q[:, :, 0] | q[:, :, 1] << 4).reshape(N, K // 2).contiguous(), d.contiguous(), m.contiguous()


def join(q: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """The float32 weight (N, K) of split()'s blocks."""
    N, half = len(q), q.view(len(q), -1, BLOCK // 2)  # (N, K/32, 16)
    nibbles = torch.stack([half & 15, half >> 4], -2).view(N, -1, BLOCK).float()  # (N, K/32, 32)
    return torch.addcmul(m[..., None], nibbles, d[..., None]).view(N, -1)
