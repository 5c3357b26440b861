"""Gemma 2 and 3 GGUF files loaded as their blocks (nsample/models/gguf_model.py), not as a float32 copy: llama.cpp's
converter stores their norms as 1 + w, and their embedding scales its rows by sqrt(hidden). The projections, the
embedding's rows and the norms are transformers' own bitwise, the logits within 1e-4 of its forward, greedy choices
those of transformers' float32 model of the file, and the seed contract holds."""
import ggml_quantizer as gq
import pytest
import tiny_gguf
import torch
from seed_contract import assert_choices_replay_alone
from transformers import AutoModelForCausalLM

import nsample
from nsample.cpu import kernels, weights_report
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear

pytestmark = pytest.mark.skipif(kernels.ops() is None or not gq.available(),
                                reason="no C++ kernels here, or no llama.cpp quantizer (llama-cpp-python)")
Q4_K_M = {"token_embd": gq.Q6_K, "attn_q": gq.Q4_K, "attn_k": gq.Q4_K, "attn_v": gq.Q6_K, "attn_output": gq.Q4_K,
          "ffn_gate": gq.Q4_K, "ffn_up": gq.Q4_K, "ffn_down": gq.Q6_K}  # as llama.cpp mixes a Q4_K_M file
PROMPTS = ["Write a short poem about the sea.", "What is 17 times 23?", "Name three colours.", "Say hello."]


@pytest.fixture(scope="module", params=["gemma2", "gemma3"])
def gemma(request, tmp_path_factory):
    """(path, the file as its blocks, the file through transformers' float32 conversion) for one Gemma version."""
    path = tiny_gguf.write_gemma(tmp_path_factory.mktemp("gemma") / f"tiny-{request.param}.gguf", request.param,
                                 Q4_K_M)
    fast, ref = nsample.load(str(path)), nsample.load(str(path), quantize="none")
    yield path, fast, ref
    fast.close()
    ref.close()


@torch.inference_mode()
def test_the_blocks_norms_and_embedding_rows_are_transformers_own_bitwise(gemma):
    path, fast, _ = gemma
    model = fast.model
    ref = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    assert fast.quantize == "gguf" and type(model) is type(ref)
    projections = {n: m for n, m in model.named_modules() if isinstance(m, GGUFLinear)}
    assert len(projections) == 2 * 7 + 1  # every projection and the (tied) LM head
    for name, m in projections.items():
        assert torch.equal(m.dequantize(), ref.get_submodule(name).weight), name
    norms = dict(model.named_parameters())
    assert norms and all("norm" in n for n in norms)  # nothing but norms is float32
    for name, p in norms.items():
        assert torch.equal(p, ref.get_parameter(name)), name  # 1 + w in the file, w here, as transformers has it
    embed = model.get_input_embeddings()
    assert isinstance(embed, GGUFEmbedding) and embed.scale.item() == pytest.approx(256 ** 0.5)
    ids = torch.tensor([[0, 5, 49151], [17, 17, 3]])
    assert torch.equal(embed(ids), ref.get_input_embeddings()(ids))  # rows times sqrt(hidden), as Gemma's own
    ids = torch.tensor([[1, 50, 700, 3000, 12, 9, 44, 1000, 2, 77, 5000, 300]])
    assert (model(ids).logits - ref(ids).logits).abs().max() < 1e-4
    assert weights_report.describe(model)["paths"]["embed_tokens"] == "Q6_K rows"


def test_greedy_choices_are_those_of_transformers_float32_model_of_the_file(gemma):
    _, fast, ref = gemma
    same = 0
    for p in PROMPTS:
        a, b = (e.generate([{"role": "user", "content": p}], n=2, temperature=0, max_tokens=24) for e in (ref, fast))
        assert a.choices[0].token_ids == a.choices[1].token_ids  # greedy: both choices alike
        same += a.choices[0].token_ids == b.choices[0].token_ids == b.choices[1].token_ids
    assert same >= len(PROMPTS) - 1  # float32 up to the order of sums: a near-tie may flip one


def test_the_seed_contract_holds_on_the_files_blocks(gemma):
    _, fast, _ = gemma
    assert_choices_replay_alone(fast, [{"role": "user", "content": "Write a short poem about the sea."}], n=4,
                                seed=11, max_tokens=24, ignore_eos=True)


def test_an_embedding_the_kernels_do_not_read_stays_float32_and_scaled(tmp_path):
    path = tiny_gguf.write_gemma(tmp_path / "tiny-gemma2-q3_k.gguf", "gemma2", {**Q4_K_M, "token_embd": 11})  # Q3_K
    engine = nsample.load(str(path))
    try:
        embed = engine.model.get_input_embeddings()
        assert type(embed).__name__ == "Gemma2TextScaledWordEmbedding" and embed.weight.dtype == torch.float32
        ref = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
        with torch.inference_mode():
            ids = torch.tensor([[0, 5, 49151]])
            assert torch.equal(embed(ids), ref.get_input_embeddings()(ids))  # its embed_scale made again, as its own
        assert weights_report.describe(engine.model)["paths"]["lm_head"] == "Q8_0 blocks"  # the tied head, rounded
        assert len(engine.generate("Hi", n=2, max_tokens=4, ignore_eos=True).choices[1].token_ids) == 4
    finally:
        engine.close()
