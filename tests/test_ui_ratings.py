"""Ratings on the page's cards (👍 / 👎, best, notes), blind mode and the session's DPO pairs, without Gradio."""
import json

import pytest
from test_ui_handlers import collect

from nsample.ui import ratings
from nsample.ui.cards import run_cards
from nsample.ui.export import run_record
from nsample.ui.run import Blind, RunSpec
from nsample.ui.tree import RunTree

SPEC = RunSpec(mode="chat", user="What is 17 + 25? Answer with just the number.", n=4, seed=100, max_tokens=8,
               logprobs=True)


@pytest.fixture
async def run(tiny_engine):
    _, run = await collect(tiny_engine, SPEC)
    RunTree().add(run)
    return run


def test_thumbs_toggle_and_best_is_one_card(run):
    ratings.rate(run, 0, "up")
    ratings.rate(run, 1, "down")
    assert run.ratings.thumbs == {0: "up", 1: "down"}
    ratings.rate(run, 0, "up")  # again: off
    ratings.rate(run, 1, "up")  # the other thumb replaces it
    assert run.ratings.thumbs == {1: "up"}
    ratings.rate(run, 2, "best")
    ratings.rate(run, 3, "best")
    assert run.ratings.best == 3
    ratings.rate(run, 3, "down")  # a 👎 on the best card takes best away
    assert run.ratings.best is None and run.ratings.thumbs[3] == "down"
    with pytest.raises(ValueError):
        ratings.rate(run, 0, "meh")


def test_best_and_up_against_down_and_unrated(run):
    assert ratings.sides(run) == ([], [])  # nothing chosen: no pairs
    ratings.rate(run, 2, "best")
    ratings.rate(run, 0, "up")
    ratings.rate(run, 1, "down")
    assert ratings.sides(run) == ([0, 2], [1, 3])
    ratings.note(run, 2, "  right answer ")
    pairs = ratings.run_pairs(run)
    assert pairs[["chosen_index", "rejected_index"]].values.tolist() == [[0, 1], [0, 3], [2, 1], [2, 3]]
    row = pairs.iloc[2]
    assert row["prompt"] == SPEC.engine_prompt
    assert row["chosen"] == [{"role": "assistant", "content": run.cards[2].text}]
    assert row["chosen_seed"] == 102 and row["rejected_seed"] == 101 and row["chosen_note"] == "right answer"
    assert row["settings"]["seed"] == 100 and row["run"] == run.id and row["model"] == run.model


async def test_pairs_accumulate_over_the_session(tiny_engine, run, tmp_path):
    tree = RunTree()
    tree.add(run)
    _, other = await collect(tiny_engine, RunSpec(mode="completion", prompt="2 + 2 =", n=2, seed=5, max_tokens=4))
    tree.add(other)
    ratings.rate(run, 1, "best")
    ratings.rate(other, 0, "up")
    path, count = ratings.write_pairs(tree, tmp_path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert count == len(rows) == 3 + 1
    assert [r["run"] for r in rows] == [run.id] * 3 + [other.id]
    assert rows[-1]["prompt"] == "2 + 2 =" and rows[-1]["chosen"] == other.cards[0].text  # standard form for text
    assert ratings.write_pairs(RunTree(), tmp_path) == (None, 0)


def test_blind_cards_hide_index_seed_and_logprobs_until_a_best_pick(run):
    run.blind = Blind.draw(len(run.cards), seed=7)
    assert sorted(run.blind.order) == [0, 1, 2, 3] and Blind.draw(4, seed=7).order == run.blind.order
    cards = run_cards(run)
    for card, html in zip(run.cards, cards):
        assert f"seed {card.seed}" not in html and "ns-logprob" not in html and "--p:" not in html
        assert f"#{card.index}<" not in html and run.blind.label(card.index) in html
    assert ratings.hidden(run) and not ratings.rate(run, 0, "up")  # a thumb does not reveal
    assert ratings.rate(run, 2, "best") and not ratings.hidden(run)  # a best pick does
    html = run_cards(run)[2]
    assert f"seed {run.cards[2].seed}" in html and "#2<" in html and "ns-best" in html


def test_the_json_record_carries_ratings_and_blind_order(run):
    run.blind = Blind.draw(len(run.cards), seed=3)
    ratings.rate(run, 1, "down")
    ratings.rate(run, 0, "best")
    ratings.note(run, 0, "clear")
    record = run_record(run)
    assert record["choices"][0]["rating"] == {"thumb": None, "best": True, "note": "clear"}
    assert record["choices"][1]["rating"]["thumb"] == "down"
    assert record["blind"] == {"seed": 3, "order": run.blind.order, "revealed": True}
