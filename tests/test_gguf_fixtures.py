"""The embedded model requantized by llama.cpp's own quantizer (scripts/make_fixtures.py: Q4_K_M, Q6_K, Q8_0), loaded
as a new user would: each layer decodes on the file's own format, greedy output equals transformers' float32 model
of the same file, and the seed contract holds."""
import sys
from pathlib import Path

import pytest
from gguf_fixtures import engine_pair, needs_gguf
from seed_contract import assert_choices_replay_alone

import nsample
from nsample.cpu import weights_report

sys.path.insert(0, str(Path(__file__).parents[1] / "scripts"))
from make_fixtures import fixture  # noqa: E402

pytestmark = [needs_gguf, pytest.mark.e2e]
PROMPTS = ["What is the capital of France?", "Write a haiku about autumn.", "Give me three names for a cat.",
           "Why is the sky blue?"]
KIND = {"token_embd": "embed_tokens", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


@pytest.fixture(scope="module", params=["Q4_K_M", "Q6_K", "Q8_0"])
def pair(request):
    """(the fixture's path, nsample on its blocks, transformers' float32 model of it behind the same engine)."""
    path = fixture(request.param)
    with engine_pair(path) as (fast, ref):
        yield path, fast, ref


def file_formats(path: Path) -> dict[str, set[str]]:
    """Our name of each layer kind -> the ggml types the file holds it in."""
    from gguf import GGUFReader

    out: dict[str, set[str]] = {}
    for t in GGUFReader(path).tensors:
        kind = t.name.removesuffix(".weight").split(".")[-1]
        if kind in KIND:
            out.setdefault(KIND[kind], set()).add(t.tensor_type.name)
    return out


def test_each_layer_decodes_on_the_files_own_format_in_cpp(pair):
    path, fast, _ = pair
    report = weights_report.describe(fast.model)
    assert fast.quantize == "gguf" and fast.runner.fused is not None
    for kind, types in file_formats(path).items():
        suffix = " rows" if kind == "embed_tokens" else " blocks"
        assert report["paths"][kind] == ", ".join(sorted(t + suffix for t in types)), kind
    assert report["paths"]["lm_head"] == report["paths"]["embed_tokens"].replace("rows", "blocks")  # tied
    from gguf import GGUFReader

    tensors = GGUFReader(path).tensors  # a decode step reads every projection and the (tied) head once
    assert report["decode_bytes"] == sum(int(t.n_bytes) for t in tensors if not t.name.endswith("norm.weight"))


def test_greedy_output_equals_transformers_float32_model_of_the_file(pair):
    _, fast, ref = pair
    same = 0
    for p in PROMPTS:
        a, b = (e.generate([{"role": "user", "content": p}], temperature=0, max_tokens=48).choices[0].token_ids
                for e in (ref, fast))
        same += a == b
    assert same >= len(PROMPTS) - 1  # float32 up to the order of sums: a near-tie may flip one


def test_the_seed_contract_holds_on_the_files_blocks(pair):
    _, fast, _ = pair
    assert_choices_replay_alone(fast, [{"role": "user", "content": "Write a short poem about the sea."}], n=4,
                                seed=11, max_tokens=32, ignore_eos=True)


def test_int8_activations_decode_every_block_and_keep_the_seed_contract():
    """decode_activations="int8" on the Q4_K_M fixture: every projection and the head on int8 activations (Q5_0,
    Q8_0 rounded per 32, Q4_K and Q6_K per 256), and choice i of n is still the request seeded s + i alone."""
    path = fixture("Q4_K_M")
    engine = nsample.load(str(path), decode_activations="int8")
    try:
        assert engine.int8_activations and engine.runner.fused is not None
        paths = weights_report.describe(engine.model)["paths"]
        for kind, types in file_formats(path).items():
            if kind != "embed_tokens":
                assert paths[kind] == ", ".join(sorted(f"{t} blocks × int8 activations" for t in types)), kind
        assert_choices_replay_alone(engine, [{"role": "user", "content": "Write a short poem about the sea."}], n=4,
                                    seed=11, max_tokens=32, ignore_eos=True)
    finally:
        engine.close()
