"""Continuous batching on the tiny model: one decode forward per step across requests, fair admission, shared memory."""
import threading
import time

import httpx
import pytest
from api_helpers import wait_until
from engine_device import KV_SCALE, make_tiny_engine
from forward_recorder import decode_cohorts, forward_shapes, prefill_packs
from live_server import live_server

from nsample.engine import Engine, request_state
from nsample.server import create_app


@pytest.fixture
def fresh():
    """A private tiny engine, for tests that configure it or watch every forward it runs."""
    engines = []

    def make(**config) -> Engine:
        engines.append(make_tiny_engine(**config))
        return engines[-1]

    yield make
    for e in engines:
        e.close()


DECODERS = ["auto", "none"]  # quantized: the C++ decoder where the kernels run; float32: the model's own forward


@pytest.mark.parametrize("quantize", DECODERS)
def test_one_decode_forward_per_step_for_four_concurrent_requests(fresh, quantize):
    engine = fresh(quantize=quantize)
    asks = [("First prompt", 3), ("A second, longer prompt than the first", 1), ("The third prompt", 2),
            ("Fourth one", 4)]
    with forward_shapes(engine) as shapes, prefill_packs(engine) as packs:
        with engine.scheduler.held():
            reqs = [engine.submit(p, n=n, seed=7, max_tokens=12, ignore_eos=True) for p, n in asks]
        results = [r.result(timeout=120) for r in reqs]
    lengths = sorted(len(r.prompt_token_ids) for r in results)
    assert [s for s in shapes if s[1] > 1] == [(1, sum(lengths))]  # the four prompts prefilled in one forward
    assert packs == [lengths]  # ... packed, shortest first
    decodes = [s for s in shapes if s[1] == 1]
    assert decodes == [(10, 1)] * 11  # 12 tokens each: 11 forwards of all 3+1+2+4 rows, not 4 x 11 forwards
    for (prompt, n), r in zip(asks, results):
        alone = engine.generate(prompt, n=n, seed=7, max_tokens=12, ignore_eos=True)
        assert [c.token_ids for c in r.choices] == [c.token_ids for c in alone.choices]


def test_requests_that_sample_alike_draw_in_one_call_each_as_it_would_alone(fresh, monkeypatch):
    engine = fresh()
    asks = [("Alike one", dict(n=1, seed=1)), ("Alike two", dict(n=3, seed=2)),
            ("Own top-k", dict(n=2, seed=3, top_k=5)), ("Own penalty", dict(n=1, seed=4, presence_penalty=0.5)),
            ("Alike three", dict(n=1, seed=5)), ("Alike, but later", dict(n=1, seed=6))]
    calls, draw = [], request_state.sampler.sample_rows

    def counted(logits, *args, **kwargs):
        calls.append(len(logits))
        return draw(logits, *args, **kwargs)

    def submit(prompt, kw):
        return engine.submit(prompt, **kw, temperature=0.9, max_tokens=6, ignore_eos=True)

    monkeypatch.setattr(request_state.sampler, "sample_rows", counted)
    with engine.scheduler.held():
        reqs = [submit(*ask) for ask in asks[:5]]
    while not reqs[0].started:
        time.sleep(0.001)
    reqs.append(submit(*asks[5]))  # drawn with the alike ones at another position in its output
    results = [r.result(timeout=120) for r in reqs]
    assert calls[:3] == [1 + 3 + 1, 2, 1]  # the alike rows in one call; top-k and the penalty each their own
    assert 1 + 3 + 1 + 1 in calls
    for (prompt, kw), r in zip(asks, results):
        assert [c.token_ids for c in r.choices] == [c.token_ids for c in submit(prompt, kw).result().choices]


@pytest.mark.parametrize("quantize", DECODERS)
def test_requests_that_start_together_share_a_cohort_and_each_keeps_its_own_tokens(fresh, quantize):
    engine = fresh(quantize=quantize)
    asks = {"a": ("Cohort A", dict(n=3, seed=5, max_tokens=30)),
            "b": ("Cohort B, whose rows finish early", dict(n=2, seed=6, max_tokens=6)),
            "c": ("Cohort C, cancelled", dict(n=2, seed=7, max_tokens=4000)),
            "d": ("D arrives later", dict(n=2, seed=8, max_tokens=10))}

    def submit(key):
        return engine.submit(asks[key][0], **asks[key][1], ignore_eos=True)

    with decode_cohorts(engine) as cohorts:
        with engine.scheduler.held():
            reqs = {key: submit(key) for key in "abc"}
        events = iter(reqs["c"])
        for _ in range(2 * 3):  # three steps of C's rows
            next(events)
        reqs["d"] = submit("d")
        reqs["c"].cancel()
        results = {key: reqs[key].result(timeout=120) for key in "abd"}
    assert cohorts[0] == [[3, 2, 2]]  # the three that arrived together: one cohort, one own-token call per layer
    assert [[3], [2]] in cohorts  # C cancelled, B finished: A's rows kept, D in a cohort of its own
    assert all(sum(map(len, step)) <= 2 for step in cohorts[cohorts.index([[3], [2]]):])  # ... then each alone
    for key, r in results.items():
        alone = engine.generate(asks[key][0], **asks[key][1], ignore_eos=True)
        assert [c.token_ids for c in r.choices] == [c.token_ids for c in alone.choices]


def test_a_cancelled_request_leaves_the_batch_at_the_next_step(fresh):
    engine = fresh()
    with forward_shapes(engine) as shapes:
        with engine.scheduler.held():
            keep = engine.submit("Keep going", n=3, seed=1, max_tokens=40, ignore_eos=True)
            drop = engine.submit("Drop me", n=2, seed=1, max_tokens=4000, ignore_eos=True)
        events = iter(drop)
        for _ in range(2 * 5):  # five steps of both rows
            next(events)
        drop.cancel()
        at_cancel = len(shapes)
        keep.result(timeout=120)
        assert wait_until(lambda: engine.load_info == {"waiting": 0, "active": 0})
    widths = [s[0] for s in shapes[at_cancel:] if s[1] == 1]
    assert widths and set(widths[2:]) == {3}  # at most the step in flight still carries the cancelled rows
    assert drop.done.is_set() and sum(len(c.token_ids) for c in drop.choices) < 4000


def test_streams_of_concurrent_requests_interleave(fresh):
    engine = fresh()
    with engine.scheduler.held():
        a = engine.submit("Stream A", n=2, seed=3, max_tokens=20, ignore_eos=True)
        b = engine.submit("Stream B", n=1, seed=4, max_tokens=20, ignore_eos=True)
    order, lock = [], threading.Lock()

    def read(name, req):
        for _ in req:
            with lock:
                order.append(name)

    threads = [threading.Thread(target=read, args=(name, r)) for name, r in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert order.count("a") == 40 and order.count("b") == 20
    first_a_end, first_b = len(order) - order[::-1].index("a"), order.index("b")
    assert first_b < 10 and first_a_end > 30  # b started long before a ended: they ran side by side


def test_requests_that_fit_alone_but_not_together_run_one_after_the_other(fresh):
    engine = fresh(kv_budget_gb=0.001 * KV_SCALE)  # 1 MiB; the tiny model's KV is 512 bytes per token (float32)
    prompt = [100 + i % 50 for i in range(40)]
    need = engine._kv_bytes(len(prompt), 4, 400)
    assert need < engine.kv_budget < 2 * need
    with forward_shapes(engine) as shapes, live_server(create_app(engine)) as url:
        with engine.scheduler.held():
            first = engine.submit(prompt, n=4, seed=1, max_tokens=400, ignore_eos=True)
            second = engine.submit(prompt, n=4, seed=5, max_tokens=400, ignore_eos=True)
        health = httpx.get(f"{url}/health").json()
        results = [first.result(timeout=120), second.result(timeout=120)]
    assert (health["waiting"], health["active"]) == (1, 1)
    assert health["kv_cache"] == {"budget_bytes": engine.kv_budget, "reserved_bytes": need, "waiting_bytes": need}
    assert all(len(c.token_ids) == 400 for r in results for c in r.choices)
    assert max(s[0] for s in shapes) == 4  # never both in one batch
    assert engine.health()["kv_cache"]["reserved_bytes"] == 0


def test_the_default_kv_budget_is_half_the_free_memory_or_where_no_such_count_half_psutils_available(fresh,
                                                                                                    monkeypatch):
    import types

    import psutil

    counts = {"SC_AVPHYS_PAGES": 3 * 2**20, "SC_PAGE_SIZE": 4096}  # 12 GiB free, as Linux counts it

    def sysconf(name):
        if name not in counts:  # macOS: sysconf has no SC_AVPHYS_PAGES
            raise ValueError("unrecognized configuration name")
        return counts[name]

    monkeypatch.setattr("nsample.engine.engine.os", types.SimpleNamespace(sysconf=sysconf))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=10 * 2**30))
    assert fresh().kv_budget == 6 * 2**30
    del counts["SC_AVPHYS_PAGES"]
    assert fresh().kv_budget == 5 * 2**30  # not a fixed 4 GiB whatever the machine


def test_fair_admission_takes_clients_in_turn(fresh):
    engine = fresh(max_active=1)
    with engine.scheduler.held():
        flood = [engine.submit("Flood", n=1, seed=i, max_tokens=3, client="bot") for i in range(6)]
        page = engine.submit("Page", n=1, seed=0, max_tokens=3, client="page")
    page.result(timeout=120)
    assert sum(r.done.is_set() for r in flood) <= 2  # admitted right after the bot's first, not after all six
    for r in flood:
        r.result(timeout=120)


def test_one_client_cannot_fill_the_queue(fresh):
    engine = fresh(max_queue=8, max_queue_per_client=3)
    with engine.scheduler.held():
        mine = [engine.submit("Mine", max_tokens=2, client="bot") for _ in range(3)]
        with pytest.raises(Exception) as e:
            engine.submit("One more", max_tokens=2, client="bot")
        assert e.value.status == 429 and e.value.code == "queue_full"
        other = engine.submit("Other", max_tokens=2, client="page")
    for r in [*mine, other]:
        r.result(timeout=120)


def staggered_stop(engine, prompt, **kw) -> list[str]:
    """A stop string at which this request's choices end at three different steps (the model is random)."""
    for stop in "esaotinrlh":
        if len({len(c.token_ids) for c in engine.generate(prompt, stop=[stop], **kw).choices}) == 3:
            return [stop]
    pytest.fail("no stop string staggers the choices")


def test_fixed_width_pads_each_request_and_keeps_the_contract_in_a_mixed_batch(fresh):
    engine = fresh(decode_width=4)
    stop = staggered_stop(engine, "Mixed width", n=3, seed=5, max_tokens=30)
    with forward_shapes(engine) as shapes:
        with engine.scheduler.held():
            wide = engine.submit("Mixed width", n=3, seed=5, max_tokens=30, stop=stop)
            other = engine.submit("Another prompt", n=2, seed=9, max_tokens=30)
        wide, other = wide.result(timeout=120), other.result(timeout=120)
    assert {s[0] for s in shapes if s[1] == 1} <= {4, 8}
    lengths = sorted(len(c.token_ids) for c in wide.choices)
    assert len(set(lengths)) == 3  # its rows ended at different steps...
    assert shapes.count((8, 1)) == lengths[-1] - 1  # ...and both requests shared every forward (4 + 4 rows) until
    # the wide one's last row ended: its finished rows stayed in as padding
    for c in wide.choices:
        alone = engine.generate("Mixed width", n=1, seed=5 + c.index, max_tokens=30, stop=stop).choices[0]
        assert (alone.token_ids, alone.text, alone.finish_reason) == (c.token_ids, c.text, c.finish_reason)


def test_a_long_prompt_is_prefilled_in_chunks_between_decode_steps(fresh):
    engine = fresh(prefill_chunk=64)
    long_prompt = [100 + i % 50 for i in range(300)]
    with forward_shapes(engine) as shapes:
        running = engine.submit("Running", n=2, seed=1, max_tokens=30, ignore_eos=True)
        events = iter(running)  # kept: an abandoned stream would cancel its request
        next(events)
        late = engine.submit(long_prompt, n=2, seed=2, max_tokens=5, ignore_eos=True)
        late.result(timeout=120)
        running.result(timeout=120)
    chunks = [s[1] for s in shapes if s[1] > 1 and s[1] != len(running.prompt_ids)]
    assert chunks == [64, 64, 64, 64, 44]
    first_chunk = shapes.index((1, 64))
    assert shapes[first_chunk + 1] == (2, 1)  # the running stream decodes between chunks
    alone = engine.generate(long_prompt, n=2, seed=2, max_tokens=5, ignore_eos=True)
    assert [c.token_ids for c in alone.choices] == [c.token_ids for c in late.result().choices]


def test_a_short_prompt_is_prefilled_ahead_of_a_long_one(fresh):
    engine = fresh(prefill_chunk=64)
    long_prompt = [100 + i % 50 for i in range(1000)]
    with prefill_packs(engine) as packs:
        late = engine.submit(long_prompt, n=1, seed=2, max_tokens=2)
        assert wait_until(lambda: [64] in packs)
        short = engine.submit("A short question", n=1, seed=3, max_tokens=2)
        short_len = len(short.prompt_ids)
        short.result(timeout=120), late.result(timeout=120)
    if engine.runner.fused is not None:  # a quantized model (int8 on a CPU with AMX): the short prompt's chunk runs
        at = packs.index([short_len])  # in the C++ kernels, then its step's model forward takes the long one's rest
        packs[at:at + 2] = [packs[at] + packs[at + 1]]
    assert all(sum(pack) == 64 for pack in packs[:-1]) and sum(map(sum, packs)) == 1000 + short_len
    joined = packs.index([short_len, 64 - short_len])  # the short prompt whole, first, then a long chunk's rest
    assert joined < len(packs) - 3  # well before the long prompt's last chunk
    assert [c.token_ids for c in short.result().choices] == \
           [c.token_ids for c in engine.generate("A short question", n=1, seed=3, max_tokens=2).choices]
