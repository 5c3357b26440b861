"""A GGUF's linear or YaRN rope scaling keys (nsample/models/rope_scaling.py), which transformers' GGUF config ignores,
rotate the model on both load paths as llama.cpp rotates it: the rotary tables and logits are transformers' own model
with those rope parameters, the logits llama.cpp's own (llama-cpp-python on the same file) to its float32 noise, and
what cannot be rotated so is refused."""
import pytest
import tiny_gguf
import torch
from ggml_quantizer import F32
from gguf_fixtures import TYPES, engine_pair, llama_cpp_logits, needs_gguf, scaled_reference
from transformers import AutoConfig, AutoModelForCausalLM

import nsample

pytestmark = needs_gguf
SCALINGS = {  # the file's keys ({arch}.rope.<key>) and the rope parameters they mean
    "linear": ({"scaling.type": "linear", "scaling.factor": 4.0}, {"rope_type": "linear", "factor": 4.0}),
    "yarn": ({"scaling.type": "yarn", "scaling.factor": 4.0, "scaling.original_context_length": 64},
             {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    "old linear": ({"scale_linear": 2.0}, {"rope_type": "linear", "factor": 2.0}),
}
IDS = torch.arange(1, 1 + 200).mul(151).remainder(49000)[None]  # 200 positions, past YaRN's original 64


def scaled_file(root, kind: str, types=TYPES["mix"]):
    return tiny_gguf.write(root / f"tiny-{kind.replace(' ', '-')}.gguf", types, rope_scaling=SCALINGS[kind][0])


@pytest.mark.parametrize("quantize", ["gguf", "none"])  # the file's blocks; transformers' float32 conversion
@pytest.mark.parametrize("kind", list(SCALINGS))
@torch.inference_mode()
def test_the_rotary_tables_and_logits_are_transformers_scaled_ones(tmp_path, kind, quantize):
    path = scaled_file(tmp_path, kind)
    plain, scaled = scaled_reference(path, SCALINGS[kind][1])
    engine = nsample.load(str(path), quantize=quantize)
    try:
        assert engine.quantize == quantize
        rotary, want = engine.model.model.rotary_emb, scaled.model.rotary_emb
        assert not torch.equal(want.inv_freq, plain.model.rotary_emb.inv_freq)  # the scaling changes frequencies
        assert torch.equal(rotary.inv_freq, want.inv_freq) and rotary.attention_scaling == want.attention_scaling
        assert engine.model.config.rope_parameters["rope_type"] == SCALINGS[kind][1]["rope_type"]
        logits = engine.model(IDS).logits
        assert (logits - plain(IDS).logits).abs().max() > 1e-2  # unscaled: another model
        assert (logits - scaled(IDS).logits).abs().max() < 1e-4
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["linear", "yarn"])
@torch.inference_mode()
def test_the_logits_are_llama_cpps_on_the_same_file(tmp_path, kind):
    """llama.cpp (float32 weights and KV cache) rotates by the same keys: nsample's logits are its own to the
    float32 noise both engines show on an unscaled file, where unscaled logits are tens away."""
    path = scaled_file(tmp_path, kind, F32)
    want = llama_cpp_logits(path, IDS[0].tolist())
    engine = nsample.load(str(path))
    try:
        assert engine.quantize == "gguf"
        got = engine.model(IDS).logits[0]
    finally:
        engine.close()
    plain, _ = scaled_reference(path, SCALINGS[kind][1])
    assert (plain(IDS).logits[0] - want).abs().max() > 10  # the unscaled model is far away
    assert (got - want).abs().max() < 2e-2 * want.abs().max() / 40  # some 2e-2 of logits near 40: the float32 noise


@pytest.mark.parametrize("keys, says", [
    ({"scaling.type": "longrope", "scaling.factor": 4.0}, "'longrope'.* is not supported"),
    ({"scaling.type": "yarn", "scaling.factor": 4.0, "scaling.yarn_log_multiplier": 0.1}, "yarn_log_multiplier"),
    ({"scaling.type": "yarn", "scaling.factor": 4.0, "scaling.attn_factor": 0.5}, "attn_factor"),
])
def test_a_scaling_that_cannot_be_rotated_as_llama_cpp_does_is_refused(tmp_path, keys, says):
    path = tiny_gguf.write(tmp_path / "tiny-odd.gguf", TYPES["mix"], rope_scaling=keys)
    for quantize in ("gguf", "none"):
        with pytest.raises(ValueError, match=says):
            nsample.load(str(path), quantize=quantize)


def test_an_unscaled_file_and_a_factor_of_one_keep_the_plain_frequencies(tmp_path):
    for name, keys in [("plain", None), ("yarn-1", {"scaling.type": "yarn", "scaling.factor": 1.0})]:
        path = tiny_gguf.write(tmp_path / f"tiny-{name}.gguf", TYPES["mix"], rope_scaling=keys)
        plain = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
        engine = nsample.load(str(path))
        try:
            assert torch.equal(engine.model.model.rotary_emb.inv_freq, plain.model.rotary_emb.inv_freq)
            assert engine.model.config.rope_parameters["rope_type"] == "default"
        finally:
            engine.close()


def test_greedy_choices_on_the_blocks_are_those_of_the_float32_conversion(tmp_path):
    """The fused decode (its cos and sin from the rebuilt rotary embedding, YaRN's attention factor in them) and
    transformers' modules on the float32 conversion choose alike past the original context."""
    path = scaled_file(tmp_path, "yarn")
    prompt = " ".join(["The sea is wide and the ships are slow."] * 8)  # some 80 tokens: past the original 64
    with engine_pair(path) as (fast, ref):
        a, b = (e.generate(prompt, n=2, temperature=0, max_tokens=16, ignore_eos=True) for e in (fast, ref))
        assert fast.quantize == "gguf" and a.usage.prompt_tokens > 64
        assert a.choices[0].token_ids == a.choices[1].token_ids == b.choices[0].token_ids


@pytest.mark.parametrize("quantize", ["gguf", "none"])
@torch.inference_mode()
def test_gemma3s_linear_scaling_applies_to_its_full_attention_layers_alone(tmp_path, quantize):
    """Gemma 3 files (4B and up) carry linear scaling 8; llama.cpp scales the full-attention layers' rotation only,
    and so does transformers' Gemma 3 with the hub model's rope_scaling (its rope parameters per layer type)."""
    path = tiny_gguf.write_arch(tmp_path / "tiny-gemma3-linear.gguf", "gemma3", TYPES["mix"], layers=6,
                                rope_scaling={"scaling.type": "linear", "scaling.factor": 8.0})  # layer 6: full
    plain = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    config.query_pre_attn_scalar = config.head_dim  # llama.cpp's, which transformers' GGUF config leaves at 256
    full = config.rope_parameters["full_attention"]
    config.rope_parameters = {**config.rope_parameters, "full_attention": {**full, "rope_type": "linear",
                                                                           "factor": 8.0}}
    scaled = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    scaled.load_state_dict(plain.state_dict())
    engine = nsample.load(str(path), quantize=quantize)
    try:
        rotary, want, before = engine.model.model.rotary_emb, scaled.model.rotary_emb, plain.model.rotary_emb
        assert torch.equal(rotary.full_attention_inv_freq, before.full_attention_inv_freq / 8)
        assert torch.equal(rotary.sliding_attention_inv_freq, before.sliding_attention_inv_freq)
        assert torch.equal(rotary.full_attention_inv_freq, want.full_attention_inv_freq)
        ids = IDS[:, :80]
        logits = engine.model(ids).logits
        assert (logits - plain(ids).logits).abs().max() > 1e-2
        assert (logits - scaled(ids).logits).abs().max() < 1e-4
    finally:
        engine.close()


@pytest.mark.parametrize("quantize", ["gguf", "none"])
@torch.inference_mode()
def test_olmo3s_yarn_turns_its_full_attention_layers_alone_as_llama_cpp(tmp_path, quantize):
    """OLMo 3 files (OLMo 2's architecture with a sliding window) carry YaRN; llama.cpp turns its sliding layers
    unscaled, and so does transformers' OLMo 3 with the scaling on its full-attention layers. Both load paths give
    llama.cpp's logits past the window (64) and the original context (32), and the scaling moves them."""
    ids = torch.arange(1, 1 + 100).mul(151).remainder(49000)
    keys = {"scaling.type": "yarn", "scaling.factor": 4.0, "scaling.original_context_length": 32}
    path = tiny_gguf.write_arch(tmp_path / "tiny-olmo3-yarn.gguf", "olmo3", {}, layers=4, rope_scaling=keys)
    plain = tiny_gguf.write_arch(tmp_path / "tiny-olmo3.gguf", "olmo3", {}, layers=4)
    want = llama_cpp_logits(path, ids.tolist())
    assert (want - llama_cpp_logits(plain, ids.tolist())).abs().max() > 1e-2
    engine = nsample.load(str(path), quantize=quantize)
    try:
        rope = engine.model.config.rope_parameters
        assert rope["sliding_attention"]["rope_type"] == "default" and rope["full_attention"]["rope_type"] == "yarn"
        assert (engine.model(ids[None]).logits[0] - want).abs().max() < 5e-5
    finally:
        engine.close()


def test_a_scaling_transformers_read_itself_is_kept():
    """transformers' GGUF config reads gpt-oss's YaRN itself (with truncate=False, which the file's keys do not
    say): its parameters stay as transformers made them."""
    from transformers import LlamaConfig

    from nsample.models import rope_scaling

    own = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096, "truncate": False,
           "rope_theta": 150000.0}
    config = LlamaConfig(rope_parameters=dict(own))
    rope_scaling.configure(config, {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096})
    assert config.rope_parameters == own
    plain = LlamaConfig(rope_parameters={"rope_type": "default", "rope_theta": 150000.0})
    rope_scaling.configure(plain, {"rope_type": "linear", "factor": 2.0})
    assert plain.rope_parameters == {"rope_type": "linear", "factor": 2.0, "rope_theta": 150000.0}


@torch.inference_mode()
def test_apply_rebuilds_the_rotary_of_a_model_made_unscaled_and_leaves_a_scaled_one(tmp_path):
    """A float32 conversion made before the scaling was read (its config unscaled) gets it at load, its rotary
    embedding made again; a model already scaled is left as it is."""
    from nsample.models import rope_scaling

    params = SCALINGS["yarn"][1]
    plain, scaled = scaled_reference(scaled_file(tmp_path, "yarn"), params)
    rope_scaling.apply(plain, params)
    assert torch.equal(plain.model.rotary_emb.inv_freq, scaled.model.rotary_emb.inv_freq)
    assert plain.model.rotary_emb.attention_scaling == scaled.model.rotary_emb.attention_scaling
    assert (plain(IDS).logits - scaled(IDS).logits).abs().max() < 1e-4
    rotary = scaled.model.rotary_emb
    rope_scaling.apply(scaled, params)
    assert scaled.model.rotary_emb is rotary
