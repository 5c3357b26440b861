"""A hub model's or folder's weights as its checkpoint stores them, in the C++ kernels (quantize auto or rows):
each weight's rows in the narrowest exact type, the fused decode on them (experts and partial rotaries included), the
float32 model's numbers up to the order of sums, and the seed contract; quantize none keeps transformers' modules,
and rows where it cannot run is an error."""
import pytest
import torch
from gguf_fixtures import HAS_GGUF
from seed_contract import assert_choices_replay_alone
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM

import nsample
from nsample.cpu import kernels, weights_report
from nsample.cpu.checkpoint_rows import exact_rows
from nsample.cpu.gguf_experts import GGUFExperts
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear
from nsample.cpu.quantize import resolve_quantize
from nsample.cpu.whole_head_rotary import WholeHeadRotary
from nsample.models.embedded import embedded_gguf
from nsample.models.model_loader import as_rows
from nsample.models.tiny_model import tiny_model

needs_kernels = pytest.mark.skipif(kernels.ops() is None, reason="no C++ kernels here")
SHAPE = dict(vocab_size=49152, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, max_position_embeddings=2048, rms_norm_eps=1e-6)
FAMILIES = {  # a tied and an untied head, q/k norms, biases, Gemma's scaled embedding, experts, a partial rotary
    "llama": ("llama", dict(tie_word_embeddings=True)),
    "qwen2": ("qwen2", dict(tie_word_embeddings=False)),  # q/k/v biases
    "qwen3": ("qwen3", dict(tie_word_embeddings=True)),
    "gemma3": ("gemma3_text", dict(sliding_window=16)),
    "phi3": ("phi3", dict(pad_token_id=0, tie_word_embeddings=False)),  # q|k|v and gate|up each one projection
    "phi4mini": ("phi3", dict(pad_token_id=0, partial_rotary_factor=0.5, tie_word_embeddings=True)),  # whole heads
    "qwen3moe": ("qwen3_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                                   tie_word_embeddings=False)),  # experts as transformers' fused 3-D parameters
    "qwen2moe": ("qwen2_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                                   shared_expert_intermediate_size=128, tie_word_embeddings=False)),
    "mixtral": ("mixtral", dict(num_local_experts=4, num_experts_per_tok=2, tie_word_embeddings=False)),
}
PROMPTS = ["The capital of France is", "Once upon a time"]


def folder(tmp_path_factory, family: str, dtype: torch.dtype):
    """A tiny random model of `family` (FAMILIES) saved as a checkpoint of `dtype`, with the embedded model's
    tokenizer."""
    _, tokenizer = tiny_model()
    torch.manual_seed(0)
    model_type, config = FAMILIES[family]
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **SHAPE | config))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)  # norms and biases too, so that each weighs in
    path = tmp_path_factory.mktemp(f"{family}-{str(dtype).removeprefix('torch.')}")
    model.to(dtype).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("dtype, type_name", [(torch.bfloat16, "BF16"), (torch.float16, "F16")])
def test_rows_keep_each_weight_bit_for_bit_in_the_narrowest_exact_type(dtype, type_name):
    w = (torch.randn(64, 96) * 3).to(dtype)
    for given in (w, w.float()):  # as stored, or upcast by transformers
        raw, type_id = exact_rows(given)
        assert type_id == {"BF16": 30, "F16": 1}[type_name] and raw.shape == (64, 96 * 2)
        if HAS_GGUF:
            assert torch.equal(GGUFLinear(raw, type_id, 96).dequantize(), w.float())
    assert exact_rows(w)[0].data_ptr() == w.data_ptr()  # as stored: not copied
    raw, type_id = exact_rows(torch.randn(64, 96))  # float32 that neither holds: kept
    assert type_id == 0 and raw.shape == (64, 96 * 4)
    with pytest.raises(ValueError, match="row type"):
        exact_rows(torch.zeros(4, 32, dtype=torch.int8))


@needs_kernels
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_bf16_folder_decodes_on_its_rows_as_the_float32_model(tmp_path_factory, family):
    path = folder(tmp_path_factory, family, torch.bfloat16)
    ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    engine = nsample.load(str(path), quantize="rows")  # auto's too, but on a CPU with AMX (int8 there)
    try:
        assert engine.quantize == "rows" and engine.runner.fused is not None
        model = engine.model
        assert any(type(m) is GGUFExperts for m in model.modules()) == ("moe" in family or family == "mixtral")
        assert isinstance(model.model.rotary_emb, WholeHeadRotary) == (family == "phi4mini")
        linears = [m for m in model.modules() if type(m) is GGUFLinear]
        assert linears and {m.format for m in linears} == {"BF16"} and not any(
            type(m) is nn.Linear for m in model.modules())
        assert type(model.get_input_embeddings()) is GGUFEmbedding and model.dtype == torch.float32
        head, embed = model.get_output_embeddings(), model.get_input_embeddings()
        assert (head.blocks.data_ptr() == embed.blocks.data_ptr()) == ref.config.tie_word_embeddings
        read = sum(p.numel() for n, p in ref.named_parameters() if "norm" not in n and "bias" not in n)
        if not ref.config.tie_word_embeddings:  # a step reads the head, not the embedding (a row a token)
            read -= ref.get_input_embeddings().weight.numel()
        assert weights_report.describe(model)["decode_bytes"] == 2 * read  # two bytes a weight
        ids = torch.tensor([[1, 504, 3458, 282, 4649, 314, 30, 2030]])
        with torch.no_grad():  # the prefill (the kernels' expanded tiles)
            want, got = ref(ids).logits, model(ids).logits
        assert (got - want).abs().max() < 1e-4 * want.abs().max()
        for prompt in PROMPTS:  # the decode steps (the fused C++ layers): the chosen tokens' logprobs
            choice = engine.generate(prompt, temperature=0, max_tokens=8, ignore_eos=True, logprobs=True).choices[0]
            seq = torch.tensor([engine.tokenizer(prompt).input_ids + choice.token_ids])
            with torch.no_grad():
                logp = torch.log_softmax(ref(seq).logits[0, -len(choice.token_ids) - 1:-1], -1)
            assert choice.token_ids == logp.argmax(-1).tolist()
            assert max(abs(x.logprob - logp[i, t].item()) for i, (x, t) in
                       enumerate(zip(choice.logprobs, choice.token_ids))) < 1e-4
    finally:
        engine.close()


@needs_kernels
@pytest.mark.parametrize("family", ["qwen3", "qwen3moe"])
def test_the_seed_contract_holds_on_a_checkpoints_rows(tmp_path_factory, family):
    engine = nsample.load(str(folder(tmp_path_factory, family, torch.bfloat16)), quantize="rows")
    try:
        assert engine.quantize == "rows"
        assert_choices_replay_alone(engine, "Write a short poem about the sea.", n=4, seed=11, max_tokens=24,
                                    ignore_eos=True)
    finally:
        engine.close()


@needs_kernels
def test_float16_and_float32_checkpoints_keep_their_own_type_and_none_keeps_transformers(tmp_path_factory):
    for dtype, name in ((torch.float16, "F16"), (torch.float32, "F32")):
        engine = nsample.load(str(folder(tmp_path_factory, "llama", dtype)), quantize="rows")
        try:
            assert {m.format for m in engine.model.modules() if type(m) is GGUFLinear} == {name}
        finally:
            engine.close()
    engine = nsample.load(str(folder(tmp_path_factory, "llama", torch.bfloat16)), quantize="none")
    try:
        assert engine.quantize == "none" and engine.runner.fused is None
        assert not any(type(m) is GGUFLinear for m in engine.model.modules())
    finally:
        engine.close()


@needs_kernels
def test_rows_where_they_cannot_run_is_an_error(tmp_path_factory):
    path = str(folder(tmp_path_factory, "llama", torch.bfloat16))
    with pytest.raises(ValueError, match="float32 activations"):
        nsample.load(path, quantize="rows", dtype="bfloat16")
    with pytest.raises(ValueError, match=r"\.gguf file"):
        nsample.load(str(embedded_gguf()), quantize="rows")
    with pytest.raises(ValueError, match="load a hub model or folder"):
        nsample.load("nsample/tiny-random", quantize="rows")
    with pytest.raises(ValueError, match="decodes a GGUF file's blocks"):
        nsample.load(path, decode_activations="int8")
    multimodal = tmp_path_factory.mktemp("gemma3-multimodal")  # a Gemma 3 of 4B and up: its towers, its own type
    AutoConfig.for_model("gemma3").save_pretrained(multimodal)
    cpu = torch.device("cpu")
    assert not as_rows(str(multimodal), cpu, torch.float32, "auto")  # as transformers loads it
    with pytest.raises(ValueError, match="does not run gemma3 models"):
        as_rows(str(multimodal), cpu, torch.float32, "rows")
    assert as_rows(path, cpu, torch.float32, "auto") == (resolve_quantize("auto", "cpu") == "none")  # AMX: int8
    assert as_rows(path, cpu, torch.float32, "rows") and not as_rows(path, cpu, torch.float32, "none")
