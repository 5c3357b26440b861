"""The C++ kernels on a GGUF file's own blocks (nsample/cpu/csrc/gguf_formats.h, gguf_linear.cpp, gguf_expand.cpp),
format by format, on weights quantized by llama.cpp itself: the expanded weights are gguf-py's dequantization
bitwise, the decode and prefill products are x · Wᵀ to float32 accuracy, and a decode or prefill row is bitwise the
same whatever rows come with it. Run for the instruction set the kernels are built for here (NSAMPLE_ISA=avx2 forces
AVX2)."""
import ggml_quantizer
import gguf
import numpy as np
import pytest
import torch

pytestmark = pytest.mark.skipif(not ggml_quantizer.available(), reason="llama.cpp's quantizer (llama-cpp-python) "
                                "is not installed")
TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11,
         "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "IQ2_XXS": 16, "IQ2_XS": 17, "IQ3_XXS": 18, "IQ1_S": 19, "IQ4_NL": 20,
         "IQ3_S": 21, "IQ2_S": 22, "IQ4_XS": 23, "IQ1_M": 29, "BF16": 30, "MXFP4": 39}
N = 10  # not a multiple of the kernels' groups of 4 columns: the last group is partial


@pytest.fixture(scope="module")
def ops(kernel_ops):
    return kernel_ops


@pytest.fixture(scope="module", params=list(TYPES.items()), ids=list(TYPES))
def tensor(request):
    """(type id, K, blocks (N, row bytes) uint8, gguf-py's float32 weights (N, K)). K spans two or more of the
    decode kernel's slices of K where a tile reads x for each column (AVX2's eight rows) or a 32-weight format's four
    rows (the other tiles take half the L2 cache: test_long_rows_go_in_slices_and_sum_as_one)."""
    type_id, K = request.param[1], 1536
    return type_id, K, *quantized(type_id, K)


def quantized(type_id: int, K: int) -> tuple[torch.Tensor, torch.Tensor]:
    """N random rows of K weights quantized by llama.cpp to `type_id`: (blocks (N, row bytes) uint8, gguf-py's float32
    weights (N, K))."""
    w = torch.randn(N, K, generator=torch.Generator().manual_seed(type_id))
    blocks = ggml_quantizer.quantize(w, type_id)
    weights = gguf.quants.dequantize(blocks.numpy(), gguf.GGMLQuantizationType(type_id))
    return blocks, torch.from_numpy(np.ascontiguousarray(weights, dtype=np.float32))


def close(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> bool:
    """y is x · wᵀ (+ bias), exact in float64, to 1e-5 of its largest element."""
    exact = x.double() @ w.double().T + (0 if bias is None else bias.double())
    return bool((y.double() - exact).abs().max() <= 1e-5 * exact.abs().max())


def test_dequantize_is_gguf_pys_bitwise(ops, tensor):
    type_id, K, blocks, weights = tensor
    assert torch.equal(ops.gguf_dequantize(blocks, type_id, K), weights)


def test_rows_are_the_dequantized_rows(ops, tensor):
    type_id, K, blocks, weights = tensor
    ids = torch.tensor([[3, 0, 9], [3, 7, 1]])
    got = ops.gguf_rows(blocks, type_id, K, ids)
    assert got.shape == (2, 3, K) and torch.equal(got, weights[ids])
    with pytest.raises(RuntimeError, match="not a row"):
        ops.gguf_rows(blocks, type_id, K, torch.tensor([N]))


@pytest.mark.parametrize("M", [1, 3, 6, 17, 40])
def test_decode_is_x_times_w_and_each_row_is_bitwise_its_own(ops, tensor, M):
    type_id, K, blocks, weights = tensor
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(M))
    bias = torch.randn(N)
    y = ops.gguf_decode_linear(x, blocks, type_id, None)
    assert y.shape == (M, N) and close(y, x, weights)
    for r in range(M):  # alone, and among other rows in another order (the rows' tiles differ)
        assert torch.equal(ops.gguf_decode_linear(x[r:r + 1].contiguous(), blocks, type_id, None)[0], y[r])
    shuffled = torch.randperm(M, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ops.gguf_decode_linear(x[shuffled].contiguous(), blocks, type_id, None), y[shuffled])
    assert torch.equal(ops.gguf_decode_linear(x, blocks, type_id, bias), y + bias)


@pytest.mark.parametrize("type_id", [12, 14, 3, 8, 30])
def test_long_rows_go_in_slices_and_sum_as_one(ops, type_id):
    """K so long that row tiles' x goes in slices of K: a tile that reads x once for several columns takes half the
    L2 cache (K = 33024 at eight rows is 1 MiB: two slices or more for an L2 of up to 2 MiB; at four rows 516 KiB),
    one that reads it for each column, a 32-weight format's four rows or plain rows (BF16), two thirds of L1. Twelve
    rows, a tile of eight and one of four: each row's sums carried from slice to slice as one pass makes them, bitwise
    as the row alone, and x · wᵀ."""
    K = 129 * 256
    blocks, weights = quantized(type_id, K)
    x = torch.randn(12, K, generator=torch.Generator().manual_seed(0))
    y = ops.gguf_decode_linear(x, blocks, type_id, None)
    assert close(y, x, weights)
    for r in (0, 7, 8, 11):
        assert torch.equal(ops.gguf_decode_linear(x[r:r + 1].contiguous(), blocks, type_id, None)[0], y[r])


@pytest.mark.parametrize("M", [1, 17, 40])
def test_prefill_is_x_times_w(ops, tensor, M):
    type_id, K, blocks, weights = tensor
    x = torch.randn(M, K, generator=torch.Generator().manual_seed(M))
    bias = torch.randn(N)
    assert close(ops.gguf_prefill_linear(x, blocks, type_id, None), x, weights)
    assert close(ops.gguf_prefill_linear(x, blocks, type_id, bias), x, weights, bias)


@pytest.mark.parametrize("m", [1, 5, 16, 17])
def test_prefill_rows_are_bitwise_their_own_in_a_short_tile_or_a_whole_one(ops, tensor, m):
    """A prompt's rows do not depend on the prompts packed with it: a batch's last tile of at most 16 rows is 16
    wide where MKL computes its rows as in a 32-wide one (checked by the kernel for each shape), else 32."""
    type_id, K, blocks, _ = tensor
    for N_, blocks_ in [(N, blocks), (300, ggml_quantizer.quantize(torch.randn(300, K), type_id))]:
        x = torch.randn(32 + m, K, generator=torch.Generator().manual_seed(m))
        whole = ops.gguf_prefill_linear(x, blocks_, type_id, None)  # a tile of 32, then m rows
        assert whole.shape == (32 + m, N_)
        assert torch.equal(ops.gguf_prefill_linear(x[32:].contiguous(), blocks_, type_id, None), whole[32:])
        assert torch.equal(ops.gguf_prefill_linear(x[:m].contiguous(), blocks_, type_id, None), whole[:m])


def test_every_mxfp4_scale_byte(ops):
    """MXFP4's scale byte e is 2^(e - 128), a denormal for e < 2 (the kernels read it from a table of the 256): every
    e in a block of its own, dequantized bitwise as gguf-py, and each output of the float32 and int8 decode x · wᵀ to
    float32 accuracy where it stays finite (e < 160)."""
    K = 1024
    blocks = torch.randint(0, 256, (8, K // 32, 17), dtype=torch.uint8, generator=torch.Generator().manual_seed(39))
    blocks[..., 0] = torch.arange(256, dtype=torch.uint8).view(8, K // 32)  # row n: e = 32n .. 32n + 31
    blocks = blocks.view(8, -1).contiguous()
    with np.errstate(over="ignore"):  # e = 255's 2^127 times 12 is inf, in gguf-py as in the kernels
        weights = torch.from_numpy(gguf.quants.dequantize(blocks.numpy(), gguf.GGMLQuantizationType.MXFP4))
    assert torch.equal(ops.gguf_dequantize(blocks, 39, K), weights)
    finite = blocks[:5].contiguous()
    x = torch.randint(-127, 128, (3, K), generator=torch.Generator().manual_seed(0)).float() / 16
    x[:, ::32] = 127 / 16  # each 32's largest: int8 holds every x exactly (d = 1/16)
    exact = x.double() @ weights[:5].double().T
    ys = [ops.gguf_decode_linear(x, finite, 39, None)]
    if ops.q8_available():
        ys.append(ops.gguf_decode_q8_linear(x, finite, 39, None))
    for y in ys:
        assert ((y.double() - exact).abs() <= 1e-5 * exact.abs().amax(dim=0)).all()


def test_a_linear_of_parts_of_several_types_is_their_concatenation(ops):
    """A fused q|k|v as a Q4_K_M file holds it: Q4_K, Q6_K, Q4_K parts side by side, one bias over them all."""
    K, sizes, types = 512, [12, 4, 4], [12, 14, 12]
    parts = [ggml_quantizer.quantize(torch.randn(n, K), t) for n, t in zip(sizes, types)]
    bias = torch.randn(sum(sizes))
    linear = ops.gguf_block_linear(parts, types, bias)
    for M in (1, 5, 17):
        x = torch.randn(M, K)
        alone = torch.cat([ops.gguf_decode_linear(x, p, t, None) for p, t in zip(parts, types)], dim=1)
        assert torch.equal(linear(x), alone + bias)
    one = ops.gguf_block_linear(parts[:1], types[:1], bias[:12])
    assert torch.equal(one(x), ops.gguf_decode_linear(x, parts[0], types[0], bias[:12]))
    assert torch.equal(ops.gguf_block_linear(parts, types, None)(x), alone)


def test_other_types_and_shapes_are_refused(ops):
    blocks = ggml_quantizer.quantize(torch.randn(4, 256), 12)
    with pytest.raises(RuntimeError, match="not supported"):
        ops.gguf_dequantize(blocks, 35, 256)  # TQ2_0
    with pytest.raises(RuntimeError, match="bytes a row"):
        ops.gguf_decode_linear(torch.randn(1, 512), blocks, 12, None)
