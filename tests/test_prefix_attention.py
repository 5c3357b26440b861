"""The decode attention of a cohort: every request's rows over its own prompt and their own tokens, two ways."""
import torch

from nsample.engine.prefix_attention import attend, attend_cpu


def reference(q, k_p, v_p, k, v):
    """Row by row: softmax over [prompt keys, own keys] with the KV heads repeated for the query groups."""
    R, H, _, D = q.shape
    g = H // k.shape[1]
    out = torch.empty_like(q)
    for r in range(R):
        keys = torch.cat([k_p[0], k[r]], 1).repeat_interleave(g, 0)  # (H, P + L, D)
        values = torch.cat([v_p[0], v[r]], 1).repeat_interleave(g, 0)
        out[r] = torch.softmax(q[r] @ keys.transpose(-1, -2), -1) @ values  # q is scaled already
    return out


def test_the_cpu_and_gpu_formulas_match_a_row_by_row_softmax_for_a_cohort_of_three_requests():
    torch.manual_seed(0)
    H, Hkv, D, L = 6, 2, 16, 5
    widths, prompts = [3, 1, 2], [7, 40, 1]  # rows and prompt length of each request
    q = torch.randn(sum(widths), H, 1, D) / D ** 0.5
    k, v = torch.randn(sum(widths), Hkv, L, D), torch.randn(sum(widths), Hkv, L, D)
    prefixes, start = [], 0
    for w, P in zip(widths, prompts):
        prefixes.append((start, start + w, torch.randn(1, Hkv, P, D), torch.randn(1, Hkv, P, D)))
        start += w
    cpu, gpu_formula = torch.empty_like(q), torch.empty_like(q)
    attend_cpu(q, prefixes, k, v, cpu)
    for a, b, k_p, v_p in prefixes:
        attend(q[a:b], k_p, v_p, k[a:b], v[a:b], out=gpu_formula[a:b])
        want = reference(q[a:b], k_p, v_p, k[a:b], v[a:b])
        assert torch.allclose(cpu[a:b], want, atol=1e-5) and torch.allclose(gpu_formula[a:b], want, atol=1e-5)
    for a, b, k_p, v_p in prefixes:  # each request as a cohort of its own, and each row alone: the same numbers
        for rows in (slice(a, b), slice(a, a + 1)):
            alone = torch.empty_like(q[rows])
            attend_cpu(q[rows].clone(), [(0, len(alone), k_p, v_p)], k[rows].clone(), v[rows].clone(), alone)
            assert torch.equal(alone, cpu[rows])
