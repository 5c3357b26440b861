"""A Llama 3 GGUF's rotary frequency factors (rope_freqs.weight: its "llama3" rope scaling as llama.cpp's converter
writes it) divide the model's rotary frequencies on both load paths (nsample/models/rope_factors.py): the logits are
those of transformers' own llama3-scaled model of the same weights, which transformers' GGUF loading alone is not."""
import pytest
import tiny_gguf
import torch
from gguf_fixtures import TYPES, engine_pair, needs_gguf, scaled_reference
from transformers import AutoModelForCausalLM

import nsample

pytestmark = needs_gguf
LLAMA3 = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=256)
IDS = torch.arange(1, 1 + 320).mul(151).remainder(49000)[None]  # 320 positions, past the original context of 256


@pytest.fixture(scope="module")
def llama3_file(tmp_path_factory):
    return tiny_gguf.write(tmp_path_factory.mktemp("llama3") / "tiny-llama3.gguf", TYPES["mix"], llama3=LLAMA3)


@pytest.fixture(scope="module")
def models(llama3_file):
    """(transformers' float32 model of the file, which ignores the factors; the same weights in transformers' own
    llama3-scaled Llama)."""
    return scaled_reference(llama3_file, {"rope_type": "llama3", **LLAMA3})


@pytest.mark.parametrize("quantize", ["gguf", "none"])  # the file's blocks; transformers' float32 conversion
@torch.inference_mode()
def test_the_rotary_frequencies_and_logits_are_transformers_llama3_ones(llama3_file, models, quantize):
    plain, scaled = models
    engine = nsample.load(str(llama3_file), quantize=quantize)
    try:
        model = engine.model
        assert engine.quantize == quantize
        inv_freq, want = model.model.rotary_emb.inv_freq, scaled.model.rotary_emb.inv_freq
        assert not torch.equal(want, plain.model.rotary_emb.inv_freq)  # the scaling changes some frequencies
        factors = tiny_gguf.llama3_factors(64, plain.config.rope_parameters["rope_theta"], **LLAMA3)
        assert torch.equal(inv_freq, plain.model.rotary_emb.inv_freq / factors)  # llama.cpp's: theta / factor
        assert torch.allclose(inv_freq, want, rtol=2e-7, atol=0)  # transformers' llama3 formula, to a float32 ulp
        logits = model(IDS).logits
        assert (logits - plain(IDS).logits).abs().max() > 1e-2  # without the factors: another model
        assert (logits - scaled(IDS).logits).abs().max() < 1e-3  # the ulp, turned 320 times at the highest frequency
        own, scaled.model.rotary_emb.inv_freq = want, inv_freq.clone()
        try:  # transformers' llama3 model on llama.cpp's frequencies: the rest of the model alike
            assert (logits - scaled(IDS).logits).abs().max() < 1e-4
        finally:
            scaled.model.rotary_emb.inv_freq = own
    finally:
        engine.close()


def test_greedy_choices_on_the_blocks_are_those_of_the_float32_conversion(llama3_file):
    prompt = " ".join(["The sea is wide and the ships are slow."] * 30)  # some 300 tokens: the scaled range
    with engine_pair(llama3_file) as (fast, ref):
        a, b = (e.generate(prompt, n=2, temperature=0, max_tokens=16, ignore_eos=True) for e in (fast, ref))
        assert fast.quantize == "gguf" and a.usage.prompt_tokens > 256
        assert a.choices[0].token_ids == a.choices[1].token_ids == b.choices[0].token_ids


def test_a_file_without_factors_keeps_the_plain_frequencies(tmp_path):
    path = tiny_gguf.write(tmp_path / "tiny-plain.gguf", TYPES["mix"])
    plain = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    engine = nsample.load(str(path))
    try:
        assert torch.equal(engine.model.model.rotary_emb.inv_freq, plain.model.rotary_emb.inv_freq)
    finally:
        engine.close()
