"""A GGUF file loaded as its blocks (nsample/models/gguf_model.py): every format read as the file holds it, the weights
transformers would dequantize bitwise, its logits, no float32 copy, the decode paths reported, the modes refused."""
import json
import os
from types import SimpleNamespace

import ggml_quantizer as gq
import numpy as np
import psutil
import pytest
import tiny_gguf
import torch
from gguf_fixtures import TYPES, tiny_gguf_file
from transformers import AutoModelForCausalLM

import nsample
from nsample.cpu import fused_decode, gguf_linear, kernels, weights_report
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear
from nsample.errors import ModelMissing
from nsample.models import gguf_model
from nsample.models.embedded import cache_dir, embedded_gguf

pytestmark = pytest.mark.skipif(kernels.ops() is None or not gq.available(),
                                reason="no C++ kernels here, or no llama.cpp quantizer (llama-cpp-python)")
FORMATS = {"F16": gq.F16, "Q5_0": gq.Q5_0, "Q8_0": gq.Q8_0, "Q2_K": gq.Q2_K, "Q3_K": gq.Q3_K, "Q5_K": gq.Q5_K,
           "IQ2_XXS": gq.IQ2_XXS, "IQ3_S": gq.IQ3_S, "IQ4_NL": gq.IQ4_NL, "IQ4_XS": gq.IQ4_XS}
# each format's own expansion is tested bitwise on its own in test_gguf_formats.py; here, that a file's tensors land in
# their places, rows in order
Q4_K_M = TYPES["mix"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """name -> a tiny GGUF file: a few formats, plus a Q4_K_M-like mix with an untied output."""
    root = tmp_path_factory.mktemp("gguf")
    out = {name: tiny_gguf.write(root / f"tiny-{name}.gguf", t) for name, t in FORMATS.items()}
    out["mix"] = tiny_gguf.write(root / "tiny-mix.gguf", {**Q4_K_M, "output": gq.Q6_K}, tied=False)
    return out


def reference(path):
    """transformers' own load of the file: every tensor dequantized to float32."""
    return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()


@pytest.mark.parametrize("name", [*FORMATS, "mix"])
@torch.inference_mode()
def test_each_format_is_read_as_the_file_holds_it_and_expands_to_transformers_weights_bitwise(files, name):
    engine = nsample.load(str(files[name]))
    try:
        model, ref = engine.model, reference(files[name])
        assert engine.quantize == "gguf"
        projections = {n: m for n, m in model.named_modules() if isinstance(m, GGUFLinear)}
        assert len(projections) == 2 * 7 + 1  # every projection and the LM head, none left as nn.Linear
        for n, m in projections.items():
            assert torch.equal(m.dequantize(), ref.get_submodule(n).weight), n  # q/k rows permuted back too
        embed = model.get_input_embeddings()
        assert isinstance(embed, GGUFEmbedding)
        ids = torch.tensor([[0, 5, 49151], [17, 17, 3]])
        assert torch.equal(embed(ids), ref.get_input_embeddings()(ids))
        float_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        assert float_bytes < 64 * 1024  # norms only: no float32 copy of a projection or the embedding
    finally:
        engine.close()


@torch.inference_mode()
def test_prefill_and_decode_logits_stay_within_1e4_of_transformers(files):
    path = files["mix"]
    engine = nsample.load(str(path))
    try:
        model, ref = engine.model, reference(path)
        ids = torch.tensor([engine.tokenize("A prompt of a few tokens, long enough to matter")])
        want = ref(ids).logits
        got = model(ids).logits  # prefill: tiles expanded into a GEMM
        assert (got - want).abs().max() < 1e-4 * want.abs().max()
        with gguf_linear.decoding():  # decode kernels: float32 sums on the blocks
            got = model(ids).logits
        assert (got - want).abs().max() < 1e-4 * want.abs().max()
    finally:
        engine.close()


def test_the_report_names_each_layers_format_and_the_bytes_a_decode_step_reads(files):
    from gguf import GGUFReader

    path = files["mix"]
    engine = nsample.load(str(path))
    try:
        report = weights_report.describe(engine.model)
    finally:
        engine.close()
    assert report["isa"] == kernels.built_isa()
    assert report["paths"]["self_attn.q_proj"] == "Q4_K blocks" and report["paths"]["mlp.down_proj"] == "Q6_K blocks"
    assert report["paths"]["lm_head"] == "Q6_K blocks" and report["paths"]["embed_tokens"] == "Q6_K rows"
    read = sum(int(t.n_bytes) for t in GGUFReader(path).tensors if t.name != "token_embd.weight" and
               t.tensor_type.name not in ("F32",))  # projections and head; norms are float32 parameters
    assert report["decode_bytes"] == read


def test_a_format_the_kernels_do_not_read_is_rounded_to_q8_0_once(tmp_path):
    path = tiny_gguf.write(tmp_path / "tiny-tq2_0.gguf", {**Q4_K_M, "ffn_down": gq.TQ2_0})
    engine = nsample.load(str(path))
    try:
        report = weights_report.describe(engine.model)
        assert report["paths"]["mlp.down_proj"] == "Q8_0 blocks"
        down = engine.model.model.layers[0].mlp.down_proj
        want = reference(path).model.layers[0].mlp.down_proj.weight
        assert (down.dequantize() - want).abs().max() <= want.abs().max() / 127  # one Q8_0 rounding of it
    finally:
        engine.close()


def test_the_modes_that_cannot_apply_are_refused_not_changed(files):
    # int8 activations without blocks to round them for; where the kernels have none at all (ARM64), that first
    no_int8 = "decodes a GGUF file's blocks" if kernels.ops().q8_available() else "needs nsample's kernels"
    with pytest.raises(ValueError, match="quantize='gguf'"):
        nsample.load("nsample/tiny-random", quantize="gguf")  # no file to read blocks from
    with pytest.raises(ValueError, match=f"decode_activations='int8' {no_int8}"):
        nsample.load("nsample/tiny-random", decode_activations="int8")  # no blocks to round activations for
    with pytest.raises(ValueError, match="decode_activations must be float32 or int8"):
        nsample.load(str(files["Q8_0"]), decode_activations="int4")
    with pytest.raises(ValueError, match=f"decode_activations='int8' {no_int8}"):
        nsample.load(str(files["Q8_0"]), quantize="none", decode_activations="int8")  # float32 as asked: no blocks
    engine = nsample.load(str(files["Q8_0"]), quantize="none")  # through transformers, float32 as asked
    try:
        assert engine.quantize == "none"
        assert not any(isinstance(m, GGUFLinear) for m in engine.model.modules())
    finally:
        engine.close()


def test_a_float32_conversion_that_would_not_fit_is_refused_saying_why_and_how_much(files, monkeypatch, tmp_path):
    monkeypatch.setenv("NSAMPLE_CACHE_DIR", str(tmp_path))  # no conversion cached yet
    monkeypatch.setattr(kernels, "ops", lambda: None)  # as where nsample's kernels do not build
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=2 ** 20))  # 1 MiB free
    with pytest.raises(ModelMissing, match=r"through transformers' float32 conversion, as nsample's C\+\+ kernels are "
                       r"not available here .*needs about 0\.\d GiB of memory .* 0\.0 GiB of memory is available"):
        nsample.load(str(files["Q8_0"]))
    assert not list(tmp_path.glob("*/model.safetensors"))  # nothing converted (its metadata read, a few kB)
    engine = nsample.load(str(files["Q8_0"]), quantize="none")  # float32 asked for: converted, as asked
    try:
        assert engine.quantize == "none"
    finally:
        engine.close()


@torch.inference_mode()
def test_decode_rows_are_bitwise_their_own(files):
    model, _ = gguf_model.load(files["mix"], cache_dir())
    layer = model.model.layers[1].mlp.down_proj
    x = torch.randn(37, layer.in_features, generator=torch.Generator().manual_seed(0)) * 3
    with gguf_linear.decoding():
        y = layer(x)
        alone = [layer(x[i:i + 1])[0] for i in range(len(x))]
    assert all(torch.equal(a, y[i]) for i, a in enumerate(alone))
    ref = x.double() @ layer.dequantize().double().T
    assert (y.double() - ref).abs().max() < 1e-5 * ref.abs().max()
    assert np.isfinite(y.numpy()).all()


@pytest.mark.skipif(not (kernels.ops() and kernels.ops().q8_available()), reason="no int8-activation kernels here")
@torch.inference_mode()
def test_with_int8_activations_the_head_prefills_on_them_and_the_other_layers_on_float32(files):
    """The head's prefill rows are the ones a first token is drawn from: on the int8 kernel, as every decode step's;
    the other layers' prefill stays float32, so a prompt's KV is the float32 model's."""
    engine = nsample.load(str(files["mix"]), decode_activations="int8")
    try:
        ops, head = kernels.ops(), engine.model.get_output_embeddings()
        down = engine.model.model.layers[0].mlp.down_proj
        assert head.head and not down.head and head.int8_activations and down.int8_activations
        x = torch.randn(3, head.in_features)
        assert torch.equal(head(x), ops.gguf_decode_q8_linear(x, head.blocks, head.type_id, None))  # prefill
        h = torch.randn(3, down.in_features)
        assert torch.equal(down(h), ops.gguf_prefill_linear(h, down.blocks, down.type_id, None))
        with gguf_linear.decoding():
            assert torch.equal(down(h), ops.gguf_decode_q8_linear(h, down.blocks, down.type_id, None))
    finally:
        engine.close()
    floats = nsample.load(str(files["mix"]))  # float32 activations: the head prefills as the other layers do
    try:
        head = floats.model.get_output_embeddings()
        x = torch.randn(3, head.in_features)
        assert head.head and torch.equal(head(x), kernels.ops().gguf_prefill_linear(x, head.blocks, head.type_id,
                                                                                    None))
    finally:
        floats.close()


@torch.inference_mode()
def test_a_prefill_decodes_the_heads_first_rows_as_told_and_the_runner_tells_it_each_last_only_request(files):
    """The head's rows a first token is drawn from run on the decode kernel, as every later token's (one row's cost,
    not a 32-row GEMM tile's); a prompt's scored rows stay on the GEMM; so each request's are the same in any pack.
    (Prompts longer than the kernels' prefill takes: a short one's head rows all run on the decode kernel.)"""
    engine = nsample.load(str(files["mix"]))
    try:
        ops, head = kernels.ops(), engine.model.get_output_embeddings()
        x = torch.randn(5, head.in_features, generator=torch.Generator().manual_seed(1))
        with gguf_linear.head_rows_decoded(2):
            y = head(x)
            down = engine.model.model.layers[0].mlp.down_proj
            h = torch.randn(3, down.in_features)
            assert torch.equal(down(h), ops.gguf_prefill_linear(h, down.blocks, down.type_id, None))  # the head only
        assert torch.equal(y[:2], ops.gguf_decode_linear(x[:2], head.blocks, head.type_id, None))
        assert torch.equal(y[2:], ops.gguf_prefill_linear(x[2:], head.blocks, head.type_id, None))
        told = []
        real = head.forward
        head.forward = lambda x: told.append((len(x.reshape(-1, head.in_features)), gguf_linear.head_rows())) \
            or real(x)
        kw = dict(max_tokens=4, seed=3, n=2, logprobs=True, top_logprobs=2)
        more = " and so on" * (fused_decode.SHORT_PROMPT // 2)  # too long for the kernels' prefill: the model's
        alone = engine.generate("A prompt alone" + more, **kw)
        scored = engine.generate("A prompt scored" + more, **kw, prompt_logprobs=1)
        with engine.scheduler.held():  # admitted at once: packed into one prefill forward
            reqs = [engine.submit("A prompt alone" + more, **kw),
                    engine.submit("A prompt scored" + more, **kw, prompt_logprobs=1),
                    engine.submit("Another prompt" + more, **kw)]
        packed = [r.result(timeout=120) for r in reqs]
        head.forward = real
    finally:
        engine.close()
    pack = len(scored.prompt_token_ids)
    assert fused_decode.SHORT_PROMPT < pack < engine.config.prefill_chunk // 3
    assert (pack + 2, 2) in told  # one forward: the two last-only rows first, decoded; the scored prompt's after
    for a, b in [(alone, packed[0]), (scored, packed[1])]:
        assert [c.token_ids for c in a.choices] == [c.token_ids for c in b.choices]
        assert [c.logprobs for c in a.choices] == [c.logprobs for c in b.choices]  # to the bit
    assert scored.prompt_logprobs == packed[1].prompt_logprobs


@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="Linux's page map says which pages are mapped")
def test_q_and_k_rows_are_copied_and_leave_no_mapped_pages_of_them_behind():
    """A Llama file's q and k rows are copied at load into transformers' rotary order. The mapping's pages of them are
    made holes (mapping_holes.py), so they are not in this process's memory beside the copy, even where Linux maps a
    whole large folio of the page cache around each page read (a file written in large pieces, as `pip install` writes
    the embedded one: 1475 of these 1965 pages were mapped so, with the copy read from the file)."""
    path = embedded_gguf()
    model, _ = gguf_model.load(path, cache_dir())
    index = json.loads((gguf_model.metadata(path, cache_dir()) / gguf_model.INDEX).read_text())["tensors"]
    v = model.model.layers[0].self_attn.v_proj.blocks  # on the mapping, not copied
    base = v.data_ptr() - index["blk.0.attn_v.weight"]["offset"]  # where the file's byte 0 is mapped
    page = os.sysconf("SC_PAGE_SIZE")

    def mapped_pages(start: int, nbytes: int) -> list[bool]:  # of the pages wholly inside [start, start + nbytes)
        first, end = -(-(base + start) // page), (base + start + nbytes) // page
        with open("/proc/self/pagemap", "rb") as f:
            f.seek(8 * first)
            entries = np.frombuffer(f.read(8 * (end - first)), dtype=np.uint64)
        return ((entries >> np.uint64(63)) & np.uint64(1)).astype(bool).tolist()  # bit 63: present

    qk = [index[f"blk.{i}.attn_{w}.weight"] for i in range(model.config.num_hidden_layers) for w in "qk"]
    assert sum(info["nbytes"] // page - 1 for info in qk) > 1000  # pages to look at
    mapped = [f for info in qk for f in mapped_pages(info["offset"], info["nbytes"])]
    assert sum(mapped) == 0  # read through the mapping: all of them (1965 of 1965)
    assert int(v.sum()) > 0  # v's bytes read through the mapping: its pages now mapped, as the check sees
    assert all(mapped_pages(index["blk.0.attn_v.weight"]["offset"], index["blk.0.attn_v.weight"]["nbytes"]))


@pytest.mark.parametrize("arch", ["qwen3", "llama"])
def test_q_and_k_are_copied_only_where_their_rows_are_reordered(files, arch):
    """Llama's q and k rows are reordered for transformers' rotary layout, so copied; other architectures' (Qwen 3's
    here) are in the file's order and stay views of the mapped file, as every other projection, with no copy."""
    path = tiny_gguf_file(arch) if arch != "llama" else files["mix"]
    model, _ = gguf_model.load(path, cache_dir())
    attention = model.model.layers[0].self_attn
    mapping = attention.v_proj.blocks.untyped_storage().data_ptr()
    on_mapping = [m.blocks.untyped_storage().data_ptr() == mapping for m in (attention.q_proj, attention.k_proj)]
    assert on_mapping == [arch != "llama"] * 2
