"""GGUF files of other architectures than Llama loaded as their blocks (nsample/models/gguf_model.py), not as a float32
copy: Gemma 2 and 3, whose norms llama.cpp's converter stores as 1 + w and whose embedding scales its rows by
sqrt(hidden), Qwen 3, whose q and k heads each have an RMSNorm, Phi 3, whose q|k|v and gate|up are each one tensor,
SmolLM3, which transformers' GGUF loading refused (gguf_architectures.py), every fourth layer without a rotary embedding
(those three decoded in the fused C++ layers: their steps are tested in test_fused_decode.py), Granite, refused too,
with its four multipliers, OLMo 2 (refused too: post-norms, q/k norms over all heads) and OLMo 3 (an OLMo 2 file with a
sliding window, three layers of four). The projections, the embedding's rows and the norms are transformers' own
bitwise, the logits within 1e-4 of its forward, greedy choices those of transformers' float32 model of the file, and the
seed contract holds."""
import ggml_quantizer as gq
import pytest
import tiny_gguf
import torch
from gguf_fixtures import TYPES, engine_pair, llama_cpp_logits, tiny_gguf_file
from seed_contract import assert_choices_replay_alone
from transformers import AutoConfig, AutoModelForCausalLM

import nsample
from nsample.cpu import kernels, weights_report
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear
from nsample.models import gguf_model
from nsample.models.embedded import cache_dir

pytestmark = pytest.mark.skipif(kernels.ops() is None or not gq.available(),
                                reason="no C++ kernels here, or no llama.cpp quantizer (llama-cpp-python)")
Q4_K_M = TYPES["mix"]
PROMPTS = ["Write a short poem about the sea.", "What is 17 times 23?", "Name three colours.", "Say hello."]


@pytest.fixture(scope="module", params=["gemma2", "gemma3", "qwen3", "phi3", "smollm3", "granite", "olmo2",
                                                     "olmo3"])
def arch(request):
    """(path, the file as its blocks, the file through transformers' float32 conversion) for one architecture."""
    path = tiny_gguf_file(request.param)
    with engine_pair(path) as (fast, ref):
        yield path, fast, ref


@torch.inference_mode()
def test_the_blocks_norms_and_embedding_rows_are_transformers_own_bitwise(arch):
    path, fast, _ = arch
    model = fast.model
    config = AutoConfig.from_pretrained(gguf_model.metadata(path, cache_dir()))  # with what transformers misses
    if config.model_type == "olmo3":  # transformers reads an OLMo 2 file as OLMo 2: its weights, in OLMo 3's model
        weights = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).state_dict()
        ref = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
        ref.load_state_dict(weights)
    else:
        ref = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, config=config,
                                                   dtype=torch.float32).eval()
    assert fast.quantize == "gguf" and type(model) is type(ref)
    projections = {n: m for n, m in model.named_modules() if isinstance(m, GGUFLinear)}
    assert set(projections) == {n for n, m in ref.named_modules() if type(m) is torch.nn.Linear}  # and the head
    for name, m in projections.items():
        assert torch.equal(m.dequantize(), ref.get_submodule(name).weight), name
    norms = dict(model.named_parameters())
    assert norms and all("norm" in n for n in norms)  # nothing but norms is float32
    for name, p in norms.items():
        assert torch.equal(p, ref.get_parameter(name)), name  # 1 + w in the file, w here, as transformers has it
    embed = model.get_input_embeddings()
    assert isinstance(embed, GGUFEmbedding)
    if "gemma" in path.name:
        assert embed.scale.item() == pytest.approx(256 ** 0.5)
    else:
        assert embed.scale is None
    ids = torch.tensor([[0, 5, 49151], [17, 17, 3]])
    assert torch.equal(embed(ids), ref.get_input_embeddings()(ids))  # Gemma's: rows times sqrt(hidden), as its own
    ids = torch.tensor([[1, 50, 700, 3000, 12, 9, 44, 1000, 2, 77, 5000, 300]])
    assert (model(ids).logits - ref(ids).logits).abs().max() < 1e-4
    assert weights_report.describe(model)["paths"]["embed_tokens"] == "Q6_K rows"


def test_greedy_choices_are_those_of_transformers_float32_model_of_the_file(arch):
    _, fast, ref = arch
    same = 0
    for p in PROMPTS:
        a, b = (e.generate([{"role": "user", "content": p}], n=2, temperature=0, max_tokens=24) for e in (ref, fast))
        assert a.choices[0].token_ids == a.choices[1].token_ids  # greedy: both choices alike
        same += a.choices[0].token_ids == b.choices[0].token_ids == b.choices[1].token_ids
    assert same >= len(PROMPTS) - 1  # float32 up to the order of sums: a near-tie may flip one


def test_the_seed_contract_holds_on_the_files_blocks(arch):
    _, fast, _ = arch
    assert_choices_replay_alone(fast, [{"role": "user", "content": "Write a short poem about the sea."}], n=4,
                                seed=11, max_tokens=24, ignore_eos=True)


def test_an_embedding_the_kernels_do_not_read_stays_float32_and_scaled(tmp_path):
    path = tiny_gguf.write_arch(tmp_path / "tiny-gemma2-tq2_0.gguf", "gemma2", {**Q4_K_M, "token_embd": gq.TQ2_0})
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


@torch.inference_mode()
def test_a_qwen3_file_of_another_head_size_loads_with_its_own(tmp_path):
    """transformers' GGUF config reads no head size for Qwen 3 and assumes 128 (its own load of this file fails on
    the shapes); nsample reads the file's (attention.key_length, 64 here) on both load paths."""
    path = tiny_gguf.write_arch(tmp_path / "tiny-qwen3-64.gguf", "qwen3", Q4_K_M, head_dim=64)
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    assert config.head_dim == 128
    config.head_dim = 64
    ref = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, config=config,
                                               dtype=torch.float32).eval()
    ids = torch.tensor([[1, 50, 700, 3000, 12, 9, 44, 1000, 2, 77, 5000, 300]])
    for quantize in ("gguf", "none"):
        engine = nsample.load(str(path), quantize=quantize)
        try:
            assert engine.quantize == quantize and engine.model.config.head_dim == 64
            assert (engine.model(ids).logits - ref(ids).logits).abs().max() < 1e-4
            assert len(engine.generate("Hi", n=2, max_tokens=4, ignore_eos=True).choices[1].token_ids) == 4
        finally:
            engine.close()


IDS = torch.arange(1, 1 + 100).mul(151).remainder(49000)  # 100 positions: past the tiny windows (64, 16)


@pytest.mark.parametrize("name", list(tiny_gguf.ARCHS))
@torch.inference_mode()
def test_the_logits_are_llama_cpps_on_a_float32_file(tmp_path, name):
    """llama.cpp (llama-cpp-python, float32 weights and KV cache) on the same file. Gemma's GELU is its float16 table
    in llama.cpp, some 5e-4 of logits near 1.7; the others agree to float32's noise. The tiny Gemmas' head size (64)
    is not 256, the attention scale transformers' GGUF config assumed: their logits were 0.16 and 1.1 away."""
    path = tiny_gguf.write_arch(tmp_path / f"tiny-{name}-f32.gguf", name, {}, layers=tiny_gguf.MIN_LAYERS.get(name, 2))
    want = llama_cpp_logits(path, IDS.tolist())
    engine = nsample.load(str(path))
    try:
        assert engine.quantize == "gguf"
        got = engine.model(IDS[None]).logits[0]
    finally:
        engine.close()
    assert (got - want).abs().max() < (2e-3 if name.startswith("gemma") else 5e-5)


@torch.inference_mode()
def test_a_27b_gemma_scales_its_queries_by_hidden_over_heads_as_llama_cpp(tmp_path):
    """llama.cpp tells Gemma 3 27B by its 62 layers and scales its queries by 1/sqrt(hidden / heads) (168 there, its
    head size 128); so does nsample, on a tiny file of 62 layers whose head size (32) is not hidden / heads (64).
    Through 62 layers llama.cpp's float16 GELU drifts (some 0.07 of logits near 1.8, on average); scaled by the head
    size the logits are six times as far."""
    path = tiny_gguf.write_arch(tmp_path / "tiny-gemma3-62.gguf", "gemma3", {}, layers=62, head_dim=32)
    want = llama_cpp_logits(path, IDS[:40].tolist())
    engine = nsample.load(str(path))
    try:
        assert engine.model.config.query_pre_attn_scalar == 64
        got = engine.model(IDS[None, :40]).logits[0]
        for layer in engine.model.model.layers:
            layer.self_attn.scaling = 32 ** -0.5  # the head size's scale, as transformers' config had it (256)
        other = engine.model(IDS[None, :40]).logits[0]
    finally:
        engine.close()
    assert (got - want).abs().mean() < 0.15 and (other - want).abs().mean() > 3 * (got - want).abs().mean()
