"""The UI's handlers against the tiny engine: streaming, cancel, reproduce, parsing, hints (no Gradio involved)."""
import asyncio
import itertools
import time

import pytest

from nsample.errors import InvalidRequest, NSampleError
from nsample.ui import handlers
from nsample.ui.run import RunSpec, parse_seed, parse_stop

CHAT = RunSpec(mode="chat", system="You are terse.", user="Name a colour.", n=3, seed=7, max_tokens=24)


async def collect(engine, spec, interval=0.0):
    """Every snapshot's texts, finish reasons and token counts, and the final Run."""
    snaps, run = [], None
    async for run in handlers.generate(engine, spec, interval=interval):
        snaps.append(([c.text for c in run.cards], [c.finish_reason for c in run.cards], [c.tokens for c in run.cards]))
    return snaps, run


async def wait_idle(engine, timeout=10.0):
    deadline = time.monotonic() + timeout
    while engine.load_info != {"waiting": 0, "active": 0}:
        assert time.monotonic() < deadline, f"engine still busy: {engine.load_info}"
        await asyncio.sleep(0.02)


async def test_streaming_grows_n_texts_together(tiny_engine):
    snaps, run = await collect(tiny_engine, CHAT)
    assert run.done and len(run.cards) == 3
    first_texts, first_finish, _ = snaps[0]
    assert first_texts == ["", "", ""] and first_finish == [None, None, None]  # cards exist before any token
    assert [c.seed for c in run.cards] == [7, 8, 9]
    for (before, _, _), (after, _, _) in itertools.pairwise(snaps):
        assert all(b2.startswith(b1) for b1, b2 in zip(before, after))  # each text only grows
    growing = [s for s in snaps[1:-1] if all(s[0])]
    assert len(snaps) > 3 and growing, "expected intermediate snapshots with all three texts under way"
    texts = [c.text for c in run.cards]
    assert all(texts) and len(set(texts)) == 3
    assert texts == [c.text for c in run.result.choices]  # the streamed cards are the engine's result
    assert [c.tokens for c in run.cards] == [len(c.token_ids) for c in run.result.choices]
    assert all(c.finish_reason in ("stop", "length") and c.time_s > 0 for c in run.cards)


async def test_throttle_limits_snapshots(tiny_engine):
    spec = RunSpec(mode="completion", prompt="Once upon a time", n=2, seed=1, max_tokens=40)
    fast, _ = await collect(tiny_engine, spec, interval=0.0)
    slow, run = await collect(tiny_engine, spec, interval=10.0)
    assert len(slow) == 2 and run.done  # submit, then the finished run: no update in between at a 10 s interval
    assert len(fast) > len(slow)


async def test_closing_the_stream_cancels_in_the_engine(tiny_engine):
    spec = RunSpec(mode="completion", prompt="Count:", n=4, seed=3, max_tokens=1500)
    stream = handlers.generate(tiny_engine, spec, interval=0.0)
    async for run in stream:
        if all(c.tokens >= 2 for c in run.cards):
            break
    await stream.aclose()
    await wait_idle(tiny_engine)
    assert not run.done and run.cancelled
    assert all(c.finish_reason == "cancelled" for c in run.cards)
    assert all(2 <= c.tokens < 1500 for c in run.cards)


async def test_reproduce_one_choice_alone(tiny_engine):
    _, run = await collect(tiny_engine, RunSpec(mode="chat", user="Hi", n=4, max_tokens=20))  # random seeds
    for index in (0, 3):
        repro = await handlers.reproduce(tiny_engine, run, index)
        assert repro.identical and repro.seed == run.cards[index].seed
        assert repro.text == run.cards[index].text and repro.token_ids == run.result.choices[index].token_ids
    # the comparison is not vacuous: another choice (another seed) is a different token sequence
    other = await handlers.reproduce(tiny_engine, run, 1)
    assert other.token_ids != run.result.choices[0].token_ids


async def test_reproduce_needs_a_finished_run(tiny_engine):
    with pytest.raises(InvalidRequest):
        await handlers.reproduce(tiny_engine, None, 0)
    _, run = await collect(tiny_engine, RunSpec(n=2, max_tokens=4))
    with pytest.raises(InvalidRequest):
        await handlers.reproduce(tiny_engine, run, 2)


async def test_greedy_choices_are_identical(tiny_engine):
    _, run = await collect(tiny_engine, RunSpec(mode="chat", user="Hi", n=3, temperature=0.0, max_tokens=12))
    assert len({c.text for c in run.cards}) == 1 and run.cards[0].text


async def test_engine_errors_reach_the_caller(tiny_engine):
    with pytest.raises(NSampleError) as e:
        await collect(tiny_engine, RunSpec(n=tiny_engine.config.max_n + 1, max_tokens=4))
    assert e.value.param == "n"


def test_greedy_hint():
    assert "identical" in handlers.greedy_hint(0.0, 4)
    assert handlers.greedy_hint(0.0, 1) == "" and handlers.greedy_hint(0.7, 4) == ""


def test_spec_from_widget_values():
    spec = RunSpec.from_ui("chat", "Be brief.", "Hello", "", 3.0, " 42 ", 0.5, 0.9, 64.0, ["\\n", "END"])
    assert spec.engine_prompt == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    assert spec.sampling == {"n": 3, "seed": 42, "temperature": 0.5, "top_p": 0.9, "max_tokens": 64,
                             "stop": ["\n", "END"], "logprobs": False}
    raw = RunSpec.from_ui("completion", "ignored", "ignored", "Once", 2, "", 1.0, 1.0, 8, None)
    assert raw.engine_prompt == "Once" and raw.seed is None and raw.stop == ()
    assert RunSpec.from_ui("chat", "  ", "Hi", "", 1, "", 1, 1, 8, []).engine_prompt == [
        {"role": "user", "content": "Hi"}]
    assert raw.alone(99).sampling["n"] == 1 and raw.alone(99).seed == 99


def test_bad_widget_values_are_invalid_requests():
    assert parse_seed("") is None and parse_seed(None) is None and parse_seed("-5") == -5
    with pytest.raises(InvalidRequest):
        parse_seed("1.5")
    with pytest.raises(InvalidRequest):
        parse_stop(["a", "b", "c", "d", "e"])
    with pytest.raises(InvalidRequest):
        RunSpec.from_ui("poetry", "", "", "", 1, "", 1, 1, 8, [])
