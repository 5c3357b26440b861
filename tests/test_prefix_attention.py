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


def test_a_sliding_window_that_never_binds_keeps_the_shared_prefix():
    """Phi-3.5-mini's config has a window of 262144 in its 131072 positions: plain causal attention, so its prompt is
    shared and its choices are those of the model without a window; a window shorter than the positions is not."""
    from transformers import Phi3Config, Phi3ForCausalLM

    from nsample.config import EngineConfig
    from nsample.engine import Engine
    from nsample.models.tiny_model import tiny_model

    _, tokenizer = tiny_model()
    shape = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, pad_token_id=0)
    torch.manual_seed(0)
    model = Phi3ForCausalLM(Phi3Config(**shape, sliding_window=4096)).eval()
    plain = Phi3ForCausalLM(Phi3Config(**shape)).eval()
    plain.load_state_dict(model.state_dict())
    ids = tokenizer("The sea is wide and the ships are slow.", return_tensors="pt").input_ids
    with torch.inference_mode():
        want = plain.generate(ids, max_new_tokens=8, do_sample=False)[0, ids.shape[1]:].tolist()
    engine = Engine(model, tokenizer, EngineConfig(quantize="none"))
    try:
        assert engine.shared_prefix
        out = engine.generate("The sea is wide and the ships are slow.", n=3, temperature=0, max_tokens=8,
                              ignore_eos=True)
        assert [c.token_ids for c in out.choices] == [want] * 3
    finally:
        engine.close()
    windowed = Engine(Phi3ForCausalLM(Phi3Config(**shape, sliding_window=64)).eval(), tokenizer,
                      EngineConfig(quantize="none"))
    try:
        assert not windowed.shared_prefix
    finally:
        windowed.close()
