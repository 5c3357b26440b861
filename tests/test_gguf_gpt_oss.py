"""gpt-oss GGUF files as llama.cpp's converter writes them, loaded as their blocks: MXFP4 experts with a bias each
and a clamped SwiGLU, a router with a bias whose softmax runs over its top k, attention with biases and a learned sink
per head, every other layer in a sliding window. transformers' own GGUF loading cannot read these files (its config
misreads their YaRN keys; its tensor names are not llama.cpp's, so its float32 conversion leaves the experts and sinks
at random), so the references are llama.cpp's logits on a float32 file and transformers' GptOssForCausalLM given the
weights nsample expands (each bitwise gguf-py's dequantization: test_gguf_formats.py)."""
import pytest
import tiny_gguf
import torch
from gguf_fixtures import TYPES, assert_experts_kernel_is_the_modules_loop, llama_cpp_logits, needs_gguf, tiny_gguf_file
from seed_contract import assert_choices_replay_alone

import nsample
from nsample.cpu import gguf_linear, weights_report
from nsample.cpu.gguf_experts import GGUFExperts, GGUFRouter
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear
from nsample.errors import ModelMissing
from nsample.models import model_loader

pytestmark = needs_gguf
IDS = torch.randint(0, 49152, (40,), generator=torch.Generator().manual_seed(1))  # past the window of 16
YARN = {"scaling.type": "yarn", "scaling.factor": 32.0, "scaling.original_context_length": 64}  # as the released
# files' keys (their factor, a smaller original context)


@pytest.fixture(scope="module")
def engine():
    engine = nsample.load(str(tiny_gguf_file("gpt-oss")))
    yield engine
    engine.close()


def reference(model) -> torch.nn.Module:
    """transformers' GptOssForCausalLM (eager attention, its sinks) with `model`'s weights, expanded from its blocks."""
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32).eval()
    state = {}
    for name in ref.state_dict():
        parent, _, attr = name.rpartition(".")
        module = model.get_submodule(parent)
        if isinstance(module, GGUFRouter):
            module = module.linear
        if isinstance(module, GGUFLinear):
            state[name] = module.dequantize() if attr == "weight" else module.bias
        elif isinstance(module, GGUFEmbedding):
            state[name] = module(torch.arange(module.num_embeddings))
        elif isinstance(module, GGUFExperts):
            state[name] = _experts_tensor(module, attr)
        else:
            state[name] = getattr(module, attr)
    ref.load_state_dict(state, strict=True)
    return ref


def _experts_tensor(experts: GGUFExperts, attr: str) -> torch.Tensor:
    """GptOssExperts' parameter `attr`: gate and up interleaved in the last dimension, every matrix (in, out)."""
    def pair(gate, up):  # (E, ..., I) twice -> (E, ..., 2I), gate at even places
        return torch.stack([gate, up], dim=-1).flatten(-2)

    weights = {k: torch.stack([m.dequantize().T for m in getattr(experts, k)]) for k in ("gate", "up", "down")}
    biases = {k: torch.stack([m.bias for m in getattr(experts, k)]) for k in ("gate", "up", "down")}
    return {"gate_up_proj": pair(weights["gate"], weights["up"]), "down_proj": weights["down"],
            "gate_up_proj_bias": pair(biases["gate"], biases["up"]), "down_proj_bias": biases["down"]}[attr]


@pytest.mark.parametrize("rope", [None, YARN], ids=["plain", "yarn"])
@torch.inference_mode()
def test_the_logits_are_llama_cpps_on_a_float32_file(tmp_path, rope):
    """On float32 weights and KV cache the two engines agree to float32 noise, YaRN rotary included (truncated, as
    llama.cpp computes it); without the sinks, the window or the router's order the logits move far more."""
    path = tiny_gguf.write_arch(tmp_path / "tiny-gpt-oss-f32.gguf", "gpt-oss", {}, rope_scaling=rope)
    want = llama_cpp_logits(path, IDS.tolist())
    engine = nsample.load(str(path))
    try:
        model = engine.model
        assert model.config.sliding_window == 16 and model.config.layer_types[0] == "sliding_attention"
        assert model.config.rope_parameters["rope_type"] == ("yarn" if rope else "default")
        got = model(IDS[None]).logits[0]
        assert (got - want).abs().max() < 1e-4  # 7e-7 here
        moved = []
        for undo, redo in _changes(model):
            undo()
            moved.append(float((model(IDS[None]).logits[0] - want).abs().max()))
            redo()
    finally:
        engine.close()
    assert min(moved) > 1e-2, moved


def _changes(model):
    """(undo, redo) pairs, each taking one of gpt-oss's own parts out: the sinks, the window, the router's order."""
    attention = [layer.self_attn for layer in model.model.layers]
    routers = [m for m in model.modules() if isinstance(m, GGUFRouter)]
    sinks = [a.sinks.data.clone() for a in attention]

    def set_sinks(values):
        for a, v in zip(attention, values):
            a.sinks.data = v

    def set_window(w):  # the masks' (transformers' sliding masks read the config)
        model.config.sliding_window = w

    def set_order(first):
        for r in routers:
            r.top_k_first = first

    return [(lambda: set_sinks([torch.full_like(s, -1e4) for s in sinks]), lambda: set_sinks(sinks)),
            (lambda: set_window(1024), lambda: set_window(16)),
            (lambda: set_order(False), lambda: set_order(True))]


@torch.inference_mode()
def test_every_projection_is_on_the_files_blocks_and_the_logits_are_transformers_models(engine):
    model = engine.model
    assert engine.quantize == "gguf"
    layer = model.model.layers[0]
    assert isinstance(layer.mlp.router, GGUFRouter) and layer.mlp.router.linear.bias is not None
    experts = layer.mlp.experts
    assert isinstance(experts, GGUFExperts)
    assert {m.format for k in ("gate", "up", "down") for m in getattr(experts, k)} == {"MXFP4"}
    assert all(m.bias is not None for m in experts.down)
    params = dict(model.named_parameters())
    assert params and all("norm" in n or n.endswith((".bias", ".sinks")) for n in params)
    report = weights_report.describe(model)
    paths = report["paths"]
    assert paths["mlp.experts.gate"] == "MXFP4 blocks" and paths["self_attn.q_proj"] == "Q4_K blocks"
    expert_bytes = sum(m.blocks.numel() for layer in model.model.layers for kind in ("gate", "up", "down")
                       for m in getattr(layer.mlp.experts, kind))
    assert report["token_bytes"] == report["decode_bytes"] - expert_bytes * (1 - 2 / 8)  # a token reads 2 of 8
    ref = reference(model)
    assert (model(IDS[None]).logits - ref(IDS[None]).logits).abs().max() < 1e-4


@torch.inference_mode()
def test_the_decode_kernel_is_the_modules_sums_bitwise_and_each_row_its_own(engine):
    """csrc/moe.cpp with gpt-oss's biases and clamped SwiGLU against GGUFExperts' loop over its GGUFLinear experts
    (both on the decode kernels), on rows of a scale at which the clamps bind; a row alone gets the numbers it gets
    among others."""
    experts = engine.model.model.layers[1].mlp.experts
    x = assert_experts_kernel_is_the_modules_loop(experts, scale=30)
    with gguf_linear.decoding():
        assert experts.gate[0](x).max() > 7  # the clamp binds


@torch.inference_mode()
def test_greedy_choices_are_transformers_models_argmax_at_every_step(engine):
    """Each greedy token is the argmax of transformers' model on the prompt and the tokens before it, but where its
    top two are within float32 noise of each other."""
    ref = reference(engine.model)
    for prompt in ("Write a short poem about the sea.", "What is 17 times 23?", "Name three colours."):
        result = engine.generate([{"role": "user", "content": prompt}], n=2, temperature=0, max_tokens=24,
                                 ignore_eos=True)
        tokens = result.choices[0].token_ids
        assert result.choices[1].token_ids == tokens and len(tokens) == 24
        ids = torch.tensor([result.prompt_token_ids + tokens])
        logits = ref(ids).logits[0, len(result.prompt_token_ids) - 1:-1]  # (24, V): what predicts each token
        top2 = logits.topk(2, dim=-1).values
        chosen = logits.gather(1, torch.tensor(tokens)[:, None])[:, 0]
        assert bool(((chosen == top2[:, 0]) | (top2[:, 0] - top2[:, 1] < 1e-4)).all())


def test_the_seed_contract_holds(engine):
    assert_choices_replay_alone(engine, [{"role": "user", "content": "Write a short poem about the sea."}], n=4,
                                seed=11, max_tokens=24, ignore_eos=True)


def test_int8_activations_reach_the_mxfp4_experts_and_keep_the_seed_contract():
    """The experts decode on the int8-activation kernels (in csrc/moe.cpp too), the float32 router does not."""
    engine = nsample.load(str(tiny_gguf_file("gpt-oss")), decode_activations="int8")
    try:
        if not engine.int8_activations:
            pytest.skip("no int8-activation kernels on this CPU")
        paths = weights_report.describe(engine.model)["paths"]
        assert paths["mlp.experts.gate"] == "MXFP4 blocks × int8 activations"
        assert paths["self_attn.q_proj"] == "Q4_K blocks × int8 activations" and paths["mlp.router"] == "F32 blocks"
        assert_choices_replay_alone(engine, [{"role": "user", "content": "Say hello."}], n=3, seed=5, max_tokens=16,
                                    ignore_eos=True)
    finally:
        engine.close()


def test_transformers_float32_conversion_is_refused_not_left_at_random(tmp_path):
    path = tiny_gguf.write_arch(tmp_path / "tiny-gpt-oss.gguf", "gpt-oss", TYPES["mix"])
    with pytest.raises(ModelMissing, match=r"reads no tensor for .*experts.*quantize='auto' or 'gguf'"):
        nsample.load(str(path), quantize="none")
    assert not (model_loader._converted_folder(path) / "config.json").exists()  # no random model cached either


def test_the_glu_is_transformers_own_where_its_clamps_bind():
    """Gates and ups of ±20, far past the clamp of 7 (a tiny random model's stay inside it): bitwise GptOssExperts'."""
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    from nsample.cpu.gguf_experts import clamped_swiglu

    config = GptOssConfig(hidden_size=8, intermediate_size=64, num_local_experts=1)
    gate, up = (torch.randn(5, 64, generator=torch.Generator().manual_seed(s)) * 20 for s in (0, 1))
    want = GptOssExperts(config)._apply_gate(torch.stack([gate, up], dim=-1).flatten(-2))
    assert torch.equal(clamped_swiglu(gate, up, config.swiglu_alpha, config.swiglu_limit), want)
    assert not torch.equal(clamped_swiglu(gate, up, config.swiglu_alpha, 1e9), want)
