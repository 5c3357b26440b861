"""The C++ attention of a decode step (csrc/attention.cpp, decode_attention) on every instruction set this CPU runs: a
row-by-row softmax's numbers, and each row's bitwise its own whether its request's rows are attended together (the
prompt's keys and values read once for all of them) or alone, on one thread or two."""
import pytest
import torch
from gguf_fixtures import forced_isa
from test_prefix_attention import reference as row_by_row

from nsample.cpu import kernels

ISAS = [kernels.isa()] + (["avx2"] if kernels.isa() not in (None, "avx2") and "avx2" in kernels.runnable() else [])
pytestmark = pytest.mark.skipif(kernels.ops() is None, reason="the C++ kernels are not built")
SHAPES = [(9, 3, 64), (32, 8, 128), (12, 2, 80)]  # (H, Hkv, D): SmolLM2's, a 7B's, a head size with no unrolled loop


def request(H, Hkv, D, rows, P, t, seed, window=0, scores="plain"):
    """decode_attention's arguments for one request of `rows` rows (one cohort), its prompt P positions long, each row
    t tokens of its own (this step's the last), a sliding window (0: none), its scores "plain", "capped" (soft-capped
    at 1.5) or with "sinks" (one a head, -1 to 1, beside scores ~ N(0, 1)); cos 1 and sin 0, so that rotation leaves q
    and k as they are."""
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(rows, (H + 2 * Hkv) * D, generator=g)
    own_k, own_v = torch.randn(rows, Hkv, t + 3, D, generator=g), torch.randn(rows, Hkv, t + 3, D, generator=g)
    prefix_k, prefix_v = torch.randn(1, Hkv, P, D, generator=g), torch.randn(1, Hkv, P, D, generator=g)
    sinks = torch.rand(H, generator=g) * 2 - 1 if scores == "sinks" else None
    return [qkv, torch.ones(rows, D), torch.zeros(rows, D), H, Hkv, 0.125, [0, t], [own_k], [own_v], [0, rows],
            [prefix_k], [prefix_v], window, 1.5 if scores == "capped" else 0.0, sinks]


def reference(args):
    """test_prefix_attention's row-by-row softmax, in float64, on the request's q (scaled) and its keys and values
    with this step's k and v at position t - 1."""
    qkv, _, _, H, Hkv, scale, (_, t), (own_k,), (own_v,), _, (pk,), (pv,), window, softcap, sinks = args
    rows, D = qkv.shape[0], own_k.shape[-1]
    k, v = own_k[:, :, :t].clone(), own_v[:, :, :t].clone()
    k[:, :, -1], v[:, :, -1] = qkv[:, H * D:(H + Hkv) * D].view(rows, Hkv, D), qkv[:, (H + Hkv) * D:].view(rows, Hkv, D)
    q = qkv[:, :H * D].view(rows, H, 1, D) * scale
    return row_by_row(*(x.double() for x in (q, pk, pv, k, v)), window or None, softcap or None,
                      None if sinks is None else sinks.double()).view(rows, H * D)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("H,Hkv,D", SHAPES)
@pytest.mark.parametrize("window", [0, 3, 40])  # none; inside the own tokens (t = 37); into the prompt
@pytest.mark.parametrize("scores", ["plain", "capped", "sinks"])  # Gemma 2's soft-capped, gpt-oss's sinks
def test_a_requests_rows_attended_together_are_each_a_row_by_row_softmax_and_bitwise_their_own_alone(isa, H, Hkv, D,
                                                                                                     window, scores):
    with forced_isa(isa) as ops:
        threads = torch.get_num_threads()
        try:
            for P, t in [(0, 1), (5, 37), (130, 2)]:  # no prompt; shorter than a vector; past a block of values
                rows = 9  # more than a task's eight
                together = ops.decode_attention(*request(H, Hkv, D, rows, P, t, P, window, scores))
                assert torch.allclose(together.double(), reference(request(H, Hkv, D, rows, P, t, P, window, scores)),
                                      atol=1e-5)
                torch.set_num_threads(1)
                assert torch.equal(ops.decode_attention(*request(H, Hkv, D, rows, P, t, P, window, scores)), together)
                torch.set_num_threads(threads)
                for r in (0, 4, 8):  # row r as a request of one row, its cohort buffers its own
                    args = request(H, Hkv, D, rows, P, t, P, window, scores)
                    qkv, cos, sin, *_ = args
                    args[:3] = qkv[r:r + 1], cos[r:r + 1], sin[r:r + 1]
                    args[7:10] = [args[7][0][r:r + 1].clone()], [args[8][0][r:r + 1].clone()], [0, 1]
                    assert torch.equal(ops.decode_attention(*args)[0], together[r])
        finally:
            torch.set_num_threads(threads)
