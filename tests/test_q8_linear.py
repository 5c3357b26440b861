"""Decode on a GGUF's blocks with int8 activations (nsample/cpu/csrc/q8_linear.cpp, q8_formats.h; on ARM64
q8_neon.h, run under emulation by scripts/arm64_check.py), format by format, on weights quantized by llama.cpp
itself: activations that int8 holds exactly give x · Wᵀ to float32 accuracy (so every format's unpacking is right),
any others stay within the rounding's own bound, and each row is bitwise its own whatever rows come with it."""
import ggml_quantizer
import gguf
import numpy as np
import pytest
import torch
from gguf_fixtures import forced_isa

from nsample.cpu import kernels

pytestmark = pytest.mark.skipif(not ggml_quantizer.available(), reason="llama.cpp's quantizer (llama-cpp-python) "
                                "is not installed")
QUANTIZED = {"Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13,
             "Q6_K": 14, "IQ4_NL": 20, "IQ4_XS": 23, "MXFP4": 39}
N = 10  # not a multiple of the kernel's groups of 4 columns


@pytest.fixture(scope="module", params=kernels.runnable() or [None])
def ops(request):
    """The kernels built for each instruction set this CPU runs (x86: AVX2, AVX-VNNI, AVX-512, AVX-512 VNNI; ARM64:
    NEON, and NEON with ARMv8.2's dot product): each compiles its own dot products."""
    with forced_isa(request.param or "auto") as ops:
        if ops is None or not ops.q8_available():
            pytest.skip(f"no int8-activation kernels here (instruction set {request.param})")
        return ops


@pytest.fixture(scope="module", params=list(QUANTIZED.items()), ids=list(QUANTIZED))
def tensor(request):
    """(type id, K, blocks (N, row bytes), gguf-py's float32 weights (N, K))."""
    type_id = request.param[1]
    K = 768 if type_id >= 12 else 1024
    w = torch.randn(N, K, generator=torch.Generator().manual_seed(type_id))
    blocks = ggml_quantizer.quantize(w, type_id)
    weights = gguf.quants.dequantize(blocks.numpy(), gguf.GGMLQuantizationType(type_id))
    return type_id, K, blocks, torch.from_numpy(np.ascontiguousarray(weights, dtype=np.float32))


def representable(M: int, K: int, block: int, seed: int) -> torch.Tensor:
    """Rows int8 holds exactly: in each block, integers times a power of two, one of them ±127 times it."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-127, 128, (M, K), generator=g).float()
    q[:, 5::block] = 127.0 * torch.sign(torch.randn(M, K // block, generator=g))
    scale = 2.0 ** torch.randint(-9, -1, (M, K // block), generator=g).float()
    return (q * scale.repeat_interleave(block, dim=1)).contiguous()


@pytest.mark.parametrize("block", [32, 256])
@pytest.mark.parametrize("seed", range(8))
def test_rows_round_to_int8_block_by_block(ops, block, seed):
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(seed)) * torch.logspace(-3, 2, 512)
    x[1, :256] = 0.0  # all-zero blocks: scale 0, not NaN
    q, d, sums, qsums = ops.q8_quantize(x, block)
    nb = 512 // block
    assert q.dtype == torch.int8 and d.shape == (3, nb) and sums.shape == (3, 16)
    blocks = x.view(3, nb, block)
    top = blocks.abs().amax(dim=2, keepdim=True)
    # true float32 divisions, as the kernel's: torch takes `127 / t` as t.reciprocal() * 127 and `t / 127` as
    # t * (1 / 127), each off by an ulp now and then (seed 450 gave 31.499998 here and 31.5 there)
    by = torch.full_like(top, 127.0)
    assert torch.equal(d, (top / by).squeeze(2))
    assert q.abs().max() <= 127 and d[1, 0] == 0 and not q[1, :256].any()
    error = (blocks - d[..., None] * q.view(3, nb, block).float()).abs()
    assert (error <= d[..., None] / 2 * (1 + 1e-5)).all()
    # the float Σx of each 32 (the minimums' factor), to float32 summation's bound: 31 roundings of at most 2^-24
    # of Σ|x| (a relative tolerance fails where the terms cancel)
    exact = x.double().view(3, 16, 32).sum(dim=2)
    assert sums.dtype == torch.float32
    assert ((sums.double() - exact).abs() <= 31 * 2.0**-24 * x.double().abs().view(3, 16, 32).sum(dim=2)).all()
    if block == 32:
        assert qsums.shape == (3, 0)
    else:  # Σq of each 16, exact (llama.cpp's Q8_K bsums: Q6_K's offset)
        assert qsums.dtype == torch.int16 and torch.equal(qsums.long(), q.view(3, 32, 16).long().sum(dim=2))
    inv = torch.where(top > 0, by / top, torch.zeros(()))
    assert torch.equal(q.view(3, nb, block).float(), torch.round(blocks * inv))  # nearest, ties to even
    assert ops.q8_block(12) == ops.q8_block(13) == ops.q8_block(14) == 256 and ops.q8_block(3) == 32


def test_rounding_takes_the_true_division(ops):
    """127 / max|x| divided in float32 (0.996408403 here; a reciprocal times 127 gives the float below it), and x
    times it (31.5 exactly) rounded to even."""
    x = torch.zeros(1, 32)
    x[0, 0], x[0, 1] = 127.45777893066406, 31.613542556762695
    q, _, _, _ = ops.q8_quantize(x, 32)
    assert q[0, 0] == 127 and q[0, 1] == 32


@pytest.mark.parametrize("M", [1, 3, 7, 17])
def test_exactly_held_activations_give_x_times_w(ops, tensor, M):
    """M = 1, 3, 7, 17 take every row tile (8, 4, 2, 1) and every column tile."""
    type_id, K, blocks, weights = tensor
    x = representable(M, K, ops.q8_block(type_id), seed=M)
    y = ops.gguf_decode_q8_linear(x, blocks, type_id, None)
    exact = x.double() @ weights.double().T
    assert y.shape == (M, N) and (y.double() - exact).abs().max() <= 1e-5 * exact.abs().max()


def test_other_activations_stay_within_the_roundings_bound(ops, tensor):
    """|y - x·Wᵀ| <= Σ_i (|w_i| + max |w| of its block) · d_i / 2: each x_i is off by at most half its scale, and a
    format's minimum (at most its block's largest weight) multiplies the exact Σx."""
    type_id, K, blocks, weights = tensor
    x = torch.randn(5, K) * torch.linspace(0.1, 3, K)
    y = ops.gguf_decode_q8_linear(x, blocks, type_id, None)
    d = ops.q8_quantize(x, ops.q8_block(type_id))[1]
    per = 256 if type_id >= 10 else 32  # the K-quants
    w = weights.abs().double()
    top = w.view(N, -1, per).amax(dim=2).repeat_interleave(per, dim=1)
    half = d.double().repeat_interleave(ops.q8_block(type_id), dim=1) / 2
    bound = half @ (w + top).T + 1e-5 * (x.double() @ weights.double().T).abs()
    error = (y.double() - x.double() @ weights.double().T).abs()
    assert (error <= bound).all()
    float_y = ops.gguf_decode_linear(x, blocks, type_id, None)
    assert not torch.equal(y, float_y)  # the rounding is real, so this path is not the float one


@pytest.mark.parametrize("M", [1, 9, 40])
def test_each_row_is_bitwise_its_own(ops, tensor, M):
    type_id, K, blocks, _ = tensor
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(M))
    bias = torch.randn(N)
    y = ops.gguf_decode_q8_linear(x, blocks, type_id, None)
    for r in range(M):
        assert torch.equal(ops.gguf_decode_q8_linear(x[r:r + 1].contiguous(), blocks, type_id, None)[0], y[r])
    shuffled = torch.randperm(M, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ops.gguf_decode_q8_linear(x[shuffled].contiguous(), blocks, type_id, None), y[shuffled])
    assert torch.equal(ops.gguf_decode_q8_linear(x, blocks, type_id, bias), y + bias)


def test_a_linear_of_parts_rounds_once_and_keeps_float_parts_float(ops):
    """q|k|v as a Q4_K_M file holds it (Q4_K, Q6_K, Q4_K) plus an F16 part, which has no int8 kernel: each part is
    its own product, the F16 one on float32 activations."""
    K, sizes, types = 512, [12, 4, 4, 8], [12, 14, 12, 1]
    parts = [ggml_quantizer.quantize(torch.randn(n, K), t) for n, t in zip(sizes, types)]
    bias = torch.randn(sum(sizes))
    linear = ops.gguf_block_linear(parts, types, bias, True)
    for M in (1, 5, 17):
        x = torch.randn(M, K)
        alone = torch.cat([ops.gguf_decode_q8_linear(x, p, t, None) if t != 1 else ops.gguf_decode_linear(x, p, t, None)
                           for p, t in zip(parts, types)], dim=1)
        assert torch.equal(linear(x), alone + bias)
    one = ops.gguf_block_linear(parts[:1], types[:1], bias[:12], True)
    assert torch.equal(one(x), ops.gguf_decode_q8_linear(x, parts[0], types[0], bias[:12]))
    plain = ops.gguf_block_linear(parts, types, bias)(x)  # int8 activations are asked for, never the default
    assert torch.equal(plain, ops.gguf_block_linear(parts, types, bias, False)(x))


def test_formats_without_an_int8_kernel_are_refused(ops):
    assert [t for t in (0, 1, 30, *QUANTIZED.values()) if ops.q8_readable(t)] == list(QUANTIZED.values())
    with pytest.raises(RuntimeError, match="no int8-activation kernel"):
        ops.gguf_decode_q8_linear(torch.randn(1, 64), ggml_quantizer.quantize(torch.randn(2, 64), 1), 1, None)
    with pytest.raises(RuntimeError, match="bytes a row"):
        ops.gguf_decode_q8_linear(torch.randn(1, 512), ggml_quantizer.quantize(torch.randn(2, 256), 12), 12, None)


@pytest.mark.skipif(not {"avx2", "avxvnni"} <= set(kernels.runnable()), reason="this CPU has no AVX-VNNI")
@pytest.mark.parametrize("M", [1, 9])
def test_avx_vnni_gives_avx2s_outputs_bitwise(tensor, M):
    """The same integer sums in one instruction (vpdpbusd, vpdpwssd) instead of two or three, the same float steps
    after them: the same bits, on every format and row tile."""
    type_id, K, blocks, _ = tensor
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(type_id))
    with forced_isa("avx2") as avx2, forced_isa("avxvnni") as vnni:
        assert vnni is not avx2
        assert torch.equal(vnni.gguf_decode_q8_linear(x, blocks, type_id, None),
                           avx2.gguf_decode_q8_linear(x, blocks, type_id, None))
