"""Mixture-of-experts GGUF files (Qwen 3 MoE, Qwen 2 MoE with its shared expert) loaded as their blocks
(nsample/cpu/gguf_experts.py): each expert's projections on its rows of the file's 3-D tensors, never transformers'
fused float32 copy. The experts are transformers' own dequantized weights bitwise, the logits within 1e-4 of its
forward (with the expert sizes it does not read from the file), llama.cpp's own on a float32 file, greedy choices
those of the float32 model, and the seed contract holds."""
import ggml_quantizer as gq
import pytest
import tiny_gguf
import torch
from gguf_fixtures import (
    TYPES,
    assert_experts_kernel_is_the_modules_loop,
    engine_pair,
    llama_cpp_logits,
    tiny_gguf_file,
)
from seed_contract import assert_choices_replay_alone
from transformers import AutoConfig

import nsample
from nsample.cpu import kernels, weights_report
from nsample.cpu.gguf_experts import GGUFExperts, GGUFRouter

pytestmark = pytest.mark.skipif(kernels.ops() is None or not gq.available(),
                                reason="no C++ kernels here, or no llama.cpp quantizer (llama-cpp-python)")
IDS = torch.tensor([[1, 50, 700, 3000, 12, 9, 44, 1000, 2, 77, 5000, 300]])
ARCHS = ["qwen3moe", "qwen2moe"]


@pytest.fixture(scope="module", params=ARCHS)
def moe(request):
    """(the file as its blocks, the file through transformers' float32 conversion) for one architecture."""
    with engine_pair(tiny_gguf_file(request.param)) as (fast, ref):
        yield fast, ref


@torch.inference_mode()
def test_each_expert_is_transformers_own_weights_bitwise_and_nothing_is_float32_but_norms(moe):
    fast, ref = moe
    assert fast.quantize == "gguf"
    size = fast.model.config.moe_intermediate_size
    assert size == ref.model.config.moe_intermediate_size == 256  # the file's, where transformers keeps its 768/1408
    for layer, ref_layer in zip(fast.model.model.layers, ref.model.model.layers):
        experts, want = layer.mlp.experts, ref_layer.mlp.experts
        assert isinstance(experts, GGUFExperts) and isinstance(layer.mlp.gate, GGUFRouter)
        for e in range(experts.num_experts):
            assert torch.equal(experts.gate[e].dequantize(), want.gate_up_proj[e, :size])  # gate, then up, fused
            assert torch.equal(experts.up[e].dequantize(), want.gate_up_proj[e, size:])
            assert torch.equal(experts.down[e].dequantize(), want.down_proj[e])
        assert torch.equal(layer.mlp.gate.linear.dequantize(), ref_layer.mlp.gate.weight)
    params = dict(fast.model.named_parameters())
    assert params and all("norm" in n or n.endswith(".bias") for n in params)
    assert (fast.model(IDS).logits - ref.model(IDS).logits).abs().max() < 1e-4
    report = weights_report.describe(fast.model)
    paths = report["paths"]
    assert paths["mlp.experts.gate"] == "Q4_K blocks" and paths["mlp.experts.down"] == "Q6_K blocks"
    assert paths["mlp.gate"] == "F32 blocks"
    expert_bytes = sum(m.blocks.numel() for layer in fast.model.model.layers for kind in ("gate", "up", "down")
                       for m in getattr(layer.mlp.experts, kind))
    assert report["token_bytes"] == report["decode_bytes"] - expert_bytes * (1 - 2 / 8)  # a token reads 2 of 8


@torch.inference_mode()
def test_the_decode_kernel_is_the_modules_sums_bitwise_and_each_row_its_own(moe):
    """csrc/moe.cpp against GGUFExperts' loop over its GGUFLinear experts (both on the decode kernels), on rows routed
    alike and apart; a row alone gets the numbers it gets among others. Both architectures decode in the fused C++
    layers (fused_decode.py), Qwen 2 MoE's shared expert there too."""
    fast, _ = moe
    experts = next(m for m in fast.model.modules() if isinstance(m, GGUFExperts))
    assert fast.runner.fused is not None
    assert_experts_kernel_is_the_modules_loop(experts)


def test_greedy_choices_are_those_of_transformers_float32_model_of_the_file(moe):
    fast, ref = moe
    same = 0
    prompts = ["Write a short poem about the sea.", "What is 17 times 23?", "Name three colours.", "Say hello."]
    for p in prompts:
        a, b = (e.generate([{"role": "user", "content": p}], n=2, temperature=0, max_tokens=24) for e in (ref, fast))
        assert a.choices[0].token_ids == a.choices[1].token_ids
        same += a.choices[0].token_ids == b.choices[0].token_ids == b.choices[1].token_ids
    assert same >= len(prompts) - 1  # float32 up to the order of sums: a near-tie may flip one


def test_the_seed_contract_holds_on_the_experts_blocks(moe):
    fast, _ = moe
    assert_choices_replay_alone(fast, [{"role": "user", "content": "Write a short poem about the sea."}], n=4,
                                seed=11, max_tokens=24, ignore_eos=True)


@pytest.mark.parametrize("arch", [*ARCHS, "mixtral"])
@torch.inference_mode()
def test_the_logits_are_llama_cpps_on_a_float32_file(tmp_path, arch):
    """llama.cpp routes as nsample does: Qwen 3 MoE's and Mixtral's top-k weights normalized, Qwen 2 MoE's not, the
    shared expert gated. On float32 weights and KV cache the two engines agree to float32 noise; flipping the
    normalization moves the logits far more than that. (Mixtral's file is a Llama's with experts, which transformers'
    GGUF loading reads as a plain Llama.)"""
    path = tiny_gguf.write_arch(tmp_path / f"tiny-{arch}-f32.gguf", arch, {})
    want = llama_cpp_logits(path, IDS[0].tolist())
    engine = nsample.load(str(path))
    try:
        assert engine.quantize == "gguf" and engine.runner.fused is not None and engine.shared_prefix
        got = engine.model(IDS).logits[0]
        for router in (m for m in engine.model.modules() if isinstance(m, GGUFRouter)):
            router.norm_topk_prob = not router.norm_topk_prob
        flipped = engine.model(IDS).logits[0]
    finally:
        engine.close()
    assert (got - want).abs().max() < 1e-4  # 1.3e-6 here
    assert (flipped - want).abs().max() > 0.05  # 0.26-0.30 here


def test_a_file_of_other_expert_sizes_loads_on_both_paths(tmp_path):
    """transformers' GGUF config reads no expert MLP size (it keeps Qwen3-30B-A3B's 768) and its own load of such a
    file fails on the shapes; nsample reads the file's (expert_feed_forward_length) on both load paths."""
    path = tiny_gguf.write_arch(tmp_path / "tiny-qwen3moe.gguf", "qwen3moe", TYPES["mix"])
    assert AutoConfig.from_pretrained(path.parent, gguf_file=path.name).moe_intermediate_size == 768
    for quantize in ("gguf", "none"):
        engine = nsample.load(str(path), quantize=quantize)
        try:
            assert engine.quantize == quantize and engine.model.config.moe_intermediate_size == 256
            assert len(engine.generate("Hi", n=2, max_tokens=4, ignore_eos=True).choices[1].token_ids) == 4
        finally:
            engine.close()


def test_int8_activations_reach_the_experts_and_keep_the_seed_contract():
    """decode_activations="int8": the experts' projections decode on the int8-activation kernels (their formats have
    them), the float32 router does not, and a choice alone is the choice among others."""
    engine = nsample.load(str(tiny_gguf_file("qwen3moe")), decode_activations="int8")
    try:
        if not engine.int8_activations:
            pytest.skip("no int8-activation kernels on this CPU")
        paths = weights_report.describe(engine.model)["paths"]
        assert paths["mlp.experts.gate"] == "Q4_K blocks × int8 activations" and paths["mlp.gate"] == "F32 blocks"
        assert_choices_replay_alone(engine, [{"role": "user", "content": "Say hello."}], n=3, seed=5, max_tokens=16,
                                    ignore_eos=True)
    finally:
        engine.close()


def test_a_llama_file_with_experts_is_mixtral_and_one_that_does_not_say_how_many_a_token_uses_is_refused():
    """As llama.cpp: a Llama file's expert_count makes it Mixtral, whose expert_used_count it needs (no guess)."""
    from transformers import LlamaConfig

    from nsample.models import gguf_architectures

    config = gguf_architectures.specialize(LlamaConfig(), "llama", {"expert_count": 8, "expert_used_count": 2}.get)
    assert config.model_type == "mixtral" and (config.num_local_experts, config.num_experts_per_tok) == (8, 2)
    assert gguf_architectures.specialize(LlamaConfig(), "llama", {}.get).model_type == "llama"
    with pytest.raises(ValueError, match="no llama.expert_used_count"):
        gguf_architectures.specialize(LlamaConfig(), "llama", {"expert_count": 8}.get)


@pytest.mark.parametrize("arch", ["qwen3moe", "gpt-oss"])
@pytest.mark.parametrize("activations", ["float32", "int8"])
@torch.inference_mode()
def test_gate_and_up_fused_in_one_tensor_are_read_as_its_halves_in_place(tmp_path, arch, activations):
    """llama.cpp's converter can write the experts' gate and up as one tensor, ffn_gate_up_exps: each expert's gate
    rows, then its up rows (gpt-oss's biases alike), which llama.cpp's graph splits into halves. nsample reads the
    halves where the file holds them (views of the mapping, no copy) and computes the numbers of the same weights
    written apart, bitwise: the logits on the modules and every drawn token and logprob on the C++ layer.
    (llama-cpp-python 0.3.36 reads such files only for architectures nsample does not run; the files written apart
    are checked against llama.cpp above.)"""
    types = {kind: gq.Q4_K for kind in ("ffn_gate", "ffn_up", "ffn_gate_up")} | {"ffn_down": gq.Q6_K}  # of ffn_*_exps
    outputs = []
    for fused in (False, True):
        path = tiny_gguf.write_arch(tmp_path / f"tiny-{arch}-{fused}.gguf", arch, types, fused_gate_up=fused)
        engine = nsample.load(str(path), decode_activations=activations)
        try:
            if activations == "int8" and not engine.int8_activations:
                pytest.skip("no int8-activation kernels on this CPU")
            experts = [m for m in engine.model.modules() if isinstance(m, GGUFExperts)]
            assert experts and engine.runner.fused is not None
            for m in experts:
                gate, up = m.gate[3].blocks, m.up[3].blocks
                assert m.gate[3].format == m.up[3].format == "Q4_K" and m.down[3].format == "Q6_K"
                assert (up.data_ptr() - gate.data_ptr() == gate.numel()) == fused  # the next rows of one tensor
                assert gate.untyped_storage().data_ptr() == up.untyped_storage().data_ptr()  # the file's mapping
            logits = engine.model(IDS).logits[0]
            out = engine.generate("Say hello.", n=2, seed=3, max_tokens=12, ignore_eos=True, logprobs=True)
            outputs.append((logits, [(c.token_ids, [t.logprob for t in c.logprobs]) for c in out.choices]))
        finally:
            engine.close()
    (apart, apart_choices), (fused_logits, fused_choices) = outputs
    assert torch.equal(apart, fused_logits) and apart_choices == fused_choices
