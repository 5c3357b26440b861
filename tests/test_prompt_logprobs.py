"""Prompt logprobs: computed in the prefill the request runs anyway (packed with others, in chunks, or forked), equal
to transformers' forward on the same ids; the API's two shapes (legacy echo + logprobs, vLLM's prompt_logprobs)."""
import math

import pytest
import torch

from nsample import InvalidRequest
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model

pytest_plugins = ["api_fixtures"]
TEXT = "The quick brown fox jumps over the lazy dog, because the dog was asleep in the warm afternoon sun."


@pytest.fixture(scope="module")
def model_and_tokenizer():
    return tiny_model()


@pytest.fixture(scope="module", params=[dict(prefill_chunk=7), dict(prefill_chunk=256), dict(shared_prefix=False,
                                                                                              prefill_chunk=5)],
                ids=["packed-chunks", "packed", "forked-chunks"])
def engine(model_and_tokenizer, request):
    from nsample.config import EngineConfig

    model, tokenizer = model_and_tokenizer
    eng = Engine(model, tokenizer, EngineConfig(**request.param))
    yield eng
    eng.close()


def reference(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0].float().log_softmax(-1)  # (L, V)


def test_equal_to_the_models_forward_with_ranks_and_alternatives(engine, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    other = engine.submit("Another prompt, packed into the same prefill forward", max_tokens=4, seed=1)
    result = engine.generate(ids, n=3, seed=4, max_tokens=3, prompt_logprobs=4)
    other.result()
    ref, lps = reference(model, ids), result.prompt_logprobs
    # float32 weights: the same numbers up to the order of sums; int8 ones (quantize="auto" on a CPU with AMX) are
    # the model's own int8 modules there, whose products vary with the rows packed and chunked with them
    tol = 1e-4 if engine.quantize == "none" else 1e-3
    assert len(lps) == len(ids) and lps[0] is None
    for j in range(1, len(ids)):
        t, row = lps[j], ref[j - 1]
        assert t.token_id == ids[j] and t.logprob == pytest.approx(row[ids[j]].item(), abs=tol)
        assert int((row > t.logprob + tol).sum()) + 1 <= t.rank <= int((row > t.logprob - tol).sum()) + 1
        top = row.topk(4)
        assert [i for i, _, _ in t.top] == top.indices.tolist()
        assert [v for _, _, v in t.top] == pytest.approx(top.values.tolist(), abs=tol)
        assert t.token_bytes == engine.token_bytes(ids[j])


def test_choices_do_not_change_when_the_prompt_is_scored(engine):
    plain = engine.generate(TEXT, n=3, seed=9, max_tokens=8)
    scored = engine.generate(TEXT, n=3, seed=9, max_tokens=8, prompt_logprobs=0)
    assert [c.token_ids for c in scored.choices] == [c.token_ids for c in plain.choices]
    assert all(t.top == [] for t in scored.prompt_logprobs[1:]) and plain.prompt_logprobs is None


def test_max_tokens_zero_scores_the_prompt_only(engine):
    r = engine.generate(TEXT, n=2, max_tokens=0, prompt_logprobs=1)
    assert [(c.text, c.token_ids, c.finish_reason) for c in r.choices] == [("", [], "length")] * 2
    assert r.usage.completion_tokens == 0 and len(r.prompt_logprobs) == r.usage.prompt_tokens


def test_refused_settings(tiny_engine):
    with pytest.raises(InvalidRequest) as e:
        tiny_engine.submit(TEXT, max_tokens=0)
    assert e.value.param == "max_tokens"
    with pytest.raises(InvalidRequest) as e:
        tiny_engine.submit(TEXT, prompt_logprobs=21)
    assert e.value.param == "prompt_logprobs"


# --- the API ----------------------------------------------------------------------------------------------------
def test_echo_with_logprobs_leads_with_the_prompt(client, tiny_engine):
    r = client.completions.create(model=tiny_engine.name, prompt=TEXT, echo=True, logprobs=2, max_tokens=3, n=2,
                                  seed=3)
    ids = tiny_engine.tokenize(TEXT)
    ref = reference(tiny_engine.model, ids)
    for choice in r.choices:
        lp = choice.logprobs
        assert choice.text.startswith(TEXT) and len(lp.tokens) == len(ids) + 3
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        assert "".join(lp.tokens[:len(ids)]) == TEXT and lp.text_offset[len(ids)] == len(TEXT)
        assert lp.text_offset[:len(ids)] == [len(tiny_engine.tokenizer.decode(ids[:j])) for j in range(len(ids))]
        for j in range(1, len(ids)):
            assert lp.token_logprobs[j] == pytest.approx(ref[j - 1, ids[j]].item(), abs=1e-4)
            assert len(lp.top_logprobs[j]) in (2, 3) and lp.tokens[j] in lp.top_logprobs[j]
    assert r.choices[0].text != r.choices[1].text and r.usage.completion_tokens == 6


def test_echo_max_tokens_zero_is_how_harnesses_score(http, tiny_engine):
    body = {"model": tiny_engine.name, "prompt": [TEXT, "Second prompt"], "echo": True, "logprobs": 1,
            "max_tokens": 0, "temperature": 0}
    r = http.post("/v1/completions", json=body)
    assert r.status_code == 200, r.text
    a, b = r.json()["choices"]
    assert (a["text"], b["text"]) == (TEXT, "Second prompt") and a["finish_reason"] == "length"
    assert r.json()["usage"]["completion_tokens"] == 0
    total = sum(a["logprobs"]["token_logprobs"][1:])
    assert math.isfinite(total) and total < 0


def test_vllm_prompt_logprobs_on_both_endpoints(http, tiny_engine):
    ids = tiny_engine.tokenize(TEXT)
    ref = reference(tiny_engine.model, ids)
    body = {"model": tiny_engine.name, "prompt": TEXT, "max_tokens": 2, "prompt_logprobs": 3}
    choice = http.post("/v1/completions", json=body).json()["choices"][0]
    scored = choice["prompt_logprobs"]
    assert choice["logprobs"] is None and scored[0] is None and len(scored) == len(ids)
    for j in range(1, len(ids)):
        entry = scored[j][str(ids[j])]
        assert entry["logprob"] == pytest.approx(ref[j - 1, ids[j]].item(), abs=1e-4) and entry["rank"] >= 1
        assert 3 <= len(scored[j]) <= 4 and entry["decoded_token"] == tiny_engine.tokenizer.decode([ids[j]])
    chat = {"model": tiny_engine.name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
            "prompt_logprobs": 0}
    r = http.post("/v1/chat/completions", json=chat).json()
    template = tiny_engine.tokenize([{"role": "user", "content": "Hi"}])
    assert len(r["prompt_logprobs"]) == len(template) and all(len(e) == 1 for e in r["prompt_logprobs"][1:])


def test_streamed_echo_carries_the_prompts_logprobs(http, tiny_engine):
    import json

    body = {"model": tiny_engine.name, "prompt": TEXT, "echo": True, "logprobs": 1, "max_tokens": 3, "n": 2,
            "stream": True, "prompt_logprobs": 1}
    with http.stream("POST", "/v1/completions", json=body) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    firsts = [c["choices"][0] for c in chunks[:2]]
    ids = tiny_engine.tokenize(TEXT)
    for i, first in enumerate(firsts):
        assert first["index"] == i and first["text"] == TEXT
        assert len(first["logprobs"]["tokens"]) == len(ids) and first["logprobs"]["token_logprobs"][0] is None
        assert len(first["prompt_logprobs"]) == len(ids)
    rest = [c["choices"][0] for c in chunks[2:] if c["choices"]]
    assert all(c["prompt_logprobs"] is None for c in rest)
    assert sum(len(c["logprobs"]["tokens"]) for c in rest if c["logprobs"]) == 6
