"""Streaming on the tiny model: interleaving, deltas that join to the text, stop strings, cancellation."""
import asyncio
import time

import pytest


def _whole_chars(tokenizer, ids) -> str:
    """A choice's text from its tokens: decoded, less the "\ufffd" of a character its last tokens only began."""
    return tokenizer.decode(ids, skip_special_tokens=True).rstrip("\ufffd")


def _joined(events, n):
    texts, finishes = [""] * n, [[] for _ in range(n)]
    for ev in events:
        texts[ev.index] += ev.text
        if ev.finish_reason:
            finishes[ev.index].append(ev.finish_reason)
    return texts, finishes


def test_stream_interleaves_all_choices_and_joins_to_the_final_text(tiny_engine):
    req = tiny_engine.submit("Stream me", n=4, seed=8, max_tokens=24, ignore_eos=True)
    events = list(req)
    result = req.result()
    first_seen = [next(k for k, ev in enumerate(events) if ev.index == i) for i in range(4)]
    first_finish = min(k for k, ev in enumerate(events) if ev.finish_reason)
    assert max(first_seen) < first_finish  # every choice starts before any ends
    texts, finishes = _joined(events, 4)
    assert texts == [c.text for c in result.choices]
    assert finishes == [["length"]] * 4
    for c in result.choices:
        assert c.text == _whole_chars(tiny_engine.tokenizer, c.token_ids)


def test_non_ascii_text_streams_intact(tiny_engine):
    found = False
    for seed in range(0, 40, 4):
        req = tiny_engine.submit("Ünïcödé: 東京 🙂", n=4, seed=seed, max_tokens=48, ignore_eos=True)
        events = list(req)
        texts, _ = _joined(events, 4)
        result = req.result()
        assert texts == [c.text for c in result.choices]
        assert all(c.text == _whole_chars(tiny_engine.tokenizer, c.token_ids) for c in result.choices)
        found |= any(ord(ch) > 127 for t in texts for ch in t)
    assert found, "no choice produced non-ASCII text; the test proved nothing"


@pytest.mark.parametrize("text", ["東京タワー", "naïve — ünïcödé ✓", "🙂🙃🤖 done"])
def test_detokenizer_holds_split_characters_until_complete(tiny_engine, text):
    from nsample.models.detokenizer import Detokenizer

    ids = tiny_engine.tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = [tiny_engine.tokenizer.decode([i]) for i in ids]
    assert any("\ufffd" in p for p in pieces), "no character split across tokens; the test proves nothing"
    d = Detokenizer(tiny_engine.tokenizer.backend_tokenizer, [1], ())
    deltas = []
    for i in ids:
        d.add(i)
        deltas.append(d.delta(final=False))
    assert "".join(deltas) == text and not any("\ufffd" in x for x in deltas)


def test_a_choice_cut_inside_a_character_leaves_that_part_out_of_its_text(tiny_engine):
    tok = tiny_engine.tokenizer
    part = tok("🙂", add_special_tokens=False)["input_ids"][0]  # the emoji's first bytes: not a character alone
    assert tok.decode([part]) == "\ufffd"
    req = tiny_engine.submit("Cut", n=2, seed=0, max_tokens=1, logit_bias={part: 100}, logprobs=True)
    streamed = "".join(ev.text for ev in req)
    r = req.result()
    assert [(c.token_ids, c.text, c.finish_reason) for c in r.choices] == [([part], "", "length")] * 2
    assert streamed == ""
    assert [c.logprobs[0].token_bytes for c in r.choices] == ["🙂".encode()[:2]] * 2  # the part, in its bytes


def _stop_spanning_tokens(engine, prompt, seed):
    """A stop string cut from a real output so that it spans a token boundary, and where it starts."""
    c = engine.generate(prompt, n=1, seed=seed, max_tokens=40, ignore_eos=True).choices[0]
    pieces = [engine.tokenizer.decode(c.token_ids[:k], skip_special_tokens=True) for k in range(len(c.token_ids) + 1)]
    for k in range(3, len(pieces) - 2):
        end = len(pieces[k])
        stop = c.text[end - 2:end + 3]
        if len(stop) == 5 and c.text.find(stop) == end - 2 and stop.strip() == stop:
            return c, stop, end - 2
    pytest.skip("no suitable stop string in this output")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stop_strings_never_leak_even_split_across_tokens(tiny_engine, seed):
    c, stop, at = _stop_spanning_tokens(tiny_engine, "Stop strings", seed)
    req = tiny_engine.submit("Stop strings", n=1, seed=seed, max_tokens=40, ignore_eos=True, stop=[stop, "@@@@"])
    events = list(req)
    r = req.result().choices[0]
    assert r.text == c.text[:at] and r.finish_reason == "stop" and r.stop_reason == stop
    streamed = "".join(ev.text for ev in events)
    assert streamed == r.text and stop not in streamed
    assert not any(stop[:3] in ev.text for ev in events if ev.text and stop[:3] not in r.text)


def test_stop_applies_to_each_choice_independently(tiny_engine):
    base = tiny_engine.generate("Per choice stops", n=3, seed=20, max_tokens=30, ignore_eos=True)
    stop = base.choices[1].text[6:10]
    r = tiny_engine.generate("Per choice stops", n=3, seed=20, max_tokens=30, ignore_eos=True, stop=stop)
    for before, after in zip(base.choices, r.choices):
        cut = before.text.find(stop)
        if cut == -1:
            assert after.text == before.text and after.finish_reason == "length"
        else:
            assert after.text == before.text[:cut] and after.finish_reason == "stop"
    assert r.choices[1].finish_reason == "stop"


def _wait_idle(engine, timeout=10.0):
    deadline = time.monotonic() + timeout
    while engine.load_info != {"waiting": 0, "active": 0}:
        assert time.monotonic() < deadline, engine.load_info
        time.sleep(0.01)


def test_each_token_is_published_before_the_forward_that_follows_it(tiny_engine, monkeypatch):
    """A stream sees the token a step sampled before that step's decode forward runs, not a forward later; and
    a request whose rows all ended at a step is finished before that step's forward."""
    seen, short = [], []  # per decode forward: each request's published events, and whether `short` is done

    def recording(batch):
        seen.append(({st.req: st.req.published for st in batch}, short[0].done.is_set() if short else None))
        decode(batch)

    decode = tiny_engine.runner._decode
    monkeypatch.setattr(tiny_engine.runner, "_decode", recording)
    # long enough to outlast `short` on a busy machine (at 6 tokens it once ended first, in a run of the whole suite)
    long_ = tiny_engine.submit("Publish me", n=2, seed=1, max_tokens=40, ignore_eos=True)
    while not long_.started:
        time.sleep(0.001)
    short.append(tiny_engine.submit("And me", n=3, seed=2, max_tokens=2, ignore_eos=True))
    long_.result(), short[0].result()
    assert [pub[long_] for pub, _ in seen if long_ in pub] == list(range(2, 80, 2))  # k tokens of 2 rows out
    with_short = [k for k, (pub, _) in enumerate(seen) if short[0] in pub]
    assert [seen[k][0][short[0]] for k in with_short] == [3]  # its first token out; its second ends it
    assert seen[with_short[0] + 1][1] is True  # ended before the next forward ran


def test_abandoning_a_stream_frees_its_rows_at_the_next_step(tiny_engine):
    steps = []
    handle = tiny_engine.model.model.register_forward_hook(lambda *a: steps.append(time.monotonic()))
    try:
        stream = tiny_engine.stream("Cancel me", n=4, seed=0, max_tokens=2000, ignore_eos=True)
        for k, _ in enumerate(stream):
            if k == 12:
                break
        stream.close()
        closed_at = time.monotonic()
        _wait_idle(tiny_engine)
    finally:
        handle.remove()
    assert sum(t > closed_at for t in steps) <= 2
    assert len(steps) < 50


async def test_async_stream_and_cancellation(tiny_engine, monkeypatch):
    events = [ev async for ev in tiny_engine.astream("Async", n=3, seed=4, max_tokens=6, ignore_eos=True)]
    assert sorted({ev.index for ev in events}) == [0, 1, 2]
    assert sum(1 for ev in events if ev.finish_reason) == 3
    same = tiny_engine.generate("Async", n=3, seed=4, max_tokens=6, ignore_eos=True)
    assert _joined(events, 3)[0] == [c.text for c in same.choices]

    reqs, submit = [], tiny_engine.submit
    monkeypatch.setattr(tiny_engine, "submit", lambda *a, **kw: reqs.append(submit(*a, **kw)) or reqs[-1])

    async def consume():
        async for _ in tiny_engine.astream("Async cancel", n=2, seed=1, max_tokens=1500, ignore_eos=True):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(_wait_idle, tiny_engine)
    [req] = reqs
    assert req.cancelled and all(len(c.token_ids) < 1500 for c in req.choices)  # not run to the end


def test_a_consumer_whose_event_loop_closed_does_not_break_the_engine(tiny_engine):
    async def read_two():
        req = tiny_engine.submit("Closed loop", n=2, seed=1, max_tokens=4000, ignore_eos=True)
        agen = req.__aiter__()
        await agen.__anext__()
        return req  # the async generator is left open: its loop closes under it

    loop = asyncio.new_event_loop()
    req = loop.run_until_complete(read_two())
    loop.close()
    req.cancel()
    _wait_idle(tiny_engine)
    assert len(tiny_engine.generate("Still alive", n=2, seed=0, max_tokens=3).choices) == 2
