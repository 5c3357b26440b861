"""Links anyone can replay: a run's request in the query string and back, the short-id store, the model note."""
from urllib.parse import urlsplit

import pytest
from test_ui_handlers import collect

from nsample.errors import InvalidRequest
from nsample.ui import ratings
from nsample.ui.links import MAX_LINK_CHARS, LinkStore, link_params, make_link, model_note, parse_link, resolve
from nsample.ui.run import Run, RunSpec

PAGE = "http://127.0.0.1:7860/?old=1#top"


async def test_a_link_replays_the_same_cards(tiny_engine):
    spec = RunSpec(mode="chat", system="Be brief.", user="What is 17 + 25?", n=3, temperature=0.9, top_p=0.95,
                   max_tokens=12, stop=("\n\n", "User:"), logprobs=True)  # no seed: the engine draws one
    _, run = await collect(tiny_engine, spec)
    url, note = make_link(PAGE, run, LinkStore())
    assert url.startswith("http://127.0.0.1:7860/?mode=chat&") and "old=1" not in url and "characters" in note
    link = resolve(urlsplit(url).query, LinkStore())
    assert link.spec == RunSpec(**{**spec.__dict__, "seed": run.cards[0].seed}) and link.model == tiny_engine.name
    _, again = await collect(tiny_engine, link.spec)
    assert [c.text for c in again.cards] == [c.text for c in run.cards]
    assert [c.seed for c in again.cards] == [c.seed for c in run.cards]


async def test_the_picked_card_and_a_branch_travel_with_the_link(tiny_engine):
    spec = RunSpec(mode="completion", prompt="Once upon a time", n=2, seed=3, max_tokens=6, continuation=" there")
    _, run = await collect(tiny_engine, spec)
    run.cut = (1, 4)
    link = parse_link(urlsplit(make_link(PAGE, run, LinkStore())[0]).query)
    assert (link.card, link.cut, link.spec.continuation, link.spec.prompt) == (1, 4, " there", "Once upon a time")
    run.cut = None
    ratings.rate(run, 0, "best")
    assert link_params(run)["card"] == 0 and "cut" not in link_params(run)


def long_run(prompt: str, seed: int) -> Run:
    return Run.start(RunSpec(mode="completion", prompt=prompt, n=1, seed=seed), "m", [seed])


def test_too_long_for_a_url_falls_back_to_a_short_id():
    run = long_run("word " * 3000, 1)
    store = LinkStore(max_runs=2)
    url, note = make_link(PAGE, run, store)
    assert len(url) < 100 and "?run=" in url and "too long for a URL" in note and len(store) == 1
    assert resolve(urlsplit(url).query, store).spec.prompt == "word " * 3000
    for seed in (2, 3):  # bounded: the oldest goes first
        make_link(PAGE, long_run("w " * 5000, seed), store)
    assert len(store) == 2
    with pytest.raises(InvalidRequest, match="no longer kept"):
        resolve(urlsplit(url).query, store)
    tiny = LinkStore(max_chars=1000)
    url, note = make_link(PAGE, run, tiny)
    assert url is None and note.startswith("This prompt is too long for a link")
    assert len(make_link(PAGE, run, LinkStore())[0]) <= MAX_LINK_CHARS


def test_links_without_a_run_bad_links_and_another_model():
    assert parse_link("") is None and parse_link("?utm=x") is None
    with pytest.raises(InvalidRequest):
        parse_link("mode=poetry")
    with pytest.raises(InvalidRequest):
        parse_link("mode=chat&n=two")
    link = parse_link("mode=chat&user=Hi&n=2&seed=5&model=other%2Fmodel")
    assert link.spec.n == 2 and link.spec.seed == 5 and link.spec.user == "Hi"
    assert "other/model" in model_note(link, "nsample/tiny-random") and model_note(link, "other/model") == ""
