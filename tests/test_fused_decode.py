"""Decode steps in C++ (nsample/cpu/fused_decode.py), on GGUF blocks and int8, on every instruction set this CPU runs:
the model's own numbers, each row its own."""
import pytest
import torch
from gguf_fixtures import forced_isa, needs_gguf, tiny_gguf_engine

from nsample.config import EngineConfig
from nsample.cpu import fused_decode, gguf_linear, kernels
from nsample.cpu.quantize import quantize, resolve_quantize
from nsample.engine import Engine
from nsample.engine.kv_cache import SharedKV
from nsample.engine.prefix_attention import Chunk
from nsample.models.tiny_model import tiny_model

pytestmark = needs_gguf
ISAS = [kernels.isa()] + (["avx2"] if kernels.isa() != "avx2" and "avx2" in kernels.runnable() else [])  # and AVX2
# forced, as on most laptops
INT8_ACTIVATIONS = kernels.ops() is not None and kernels.ops().q8_available()
KINDS = [(kind, acts) for kind in ("mix", "q4_1") for acts in ["float32"] + ["int8"] * INT8_ACTIVATIONS] + [
    ("qwen3", "float32"), ("phi3", "float32"), ("smollm3", "float32"), ("granite", "float32"), ("gemma2", "float32"),
    ("gemma3", "float32"), ("olmo2", "float32"), ("olmo3", "float32"), ("mixtral", "float32"),
    ("gpt-oss", "float32")] + (
    [("int8", "float32")] if resolve_quantize("auto", "cpu") == "int8" else [])


@pytest.fixture(scope="module", params=[(kind, acts, isa) for isa in ISAS for kind, acts in KINDS],
                ids=lambda p: f"{p[0]}-{p[1]}-acts-{p[2]}")
def tiny_engine(request):
    """The tiny model (head dim 64, two KV heads of two queries) as a GGUF file's blocks (a Q4_K_M-like mix of
    Q4_K and Q6_K, or Q4_1 and Q8_0 as the embedded model), decoded on float32 or int8 activations, or as int8
    weights; or a tiny Qwen 3 in the mix (head dim 128, an RMSNorm on each q and k head), or Phi 3 (q|k|v and
    gate|up each one projection), or SmolLM3 (its fourth layer without a rotary embedding), or Granite 3 (its
    embeddings, residual branches, attention scores and logits scaled by its multipliers), or Gemma 3 (norms after
    the attention and MLP, GELU, five layers of six in a window of 16 on their own rotary table), Gemma 2 (Gemma 3's
    without q/k norms, every other layer in the window, its scores and logits soft-capped), OLMo 2 (no norms
    before the attention and MLP, q/k norms over all heads), OLMo 3 (OLMo 2's with three layers of four in a window of
    16), Mixtral (Llama's file with experts, their top-k weights renormalized), gpt-oss (biased projections, a sink per
    head, every other layer in a window of 16, biased MXFP4 experts with its clamped SwiGLU); its kernels built for
    `isa`."""
    kind, acts, isa = request.param
    with forced_isa(isa) as ops:
        if kind == "int8":
            model, tokenizer = tiny_model(layers=3, hidden=256)
            engine = Engine(quantize(model, "int8"), tokenizer, EngineConfig(quantize="int8"), name="tiny-int8")
        else:
            engine = tiny_gguf_engine(kind, layers=3, decode_activations=acts)
            assert engine.int8_activations == (acts == "int8")
    assert engine.runner.fused is not None and engine.runner.fused.ops is ops
    engine.isa = isa
    yield engine
    engine.close()


def test_the_fused_decoder_runs_for_quantized_models_only(tiny_engine):
    assert tiny_engine.runner.fused is not None
    kinds = {type(layer.qkv) for layer in tiny_engine.runner.fused.layers}
    assert len(kinds) == 1
    model, tokenizer = tiny_model(layers=1)
    plain = Engine(model, tokenizer, EngineConfig(quantize="none"), name="none")
    try:
        assert plain.runner.fused is None  # float32 weights: the model's own forward
        assert plain.generate("Hi", max_tokens=3, ignore_eos=True).choices[0].token_ids
    finally:
        plain.close()


def test_a_float32_model_does_not_even_build_the_kernels(monkeypatch):
    monkeypatch.setattr(kernels, "ops", lambda: pytest.fail("the kernels were asked for a float32 model"))
    model, _ = tiny_model(layers=1)
    assert fused_decode.build(model) is None


def test_its_logits_are_the_models_own_forward_on_the_same_cache(tiny_engine):
    """Every decode step of three requests in two cohorts, against transformers' forward of the same step."""
    runner, model = tiny_engine.runner, tiny_engine.model
    fused, gaps = runner.fused, []

    def both(ids, positions, groups):
        got = fused(ids, positions, groups)  # stores this step's keys and values, then attends
        with gguf_linear.decoding():  # the model's forward stores them again (its own, ~1e-7 apart) and attends
            want = model(input_ids=ids, position_ids=positions, use_cache=False, nsample_batch=groups).logits[:, -1]
        gaps.append(((got - want).abs().max() / want.abs().max()).item())
        assert sum(len(g.segments) for g in groups) >= 1 and got.shape == want.shape
        return got

    both.prefill = fused.prefill  # short prompts' prefills as they run
    runner.fused = both
    try:
        first = [tiny_engine.submit("One cohort, first", n=3, seed=1, max_tokens=24, ignore_eos=True),
                 tiny_engine.submit("One cohort, second, with a longer prompt than the first", n=2, seed=2,
                                  max_tokens=24, ignore_eos=True)]
        next(iter(first[0]))
        late = tiny_engine.submit("A later cohort", n=2, seed=3, max_tokens=12, ignore_eos=True)
        for r in [*first, late]:
            r.result(timeout=120)
    finally:
        runner.fused = fused
    # gguf: float32 up to the order of sums. int8: a last-bit difference in an activation can move one of its int8
    # levels, so within int8's own distance from float32 (tests/test_quantize.py). int8 activations: the same, and
    # each layer rounds again: the two paths' 1e-7 differences (norms, attention) move a value to the next of its
    # block's 255 levels now and then, and on this random model the attention and the head turn that into gaps of
    # a few percent of the largest logit (3.4% median on the Q4_1 file; each layer alone is the model's to the bit,
    # tests/test_q8_linear.py). A wrong kernel would be off by the logits' own size.
    assert len(gaps) >= 23  # tokens 2..24 of the first two; the late one's steps may all fall among them
    if tiny_engine.int8_activations:
        assert sorted(gaps)[len(gaps) // 2] < 0.06 and max(gaps) < 0.2
    else:
        assert max(gaps) < (1e-4 if tiny_engine.quantize == "gguf" else 1e-3)


def test_each_row_is_bitwise_its_own_alone_in_its_request_or_among_other_requests(tiny_engine):
    args = dict(max_tokens=32, ignore_eos=True, logprobs=True)
    with_others = [tiny_engine.submit("Shared step", n=4, seed=10, **args),
                   tiny_engine.submit("A neighbour with a different prompt", n=3, seed=20, **args)]
    together = [r.result(timeout=120).choices for r in with_others]
    for i, c in enumerate(together[0]):
        alone = tiny_engine.generate("Shared step", n=1, seed=10 + i, **args).choices[0]
        assert c.token_ids == alone.token_ids
        assert [lp.logprob for lp in c.logprobs] == [lp.logprob for lp in alone.logprobs]  # bitwise
    assert len({tuple(c.token_ids) for c in together[0]}) == 4


def test_rows_padded_to_a_fixed_width_get_the_same_numbers(tiny_engine):
    """decode_width pads each request's rows (n=3 -> 4); every row's numbers in the fused decoder are its own."""
    config = EngineConfig(quantize=tiny_engine.quantize, decode_width=4,
                          decode_activations=tiny_engine.config.decode_activations)
    with forced_isa(tiny_engine.isa):
        padded = Engine(tiny_engine.model, tiny_engine.tokenizer, config, name="w4")
    try:
        assert padded.runner.fused is not None
        args = dict(n=3, seed=30, max_tokens=24, ignore_eos=True, logprobs=True)
        want, got = tiny_engine.generate("Padded rows", **args), padded.generate("Padded rows", **args)
    finally:
        padded.close()
    assert [c.token_ids for c in got.choices] == [c.token_ids for c in want.choices]
    assert [[lp.logprob for lp in c.logprobs] for c in got.choices] == \
        [[lp.logprob for lp in c.logprobs] for c in want.choices]


def test_a_short_prompts_prefill_is_the_models_own_forward_and_its_own_alone_packed_or_in_chunks(tiny_engine):
    """A short prompt prefilled in the kernels (fused_decode.prefill): every position's logits and its keys and
    values against transformers' forward of the prompt; and the same bits alone, packed after another prompt, or in
    two chunks."""
    model, fused = tiny_engine.model, tiny_engine.runner.fused
    ids, other = tiny_engine.tokenize("A short prompt, in the kernels"), tiny_engine.tokenize("Hi")
    P, Q, cut = len(ids), len(other), len(ids) // 2
    assert 4 <= P <= fused_decode.SHORT_PROMPT
    kvs = [SharedKV(model, P, 1) for _ in range(3)]
    alone = fused.prefill(torch.tensor(ids), torch.arange(P), [Chunk(0, P, kvs[0], 0)], list(range(P)))  # (P, V)
    packed = fused.prefill(torch.tensor(other + ids), torch.tensor([*range(Q), *range(P)]),
                           [Chunk(0, Q, SharedKV(model, Q, 1), 0), Chunk(Q, Q + P, kvs[1], 0)], list(range(Q, Q + P)))
    head = fused.prefill(torch.tensor(ids[:cut]), torch.arange(cut), [Chunk(0, cut, kvs[2], 0)], list(range(cut)))
    tail = fused.prefill(torch.tensor(ids[cut:]), torch.arange(cut, P), [Chunk(0, P - cut, kvs[2], cut)],
                         list(range(P - cut)))
    assert torch.equal(packed, alone) and torch.equal(torch.cat([head, tail]), alone)
    for kv in kvs[1:]:
        assert all(torch.equal(a, b) for layer, other_layer in zip(kvs[0].buffers, kv.buffers)
                   for a, b in zip(layer, other_layer))
    reference = SharedKV(model, P, 1)
    with torch.inference_mode():  # the model's forward, its projections on the GEMM
        want = model(input_ids=torch.tensor([ids]), position_ids=torch.arange(P)[None], use_cache=False,
                     nsample_prefill=[Chunk(0, P, reference, 0)]).logits[0]  # (P, V)
    kv_gap = max(((a - b).abs().max() / b.abs().max()).item() for layer, ref in zip(kvs[0].buffers, reference.buffers)
                 for a, b in zip(layer, ref))
    gaps = ((alone - want).abs().amax(1) / want.abs().amax(1)).tolist()
    bound = 1e-4 if tiny_engine.quantize == "gguf" else 1e-3  # as the decode's (above)
    assert kv_gap < bound  # the layers' float32 activations, whatever the decode's
    if tiny_engine.int8_activations:  # the head rounds its input to int8, in both
        assert sorted(gaps)[len(gaps) // 2] < 0.06 and max(gaps) < 0.2
    else:
        assert max(gaps) < bound


def test_short_prompts_prefill_in_the_kernels_long_ones_in_the_models_forward_each_as_alone(tiny_engine,
                                                                                               monkeypatch):
    """A short and a long prompt arriving together: one prefill each way, and the short one's choices bitwise those
    it gets alone."""
    fused, prefilled = tiny_engine.runner.fused, []
    short, long_ = "A short one", " ".join(["longer"] * (fused_decode.SHORT_PROMPT + 8))
    args = dict(n=2, seed=5, max_tokens=8, ignore_eos=True, logprobs=True)
    alone = tiny_engine.generate(short, **args).choices

    def spy(ids, positions, chunks, keep):
        prefilled.append([c.stop - c.start for c in chunks])
        return fused_prefill(ids, positions, chunks, keep)

    fused_prefill = fused.prefill
    monkeypatch.setattr(fused, "prefill", spy)
    reqs = [tiny_engine.submit(long_, **args), tiny_engine.submit(short, **args)]
    together = [r.result(timeout=120).choices for r in reqs][1]
    assert prefilled == [[len(tiny_engine.tokenize(short))]]  # the long prompt went through the model's forward
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]
    assert [[lp.logprob for lp in c.logprobs] for c in together] == [[lp.logprob for lp in c.logprobs] for c in alone]
