"""The int8 decode path: the auto choice, near-float32 numerics, bitwise row independence, the seed contract."""
import shutil

import pytest
import torch
import torch.nn.functional as F
from gguf_fixtures import HAS_GGUF, needs_gguf, tiny_gguf_engine
from seed_contract import assert_choices_replay_alone

from nsample.config import EngineConfig
from nsample.cpu import kernels
from nsample.cpu.gguf_linear import GGUFLinear
from nsample.cpu.int8_linear import Eager, Int8Linear, two_level
from nsample.cpu.quantize import choose_quantize, quantize, resolve_quantize
from nsample.engine import Engine
from nsample.engine.engine_base import wrap_seed
from nsample.models.model_loader import load_pretrained
from nsample.models.tiny_model import tiny_model

needs_int8 = pytest.mark.skipif(resolve_quantize("auto", "cpu") == "none", reason="no fast int8 GEMM on this CPU")
FAST_MODES = [pytest.param("int8", marks=needs_int8), pytest.param("gguf", marks=needs_gguf)]
AMX = frozenset({"avx2", "avx512f", "avx512_vnni", "amx_int8", "amx_bf16"})
AVX2 = frozenset({"avx", "avx2", "fma"})
PROMPTS = ["What is the capital of France?", "Write a haiku about autumn.", "Give me three names for a cat.",
           "Why is the sky blue?"]


@pytest.mark.parametrize("mode, device, flags, ops, expected", [
    ("auto", "cpu", AMX, True, "int8"),
    ("auto", "cpu", AVX2 | {"avx_vnni"}, True, "none"),  # oneDNN's int8 GEMM is fast with AMX only (INT8_FLAGS)
    ("auto", "cpu", AMX - {"amx_int8", "amx_bf16"}, True, "none"),  # AVX512-VNNI: on an AMD Zen 4, its ref kernel
    ("auto", "cpu", AVX2, True, "none"),  # no native int8 dot products: oneDNN would halve the weights
    ("auto", "cpu", AMX, False, "none"),  # a torch build without oneDNN's int8 ops
    ("auto", "cuda", AMX, True, "none"),
    ("auto", "mps", frozenset(), False, "none"),
    ("none", "cpu", AMX, True, "none"),
    ("int8", "cpu", AVX2, True, "int8"),  # asked for explicitly: slower there, still correct
])
def test_auto_picks_int8_only_on_a_cpu_with_native_int8(mode, device, flags, ops, expected):
    assert choose_quantize(mode, device, flags, ops) == expected
    for loaded in ("gguf", "rows"):  # what the loader made of the model (a GGUF's blocks, a checkpoint's rows) stays
        assert choose_quantize("auto" if mode == "auto" else loaded, device, flags, ops, loaded) == loaded


@pytest.mark.parametrize("mode, device, flags, ops, loaded", [
    ("int8", "cuda", AMX, True, None), ("int8", "cpu", AMX, False, None), ("int4", "cpu", AMX, True, None),
    ("gguf", "cpu", AMX, True, None),  # gguf is how a GGUF file loads, not a conversion of other weights
    ("rows", "cpu", AVX2, True, None),  # rows likewise, how a hub model or folder loads
    ("int8", "cpu", AMX, True, "gguf"), ("none", "cpu", AMX, True, "gguf"),  # a GGUF's blocks are not converted
    ("gguf", "cpu", AMX, True, "rows"), ("int8", "cpu", AMX, True, "rows")])  # nor a checkpoint's rows
def test_an_unusable_mode_is_refused(mode, device, flags, ops, loaded):
    with pytest.raises(ValueError, match="quantize"):
        choose_quantize(mode, device, flags, ops, loaded)


def test_two_levels_reconstruct_each_row_to_a_65000th_of_its_maximum():
    w = torch.randn(64, 96) * torch.logspace(-3, 1, 64)[:, None]  # rows of very different scales
    q, s = two_level(w)
    approx = q[:64].float() * s[:64, None] + q[64:].float() * s[64:, None]
    assert q.dtype == torch.int8
    assert ((approx - w).abs().amax(1) <= w.abs().amax(1) / (127 * 254 * 2) * 1.01).all()


@pytest.mark.skipif(not shutil.which("g++"), reason="no C++ compiler to build with")  # ninja: a dependency
@torch.inference_mode()
def test_the_cpp_kernels_build_and_do_bitwise_what_the_aten_ops_do():
    fused = kernels.ops()
    assert fused is not None  # g++ and ninja are here: the build must work
    torch.manual_seed(0)
    x = torch.randn(37, 96) * torch.logspace(-4, 2, 37)[:, None]  # rows of very different scales
    x[5] = 0  # an all-zero row: its scale is clamped, its levels are 0
    for got, want in zip(fused.split_rows(x), Eager.split_rows(x)):
        assert got.dtype == want.dtype and torch.equal(got, want)
    y, t1 = torch.randn(74, 600) * 100, Eager.split_rows(x)[1]
    for bias in (None, torch.randn(300)):
        assert torch.equal(fused.join_levels(y, t1, bias), Eager.join_levels(y, t1, bias))


@needs_int8
@torch.inference_mode()
def test_without_the_cpp_kernels_the_aten_ops_give_the_same_rows(monkeypatch):
    torch.manual_seed(1)
    w, b, x = torch.randn(200, 96), torch.randn(200), torch.randn(5, 96)
    with_kernels = Int8Linear(w, b)
    assert with_kernels.kernel is not None or kernels.ops() is None

    def no_compiler(*args, **kwargs):
        raise RuntimeError("no g++ here")

    monkeypatch.setattr(kernels, "_built", {})
    monkeypatch.setattr("torch.utils.cpp_extension.load", no_compiler)
    assert kernels.ops() is None
    without = Int8Linear(w, b)  # built where the kernels could not be: the ATen ops
    assert without.kernel is None
    assert torch.equal(without(x), with_kernels(x))


@needs_int8
@torch.inference_mode()
def test_int8_linear_matches_float32_and_each_row_is_bitwise_its_own():
    torch.manual_seed(0)
    w, b, x = torch.randn(300, 96), torch.randn(300), torch.randn(2, 8, 96) * 3
    layer = Int8Linear(w, b)
    y = layer(x)
    assert y.shape == (2, 8, 300) and layer.weight.shape == (300, 96)
    ref = F.linear(x, w, b)
    assert (y - ref).abs().max() < 1e-3 * ref.abs().max()
    for i in range(8):
        assert torch.equal(layer(x[1, i]), y[1, i])


class Projections(torch.nn.Module):
    """q/k/v with biases (as Qwen2's) and an output projection, as an attention block names them."""

    def __init__(self):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = (torch.nn.Linear(64, n) for n in (64, 16, 16))
        self.o_proj = torch.nn.Linear(64, 64, bias=False)

    def forward(self, x):
        return self.o_proj(self.q_proj(x)), self.k_proj(x), self.v_proj(x)


@needs_int8
@torch.inference_mode()
def test_projections_of_one_input_share_one_gemm_and_keep_their_biases():
    torch.manual_seed(0)
    block, x = Projections(), torch.randn(3, 5, 64)
    want = block(x)
    quantize(block, "int8")
    assert [type(m).__name__ for m in (block.q_proj, block.k_proj, block.v_proj, block.o_proj)] == [
        "Member", "Member", "Member", "Int8Linear"]
    got = block(x)
    for g, w in zip(got, want):
        assert g.shape == w.shape and (g - w).abs().max() < 1e-3 * w.abs().max()
    assert all(torch.equal(a, b) for a, b in zip(block(x + 1)[1:], block(x + 1)[1:]))  # a new input, new outputs
    assert not torch.equal(block(x + 1)[1], got[1])


@pytest.fixture(scope="module")
def tiny_pair():
    """The tiny random model as float32 and as int8 (same weights), for numerics."""
    ref, _ = tiny_model()
    fast, _ = tiny_model()
    return ref, quantize(fast, "int8")


@needs_int8
@torch.inference_mode()
def test_the_quantized_tiny_model_keeps_float32_logits_and_rows_independent(tiny_pair):
    ref, fast = tiny_pair
    ids = torch.randint(0, ref.config.vocab_size, (6, 12), generator=torch.Generator().manual_seed(1))
    want, got = ref(ids).logits, fast(ids).logits
    assert (got - want).abs().max() < 1e-3 * want.abs().max()
    for i in range(6):
        assert torch.equal(fast(ids[i:i + 1]).logits[0], got[i])
    assert quantize(fast, "int8") is fast  # a second call leaves it as it is
    assert fast.get_output_embeddings().weight.shape == ref.get_output_embeddings().weight.shape


@pytest.fixture(scope="module")
def tiny_fast_engines():
    """The tiny model as int8, and as a Q4_K_M-like GGUF file's blocks (where the kernels and quantizer are here)."""
    model, tokenizer = tiny_model()
    engines = {"int8": Engine(quantize(model, "int8"), tokenizer, EngineConfig(quantize="int8"), name="tiny-int8")}
    if HAS_GGUF:
        engines["gguf"] = tiny_gguf_engine("mix")
    yield engines
    for e in engines.values():
        e.close()


@pytest.mark.parametrize("mode", FAST_MODES)
@pytest.mark.parametrize("seed", [0, 2026])
def test_seed_contract_holds_on_the_quantized_tiny_model(tiny_fast_engines, mode, seed):
    engine, args = tiny_fast_engines[mode], dict(max_tokens=48, ignore_eos=True, temperature=1.0)
    assert engine.quantize == mode
    wide = engine.generate("Once upon a time", n=6, seed=seed, **args)
    alone = [engine.generate("Once upon a time", n=1, seed=wrap_seed(seed + i), **args).choices[0]
             for i in range(6)]
    assert [c.token_ids for c in wide.choices] == [c.token_ids for c in alone]
    assert len({tuple(c.token_ids) for c in alone}) == 6


@pytest.fixture(scope="module")
def smol_engines():
    """The embedded SmolLM2 as float32, int8 and (where the kernels run) its GGUF file's blocks, by mode."""
    engines = {}
    for mode in ("none", "int8", "gguf") if HAS_GGUF else ("none", "int8"):
        model, tokenizer, name = load_pretrained(None, torch.device("cpu"), torch.float32, mode)
        engines[mode] = Engine(quantize(model, mode), tokenizer, EngineConfig(quantize=mode), name=name)
    yield engines
    for e in engines.values():
        e.close()


@pytest.mark.e2e
@pytest.mark.parametrize("mode", FAST_MODES)
def test_the_fast_paths_keep_the_embedded_models_greedy_output(smol_engines, mode):
    ref, fast = smol_engines["none"], smol_engines[mode]
    same, deltas = 0, []
    for p in PROMPTS:
        a, b = (e.generate([{"role": "user", "content": p}], temperature=0, max_tokens=64, logprobs=True).choices[0]
                for e in (ref, fast))
        same += a.token_ids == b.token_ids
        agree = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y), len(a.token_ids))
        deltas += [abs(x.logprob - y.logprob) for x, y in zip(a.logprobs[:agree], b.logprobs[:agree])]
    assert same >= len(PROMPTS) - 1  # the bar is 90% over 20 prompts (scripts/quality.py)
    assert sum(deltas) / len(deltas) < 0.005


@pytest.mark.e2e
@pytest.mark.parametrize("mode", FAST_MODES)
def test_seed_contract_holds_on_the_quantized_embedded_model(smol_engines, mode):
    fast = smol_engines[mode]
    if mode == "gguf":  # every projection decodes on the file's Q4_1 blocks, the tied LM head on its Q8_0 blocks
        kinds = [m.format for m in fast.model.modules() if isinstance(m, GGUFLinear)]
        assert sorted(kinds) == ["Q4_1"] * 30 * 7 + ["Q8_0"]
    assert (fast.runner.fused is not None) == (kernels.ops() is not None)  # decode steps in C++, int8 or blocks
    assert_choices_replay_alone(fast, [{"role": "user", "content": "Write a short poem about the sea."}], n=6,
                                seed=7, max_tokens=64, ignore_eos=True)
