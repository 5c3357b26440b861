"""The decode attention of a cohort: every request's rows over its own prompt and their own tokens, two ways, in a
sliding window too; and models with sliding-window layers (Gemma 3, OLMo 3, Mistral) on the shared prefix, choosing as
transformers' own generate."""
import pytest
import torch

from nsample.engine.prefix_attention import attend, attend_cpu, windowed


def reference(q, k_p, v_p, k, v, window=None, softcap=None, sinks=None):
    """Row by row: softmax over [prompt keys, own keys] (the last `window` of them) with the KV heads repeated for
    the query groups, the scores soft-capped (cap·tanh(s/cap)) where `softcap` is given, a sink logit per head (of
    an output of zero) beside them where `sinks` is."""
    R, H, _, D = q.shape
    g = H // k.shape[1]
    out = torch.empty_like(q)
    for r in range(R):
        keys = torch.cat([k_p[0], k[r]], 1)[:, -(window or 0):].repeat_interleave(g, 0)  # (H, P + L, D)
        values = torch.cat([v_p[0], v[r]], 1)[:, -(window or 0):].repeat_interleave(g, 0)
        scores = q[r] @ keys.transpose(-1, -2)  # q is scaled already
        scores = scores if softcap is None else softcap * torch.tanh(scores / softcap)  # (H, 1, K)
        if sinks is not None:
            scores = torch.cat([scores, sinks.view(H, 1, 1)], -1)
        out[r] = torch.softmax(scores, -1)[..., :values.shape[1]] @ values
    return out


L = 5  # the cohort's own tokens


def cohort(seed: int):
    """Scaled queries (6, H, 1, D), own keys and values (6, Hkv, L, D) of a cohort of three requests of 3, 1 and 2
    rows, and each request's (first row, end row, prompt keys, prompt values) over prompts of 7, 40 and 1."""
    torch.manual_seed(seed)
    H, Hkv, D = 6, 2, 16
    widths, prompts = [3, 1, 2], [7, 40, 1]  # rows and prompt length of each request
    q = torch.randn(sum(widths), H, 1, D) / D ** 0.5
    k, v = torch.randn(sum(widths), Hkv, L, D), torch.randn(sum(widths), Hkv, L, D)
    prefixes, start = [], 0
    for w, P in zip(widths, prompts):
        prefixes.append((start, start + w, torch.randn(1, Hkv, P, D), torch.randn(1, Hkv, P, D)))
        start += w
    return q, k, v, prefixes


def test_the_cpu_and_gpu_formulas_match_a_row_by_row_softmax_for_a_cohort_of_three_requests():
    q, k, v, prefixes = cohort(0)
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


def test_soft_capped_scores_are_a_row_by_row_softmax_of_the_capped_scores_alone_or_together():
    """Gemma 2's soft-capped scores (a cap of 0.5 on scores ~ N(0, 1), so it binds): the GPU formula's numbers for a
    request's rows together, and each row alone (as a CPU runs them), are the capped row-by-row softmax's."""
    q, k, v, prefixes = cohort(2)
    for a, b, k_p, v_p in prefixes:
        together = torch.empty_like(q[a:b])
        attend(q[a:b], k_p, v_p, k[a:b], v[a:b], out=together, softcap=0.5)
        assert torch.allclose(together, reference(q[a:b], k_p, v_p, k[a:b], v[a:b], softcap=0.5), atol=1e-5)
        assert not torch.allclose(together, reference(q[a:b], k_p, v_p, k[a:b], v[a:b]), atol=1e-3)
        for r in range(a, b):
            alone = torch.empty_like(q[r:r + 1])
            attend(q[r:r + 1], k_p, v_p, k[r:r + 1], v[r:r + 1], out=alone, softcap=0.5)
            assert torch.allclose(alone, together[r - a:r - a + 1], atol=1e-6)


def test_sinks_are_one_more_logit_of_each_heads_softmax_alone_or_together():
    """gpt-oss's sinks (around -1 to 1, against scores ~ N(0, 1/D)): both formulas are the row-by-row softmax with
    the sink beside the scores, a request's rows and each row alone the same numbers on the CPU's (the GPU's within
    float noise), in a sliding window too; without the sinks the numbers move."""
    q, k, v, prefixes = cohort(3)
    sinks = torch.rand(q.shape[1], generator=torch.Generator().manual_seed(0)) * 2 - 1
    for window in (None, 9):
        own = (k[:, :, max(0, L - (window or L)):], v[:, :, max(0, L - (window or L)):])
        seen = [(a, b, *windowed(k_p, v_p, L, window)) for a, b, k_p, v_p in prefixes]
        cpu = torch.empty_like(q)
        attend_cpu(q, seen, *own, cpu, sinks)
        for (a, b, k_p, v_p), (_, _, k_w, v_w) in zip(prefixes, seen):
            want = reference(q[a:b], k_p, v_p, k[a:b], v[a:b], window, sinks=sinks)
            gpu_formula = torch.empty_like(q[a:b])
            attend(q[a:b], k_w, v_w, own[0][a:b], own[1][a:b], out=gpu_formula, sinks=sinks)
            assert torch.allclose(cpu[a:b], want, atol=1e-5) and torch.allclose(gpu_formula, want, atol=1e-5)
            assert not torch.allclose(want, reference(q[a:b], k_p, v_p, k[a:b], v[a:b], window), atol=1e-3)
            for r in range(a, b):
                alone = torch.empty_like(q[r:r + 1])
                attend_cpu(q[r:r + 1].clone(), [(0, 1, k_w, v_w)], own[0][r:r + 1].clone(), own[1][r:r + 1].clone(),
                           alone, sinks)
                assert torch.equal(alone, cpu[r:r + 1])


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


@pytest.mark.parametrize("window", [3, 5, 9, 40])
def test_a_sliding_window_sees_the_last_positions_of_prompt_and_own_tokens(window):
    """Rows at own length L over prompts of 7, 40 and 1: windows inside the own tokens (3, 5), across them into the
    prompt (9), and past the prompt's start (40)."""
    q, k, v, prefixes = cohort(1)
    own = (k[:, :, max(0, L - window):], v[:, :, max(0, L - window):])
    seen = [(a, b, *windowed(k_p, v_p, L, window)) for a, b, k_p, v_p in prefixes]
    cpu = torch.empty_like(q)
    attend_cpu(q, seen, *own, cpu)
    for (a, b, k_p, v_p), (_, _, k_w, v_w) in zip(prefixes, seen):
        want = reference(q[a:b], k_p, v_p, k[a:b], v[a:b], window)
        gpu_formula = torch.empty_like(q[a:b])
        attend(q[a:b], k_w, v_w, own[0][a:b], own[1][a:b], out=gpu_formula)
        assert torch.allclose(cpu[a:b], want, atol=1e-5) and torch.allclose(gpu_formula, want, atol=1e-5)


GPT_OSS = dict(num_local_experts=4, num_experts_per_tok=2, rope_parameters={"rope_type": "default",
                                                                          "rope_theta": 10000.0})  # plain rotary
GEMMA2_CAPS = dict(attn_logit_softcapping=0.2, final_logit_softcapping=0.5, query_pre_attn_scalar=1)  # scores of
# this tiny model's size, so that the cap on them binds (its greedy choices differ without it)


@pytest.mark.parametrize("kind", ["gemma2", "gemma3_text", "olmo3", "mistral", "gpt_oss"])
def test_models_with_sliding_window_layers_share_the_prompt_and_choose_as_transformers(kind):
    """A tiny Gemma 2 (its scores soft-capped), Gemma 3, OLMo 3, Mistral and gpt-oss (a sink per head) with a window
    of 8 (every other layer, five layers of six, three of four, all, every other), prompts of some 12 and 40 tokens
    and 24 new ones: the engine keeps each prompt once and its greedy choices are those of transformers' generate on
    the same weights (its own attention, eager for Gemma 2 and gpt-oss, and sliding masks)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from nsample.config import EngineConfig
    from nsample.engine import Engine
    from nsample.models.tiny_model import tiny_model

    _, tokenizer = tiny_model()
    config = AutoConfig.for_model(kind, vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                  sliding_window=8, max_position_embeddings=2048, pad_token_id=0,
                                  **(GEMMA2_CAPS if kind == "gemma2" else {}),
                                  **(GPT_OSS if kind == "gpt_oss" else {}))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    for layer in model.model.layers if kind == "gpt_oss" else []:  # sinks that weigh (transformers' start at 0)
        layer.self_attn.sinks.data = torch.rand(4) * 4 - 2
    plain = AutoModelForCausalLM.from_config(config).eval()
    plain.load_state_dict(model.state_dict())
    assert set(getattr(config, "layer_types", None) or ["sliding_attention", "full_attention"]) == {
        "sliding_attention", "full_attention"}
    prompts = ["The sea is wide.", " ".join(["The sea is wide and the ships are slow."] * 4)]
    engine = Engine(model, tokenizer, EngineConfig(quantize="none"))
    try:
        assert engine.shared_prefix
        for prompt in prompts:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            with torch.inference_mode():
                want = plain.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:].tolist()
            out = engine.generate(prompt, n=3, temperature=0, max_tokens=24, ignore_eos=True)
            assert [c.token_ids for c in out.choices] == [want] * 3
    finally:
        engine.close()
    if kind in ("gemma2", "gpt_oss"):  # the cap, the sinks matter: without them the long prompt's choices differ
        for layer in plain.model.layers:
            if kind == "gemma2":
                layer.self_attn.attn_logit_softcapping = None
            else:
                layer.self_attn.sinks.data.fill_(-1e4)
        with torch.inference_mode():
            assert plain.generate(ids, max_new_tokens=24, do_sample=False)[0, ids.shape[1]:].tolist() != want
