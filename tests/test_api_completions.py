"""/v1/completions: prompt lists in prompt-major order, token prompts, echo, legacy logprobs and best_of."""
import openai
import pytest
from api_helpers import MODEL

pytest_plugins = ["api_fixtures"]  # base_url, client, aclient, http

NO_EOS = {"ignore_eos": True}


def complete(client, **kw):
    return client.completions.create(**{"model": MODEL, "max_tokens": 6, **kw})


def test_two_prompts_n2_echo_prompt_major(client, tiny_engine):
    prompts = ["The cat sat", "A dog ran"]
    r = complete(client, prompt=prompts, n=2, seed=4, echo=True)
    assert r.id.startswith("cmpl-") and r.object == "text_completion" and r.model == MODEL
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert [c.seed for c in r.choices] == [4, 5, 4, 5]
    completion_tokens = 0
    for p, prompt in enumerate(prompts):
        expected = tiny_engine.generate(prompt, n=2, seed=4, max_tokens=6)
        completion_tokens += expected.usage.completion_tokens
        for i in range(2):
            assert r.choices[p * 2 + i].text == prompt + expected.choices[i].text
    assert r.usage.prompt_tokens == sum(len(tiny_engine.tokenize(p)) for p in prompts)  # once per prompt
    assert r.usage.completion_tokens == completion_tokens


def test_token_id_prompts_match_text_prompts(client, tiny_engine):
    texts = ["Once upon a time", "In a galaxy"]
    ids = [tiny_engine.tokenize(t) for t in texts]
    by_text = complete(client, prompt=texts, seed=8)
    by_ids = complete(client, prompt=ids, seed=8)
    one = complete(client, prompt=ids[1], seed=8, echo=True)
    assert [c.text for c in by_ids.choices] == [c.text for c in by_text.choices]
    assert one.choices[0].text == texts[1] + by_text.choices[1].text
    assert by_ids.usage == by_text.usage


def test_default_max_tokens_is_16_like_openai(client):
    r = client.completions.create(model=MODEL, prompt="Hi", extra_body=NO_EOS)
    assert r.usage.completion_tokens == 16 and r.choices[0].finish_reason == "length"


def test_legacy_logprobs(client):
    r = complete(client, prompt="Hello", n=2, seed=3, logprobs=2, extra_body=NO_EOS)
    for c in r.choices:
        lp = c.logprobs
        assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
        assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
        for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            assert 2 <= len(top) <= 3 and top[token] == logprob  # the top 2, plus the sampled token


def test_best_of_returns_the_n_best_by_mean_logprob(client):
    r = complete(client, prompt="Hello", n=2, best_of=4, seed=9)
    pool = complete(client, prompt="Hello", n=4, seed=9, logprobs=0)
    mean = {c.seed: sum(c.logprobs.token_logprobs) / len(c.logprobs.token_logprobs) for c in pool.choices}
    best = sorted(pool.choices, key=lambda c: mean[c.seed], reverse=True)[:2]
    assert [c.index for c in r.choices] == [0, 1]
    assert [(c.seed, c.text) for c in r.choices] == [(c.seed, c.text) for c in best]
    assert all(c.logprobs is None for c in r.choices)  # ranked with logprobs, returned without
    assert r.usage.completion_tokens == pool.usage.completion_tokens  # all best_of choices are billed


def test_best_of_per_prompt_with_logprobs(client):
    r = complete(client, prompt=["Hello", "Bye"], n=1, best_of=3, seed=2, logprobs=1)
    assert [c.index for c in r.choices] == [0, 1]
    assert all(len(c.logprobs.tokens) == len(c.logprobs.token_logprobs) > 0 for c in r.choices)


def test_suffix_is_refused_by_the_client_path(client):
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt="Hello", suffix="world")
    assert (e.value.param, e.value.code) == ("suffix", "unsupported_parameter")
