"""Decode on a GGUF's own blocks: the embedded model's projections are Q4_1 (every 32 weights of a row d·q + m,
q in 0..15) and its LM head Q8_0 (d·q, q in -127..127), with float16 d and m.

A float32 weight that came from such a file is exactly that, block by block (rounded once), so the blocks can be
read back from it and checked bitwise (`split`); decode then reads 0.75 (Q4_1) or 1.1 (Q8_0) bytes per weight
instead of two-level int8's 2, and csrc/block_rows.cpp expands them in registers to the same float32 weights and
sums in float32 (AVX-512). Prefill stays on the int8 GEMM (AMX / VNNI), which is faster for many rows; which one
runs is chosen by phase (`decoding()`, set by the runner around decode forwards), never by batch size, so a row's
numbers do not depend on its batch. A weight that is neither (any hub model) decodes on int8 as before.
"""
import contextlib
import threading

import torch

BLOCK = 32
_phase = threading.local()


@contextlib.contextmanager
def decoding():
    """Inside: this thread's forwards are decode steps, which run on the GGUF blocks where a layer has them."""
    _phase.decoding = True
    try:
        yield
    finally:
        _phase.decoding = False


def in_decode() -> bool:
    return getattr(_phase, "decoding", False)


def split(w: torch.Tensor) -> tuple | None:
    """("q4_1", q (N, K/2) uint8, d, m (N, K/32) float32) or ("q8_0", q (N, K) int8, d (N, K/32) float32) if
    w (N, K) is exactly such blocks along K, else None. In q4_1's q, byte j of a block holds weight j in its low
    nibble and weight 16 + j in its high one."""
    w = w.detach().float()
    N, K = w.shape
    if K % BLOCK or w.device.type != "cpu" or not torch.isfinite(w).all():
        return None
    blocks = w.view(N, K // BLOCK, BLOCK)
    return _q4_1(blocks) or _q8_0(blocks)


def _q4_1(blocks: torch.Tensor) -> tuple | None:
    m = blocks.amin(-1)  # (N, K/32): llama.cpp puts q = 0 at a block's minimum and q = 15 at its maximum
    d = ((blocks.amax(-1) - m) / 15).half().float()
    if not torch.equal(m.half().float(), m):
        return None
    q = ((blocks - m[..., None]) / d.clamp_min(torch.finfo(torch.float32).tiny)[..., None]).round_().clamp_(0, 15)
    if not torch.equal(torch.addcmul(m[..., None], q, d[..., None]), blocks):  # d·q exact, then + m: one rounding
        return None
    N, nb, _ = blocks.shape
    q = q.to(torch.uint8).view(N, nb, 2, BLOCK // 2)
    return "q4_1", (q[:, :, 0] | q[:, :, 1] << 4).reshape(N, nb * BLOCK // 2).contiguous(), d, m


def _q8_0(blocks: torch.Tensor) -> tuple | None:
    d = (blocks.abs().amax(-1) / 127).half().float()  # llama.cpp puts |q| = 127 at a block's largest magnitude
    q = (blocks / d.clamp_min(torch.finfo(torch.float32).tiny)[..., None]).round_().clamp_(-127, 127)
    if not torch.equal(q * d[..., None], blocks):  # d·q, exact
        return None
    return "q8_0", q.to(torch.int8).view(len(blocks), -1).contiguous(), d


def join(blocks: tuple) -> torch.Tensor:
    """The float32 weight (N, K) of split()'s blocks."""
    kind, q, d = blocks[:3]
    N = len(q)
    if kind == "q8_0":
        return (q.view(N, -1, BLOCK).float() * d[..., None]).view(N, -1)
    half = q.view(N, -1, BLOCK // 2)  # (N, K/32, 16)
    nibbles = torch.stack([half & 15, half >> 4], -2).view(N, -1, BLOCK).float()  # (N, K/32, 32)
    return torch.addcmul(blocks[3][..., None], nibbles, d[..., None]).view(N, -1)
