"""Phi 3's LongRoPE and partial rotary in a GGUF file (nsample/models/rope_scaling.py, gguf_config.read_missing),
which transformers' GGUF loading ignores: the short and long frequency factors (rope_factors_short.weight,
rope_factors_long.weight), the attention factor on cos and sin (.rope.scaling.attn_factor), the original context, and
the rotary size (.rope.dimension_count: Phi-4-mini turns 96 of each head's 128). The logits are llama.cpp's on the
same file, with the factors the engine's context picks as llama.cpp's n_ctx picks them, on both load paths; one set
of factors rotates every position, whatever the rows beside it, for a hub model too. A partial rotary on the file's
blocks turns whole heads, reordered, so the fused decode runs it."""
import math
from pathlib import Path

import pytest
import tiny_gguf
import torch
from gguf_fixtures import TYPES, engine_pair, llama_cpp_logits, needs_gguf
from transformers import AutoModelForCausalLM, Phi3Config, Phi3ForCausalLM

import nsample
from nsample.config import EngineConfig
from nsample.cpu.whole_head_rotary import WholeHeadRotary, head_order, qk_rows
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model

pytestmark = needs_gguf
ORIGINAL = 512  # the original context; the file's context_length is 2048
IDS = torch.arange(1, 1 + 200).mul(151).remainder(49000)[None]


def factors(pairs: int, seed: int = 1) -> dict[str, torch.Tensor]:
    """LongRoPE factors as llama.cpp's converter writes them: short ones near 1, long ones rising to 8."""
    g = torch.Generator().manual_seed(seed)
    short, long = 1 + 0.5 * torch.rand(pairs, generator=g), 1 + 7 * torch.rand(pairs, generator=g).sort().values
    return {"rope_factors_long.weight": long, "rope_factors_short.weight": short}


def phi3_file(root: Path, name: str, types=None, rotary_dim: int | None = None, tensors: dict | None = None) -> Path:
    """A tiny Phi 3 (head size 64) with LongRoPE, float32 unless `types` says, as Phi-3.5-mini's file is made."""
    keys = {"scaling.attn_factor": math.sqrt(1 + math.log(2048 / ORIGINAL) / math.log(ORIGINAL)),
            "scaling.original_context_length": ORIGINAL}
    return tiny_gguf.write_arch(root / f"{name}.gguf", "phi3", types or {}, rope_scaling=keys, rotary_dim=rotary_dim,
                                extra_tensors=factors((rotary_dim or 64) // 2) if tensors is None else tensors)


@pytest.fixture(scope="module")
def float32_file(tmp_path_factory):
    return phi3_file(tmp_path_factory.mktemp("longrope"), "tiny-phi3-longrope")


@pytest.mark.parametrize("quantize", ["gguf", "none"])  # the file's blocks; transformers' float32 conversion
@pytest.mark.parametrize("max_context, n_ctx, pinned", [(ORIGINAL, 256, "short"), (None, 1024, "long")])
@torch.inference_mode()
def test_the_logits_are_llama_cpps_with_the_factors_the_context_picks(float32_file, quantize, max_context, n_ctx,
                                                                      pinned):
    """llama.cpp takes the long factors where its n_ctx passes the original context; nsample where its window does
    (the file's 2048 positions, or max_context)."""
    want = llama_cpp_logits(float32_file, IDS[0].tolist(), n_ctx=n_ctx)
    engine = nsample.load(str(float32_file), quantize=quantize, max_context=max_context)
    try:
        assert engine.quantize == quantize and engine.longrope == pinned
        got = engine.model(IDS).logits[0]
    finally:
        engine.close()
    plain = AutoModelForCausalLM.from_pretrained(float32_file.parent, gguf_file=float32_file.name,
                                                 dtype=torch.float32).eval()
    assert (plain(IDS).logits[0] - want).abs().max() > 2e-2  # transformers' own loading: plain frequencies
    assert (got - want).abs().max() < 1e-4 * want.abs().max()


@torch.inference_mode()
def test_a_partial_rotary_is_llama_cpps_turned_to_whole_heads(tmp_path):
    """Phi-4-mini's kind: half of each head turns. On the file's blocks its q/k rows are reordered and cos and sin
    widened so whole heads turn (whole_head_rotary.py), and the fused decode runs it; the logits are llama.cpp's."""
    path = phi3_file(tmp_path, "tiny-phi3-partial", rotary_dim=32)
    want = llama_cpp_logits(path, IDS[0].tolist(), n_ctx=1024)
    for quantize in ("gguf", "none"):
        engine = nsample.load(str(path), quantize=quantize)
        try:
            assert engine.model.config.rope_parameters["partial_rotary_factor"] == 0.5 and engine.longrope == "long"
            assert isinstance(engine.model.model.rotary_emb, WholeHeadRotary) == (quantize == "gguf")
            assert (engine.runner.fused is not None) == (quantize == "gguf") and engine.shared_prefix
            got = engine.model(IDS).logits[0]
        finally:
            engine.close()
        assert (got - want).abs().max() < 1e-4 * want.abs().max()


def test_a_partial_rotary_decodes_its_greedy_choices_on_whole_heads(tmp_path):
    """The fused decode on the reordered blocks, and transformers' partial rotary on the float32 conversion, choose
    alike, past the 16 prompt tokens the kernels prefill too (longer ones prefill in the model's modules)."""
    path = phi3_file(tmp_path, "tiny-phi3-partial-q4", types=TYPES["mix"], rotary_dim=32)
    with engine_pair(path) as (fast, ref):
        assert fast.runner.fused is not None and ref.runner.fused is None
        for prompt in ("The sea is wide.", "The sea is wide and the ships are slow. " * 4):
            a, b = (e.generate(prompt, n=2, temperature=0, max_tokens=16, ignore_eos=True) for e in (fast, ref))
            assert a.choices[0].token_ids == a.choices[1].token_ids == b.choices[0].token_ids


def test_whole_head_order_pairs_each_turned_dimension_with_its_own():
    order = head_order(8, 4)  # turned 0..3 (pairs 0-2, 1-3), passed 4..7
    assert order.tolist() == [0, 1, 4, 5, 2, 3, 6, 7]  # pairs j, j + 4: 0-2, 1-3, and 4-6, 5-7 (passed)
    rows = qk_rows(heads=2, kv_heads=1, D=8, R=4, rows=(2 + 2 * 1) * 8)
    assert rows[:24].view(3, 8).sub(torch.arange(0, 24, 8)[:, None]).eq(order).all()  # each q and k head
    assert rows[24:].tolist() == list(range(24, 32))  # v as it was
    assert qk_rows(2, 1, 8, 4, rows=8).tolist() == order.tolist()  # a k projection alone


@torch.inference_mode()
def test_one_set_of_factors_turns_every_position_whatever_the_rows_beside(float32_file):
    """transformers' own LongRoPE picks the factors per forward, by its longest position: a row at position 5 would
    turn by other frequencies beside a row past the original context. Pinned, it turns alike."""
    x, alone, beside = torch.zeros(1, 1, 64), torch.tensor([[5]]), torch.tensor([[5, 3 * ORIGINAL]])
    plain = AutoModelForCausalLM.from_pretrained(float32_file.parent, gguf_file=float32_file.name,
                                                 dtype=torch.float32)
    tables = {}
    for max_context in (ORIGINAL, None):
        engine = nsample.load(str(float32_file), max_context=max_context)
        try:
            rotary = engine.model.model.rotary_emb
            if max_context is None:  # the same module unpinned: its factors follow the longest position
                unpinned = type(rotary)(config=engine.model.config)
                assert not torch.equal(unpinned(x, alone)[0], unpinned(x, beside)[0][:, :1])
            cos, sin = rotary(x, alone)
            for got, want in zip(rotary(x, beside), (cos, sin)):
                assert torch.equal(got[:, :1], want)
            tables[engine.longrope] = cos
        finally:
            engine.close()
    assert not torch.equal(tables["short"], tables["long"])
    assert not torch.equal(tables["short"], plain.model.rotary_emb(x, alone)[0])  # the attention factor, at least


def test_a_hub_models_longrope_is_pinned_by_the_engines_context():
    """Phi-3.5-mini from the hub (config.json's rope_scaling) takes the same choice as its GGUF file."""
    _, tokenizer = tiny_model()
    config = Phi3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                        original_max_position_embeddings=ORIGINAL, pad_token_id=0,
                        rope_scaling={"rope_type": "longrope", "short_factor": [1.0] * 8,
                                      "long_factor": [4.0] * 8})
    for max_context, pinned in ((ORIGINAL, "short"), (1024, "long")):
        engine = Engine(Phi3ForCausalLM(config).eval(), tokenizer,
                        EngineConfig(quantize="none", max_context=max_context))
        try:
            assert engine.longrope == pinned
            rotary = engine.model.model.rotary_emb
            assert torch.equal(rotary.inv_freq, rotary.long_inv_freq)  # whichever the forward would pick
            assert engine.generate("Hello", max_tokens=2, ignore_eos=True).choices[0].token_ids
        finally:
            engine.close()
    model, tokenizer = tiny_model(layers=1)
    engine = Engine(model, tokenizer, EngineConfig(quantize="none"))
    try:
        assert engine.longrope is None  # no LongRoPE: nothing pinned
    finally:
        engine.close()


def test_greedy_choices_on_the_blocks_are_those_of_the_float32_conversion(tmp_path):
    """Q4_K_M-like blocks in the fused C++ decode, and transformers' modules on the float32 conversion, both on the
    long factors, choose alike."""
    path = phi3_file(tmp_path, "tiny-phi3-q4", types=TYPES["mix"])
    with engine_pair(path) as (fast, ref):
        assert fast.runner.fused is not None and fast.longrope == ref.longrope == "long"
        a, b = (e.generate("The sea is wide and the ships are slow. " * 4, n=2, temperature=0, max_tokens=16,
                           ignore_eos=True) for e in (fast, ref))
        assert a.choices[0].token_ids == a.choices[1].token_ids == b.choices[0].token_ids


def test_one_set_of_factors_alone_is_refused(tmp_path):
    path = phi3_file(tmp_path, "tiny-phi3-half", tensors={"rope_factors_long.weight": torch.ones(32)})
    for quantize in ("gguf", "none"):
        with pytest.raises(ValueError, match="LongRoPE factors"):
            nsample.load(str(path), quantize=quantize)
