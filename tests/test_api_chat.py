"""/v1/chat/completions and /v1/models through the official openai client, against a live server on the tiny model."""
import asyncio

import openai
import pytest
from api_helpers import HELLO, MODEL

pytest_plugins = ["api_fixtures"]  # base_url, client, aclient, http

NO_EOS = {"ignore_eos": True}  # extension: every choice runs to max_tokens, so counts are exact


def chat(client, **kw):
    return client.chat.completions.create(**{"model": MODEL, "messages": HELLO, "max_tokens": 8, **kw})


def test_models_and_health(client, http):
    assert [m.id for m in client.models.list().data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError) as e:
        client.models.retrieve("gpt-4o")
    assert e.value.code == "model_not_found"
    health = http.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok" and health.json()["model"] == MODEL


def test_n1(client, tiny_engine):
    r = chat(client, seed=3, extra_body=NO_EOS)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion" and r.model == MODEL
    assert r.system_fingerprint
    (c,) = r.choices
    assert c.index == 0 and c.message.role == "assistant" and c.message.content
    assert c.finish_reason == "length" and c.seed == 3
    assert r.usage.prompt_tokens == len(tiny_engine.tokenize(HELLO))
    assert r.usage.completion_tokens == 8 and r.usage.total_tokens == r.usage.prompt_tokens + 8


def test_n3_indexed_seeded_and_counted(client, tiny_engine):
    r = chat(client, n=3, seed=10, max_tokens=12, logprobs=True)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.seed for c in r.choices] == [10, 11, 12]
    assert len({c.message.content for c in r.choices}) == 3  # independent samples
    assert r.usage.prompt_tokens == len(tiny_engine.tokenize(HELLO))  # once, not n times
    assert r.usage.completion_tokens == sum(len(c.logprobs.content) for c in r.choices)


def test_choice_i_reproduces_alone_with_seed_plus_i(client):
    many = chat(client, n=3, seed=41, max_tokens=10)
    for i, c in enumerate(many.choices):
        (alone,) = chat(client, n=1, seed=41 + i, max_tokens=10).choices
        assert (alone.message.content, alone.finish_reason) == (c.message.content, c.finish_reason)


def test_without_seed_each_choice_reports_a_reproducible_seed(client):
    r = chat(client, n=3, max_tokens=10)
    seeds = [c.seed for c in r.choices]
    assert len(set(seeds)) == 3 and all(isinstance(s, int) for s in seeds)
    (again,) = chat(client, seed=seeds[1], max_tokens=10).choices
    assert again.message.content == r.choices[1].message.content


def test_roles_and_text_parts(client, tiny_engine):
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello! "},
                                          {"type": "text", "text": "Tell me a story."}]}]
    a, b = chat(client, messages=parts, seed=5), chat(client, messages=HELLO, seed=5)
    assert a.choices[0].message.content == b.choices[0].message.content
    convo = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello."}, {"role": "developer", "content": "Be kind."},
             {"role": "user", "content": "Again"}]
    r = chat(client, messages=convo, n=2, seed=5)
    assert len(r.choices) == 2 and r.usage.prompt_tokens == len(tiny_engine.tokenize(convo))


def test_max_completion_tokens_counts_every_choice(client):
    r = chat(client, n=2, max_tokens=None, max_completion_tokens=5, extra_body=NO_EOS)
    assert r.usage.completion_tokens == 10 and {c.finish_reason for c in r.choices} == {"length"}


def test_stop_string_ends_each_choice(client):
    full = chat(client, seed=7, max_tokens=16, extra_body=NO_EOS).choices[0].message.content
    stop = full[len(full) // 2:][:3]
    r = chat(client, seed=7, max_tokens=16, stop=[stop, "\x00never"], extra_body=NO_EOS)
    c = r.choices[0]
    assert c.message.content == full[:full.index(stop)] and c.finish_reason == "stop" and c.stop_reason == stop


def test_temperature_zero_gives_n_identical_choices(client):
    r = chat(client, n=3, temperature=0, max_tokens=10)
    assert len(r.choices) == 3 and len({c.message.content for c in r.choices}) == 1


def test_logprobs_and_top_logprobs(client):
    r = chat(client, n=2, seed=2, logprobs=True, top_logprobs=3, extra_body=NO_EOS)
    for c in r.choices:
        assert len(c.logprobs.content) == 8
        for t in c.logprobs.content:
            tops = [x.logprob for x in t.top_logprobs]
            assert len(tops) == 3 and tops == sorted(tops, reverse=True) and t.logprob <= tops[0] <= 0
            assert bytes(t.bytes).decode(errors="replace") == t.token


def test_logit_bias_and_penalties(client, tiny_engine):
    yes = tiny_engine.tokenize(" yes")[0]
    r = chat(client, n=2, seed=1, max_tokens=4, logit_bias={str(yes): 100}, presence_penalty=0.5,
             frequency_penalty=0.5, top_p=0.9, temperature=0.7, extra_body=NO_EOS)
    assert [c.message.content for c in r.choices] == [" yes" * 4] * 2


def test_harmless_and_neutral_fields_are_accepted(client):
    r = chat(client, user="u1", metadata={"k": "v"}, store=False, parallel_tool_calls=False, service_tier="auto",
             response_format={"type": "text"}, tools=[], tool_choice="none", stream=False)
    assert len(r.choices) == 1


def test_model_may_be_omitted(http):
    r = http.post("/v1/chat/completions", json={"messages": HELLO, "max_tokens": 4})
    assert r.status_code == 200 and r.json()["model"] == MODEL


async def test_async_client_8_concurrent_requests_with_n2(aclient, tiny_engine):
    async def one(seed):
        return await aclient.chat.completions.create(model=MODEL, messages=HELLO, n=2, seed=seed, max_tokens=12)

    results = await asyncio.wait_for(asyncio.gather(*(one(100 + 10 * k) for k in range(8))), timeout=120)
    for k, r in enumerate(results):
        expected = await asyncio.to_thread(tiny_engine.generate, HELLO, n=2, seed=100 + 10 * k, max_tokens=12)
        assert [c.index for c in r.choices] == [0, 1]
        assert [(c.seed, c.message.content) for c in r.choices] == [(c.seed, c.text) for c in expected.choices]
        assert r.usage.completion_tokens == expected.usage.completion_tokens


def test_a_final_assistant_message_is_a_past_turn_unless_continue_final_message(client, http, tiny_engine):
    messages = [{"role": "user", "content": "Name a fruit."}, {"role": "assistant", "content": "I like ba"}]
    args = dict(model=MODEL, messages=messages, n=2, seed=3, max_tokens=6)
    new_turn = client.chat.completions.create(**args, extra_body=NO_EOS)
    continued = client.chat.completions.create(**args, extra_body={"continue_final_message": True, **NO_EOS})
    ids = tiny_engine.tokenizer.apply_chat_template(messages, continue_final_message=True, tokenize=True)["input_ids"]
    raw = tiny_engine.generate(ids, n=2, seed=3, max_tokens=6, ignore_eos=True)
    assert [c.message.content for c in continued.choices] == [c.text for c in raw.choices]
    assert [c.message.content for c in new_turn.choices] != [c.text for c in raw.choices]
    assert continued.usage.prompt_tokens == len(ids) < new_turn.usage.prompt_tokens
    bad = http.post("/v1/chat/completions", json={**args, "messages": messages[:1], "continue_final_message": True})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "messages"
