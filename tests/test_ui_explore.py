"""Ranking the cards, token shading spans, the compare view and the report of a stopped run, on the tiny engine."""
import math
import re

import pytest
from test_ui_handlers import collect, wait_idle

from nsample import analysis
from nsample.outputs import StreamEvent, TokenLogprob
from nsample.ui import handlers, report
from nsample.ui.cards import card_html
from nsample.ui.compare import compare_html, diff_pieces
from nsample.ui.export import usage_table
from nsample.ui.ranking import order_css, rank
from nsample.ui.run import Run, RunSpec
from nsample.ui.token_spans import spans_html, token_segments

SPEC = RunSpec(mode="completion", prompt="The weather today", n=4, seed=9, max_tokens=20, logprobs=True)


@pytest.fixture(scope="module")
async def scored_run(tiny_engine):
    _, run = await collect(tiny_engine, SPEC)
    return run


def test_logprobs_reach_the_cards(scored_run):
    for card, choice in zip(scored_run.cards, scored_run.result.choices):
        assert len(card.logprobs) == len(choice.token_ids) == card.tokens
        assert card.mean_logprob == pytest.approx(choice.mean_logprob)
        assert f"logprob {choice.mean_logprob:.2f}" in card_html(card)


def test_sort_by_mean_logprob_is_best_of(scored_run):
    ranking = rank(scored_run, "logprob")
    best = analysis.best_of(scored_run.result)
    assert ranking.order[0] == best["index"] and ranking.marks[ranking.order[0]] == "best of n"
    means = [scored_run.cards[i].mean_logprob for i in ranking.order]
    assert means == sorted(means, reverse=True) and sorted(ranking.order) == [0, 1, 2, 3]
    assert order_css(ranking).startswith("<style>") and f"#ns-col-{best['index']} {{ order: 0; }}" in order_css(ranking)


def test_sort_by_length_and_index(scored_run):
    lengths = [scored_run.cards[i].tokens for i in rank(scored_run, "length").order]
    assert lengths == sorted(lengths, reverse=True)
    assert rank(scored_run, "index").order == [0, 1, 2, 3] and not rank(scored_run, "index").marks
    with pytest.raises(ValueError):
        rank(scored_run, "colour")


def test_most_diverse_k_are_marked_first(scored_run):
    ranking = rank(scored_run, "diverse", k=2)
    picks = analysis.most_diverse(scored_run.to_dataframe(), 2)["index"].tolist()
    assert ranking.order[:2] == picks and set(ranking.marks) == set(picks)
    assert ranking.marks[picks[0]] == "diverse pick 1/2" and "differ most" in ranking.note
    assert len(rank(scored_run, "diverse", k=99).marks) == 4  # k is clipped to n
    assert 'class="ns-card ns-marked"' in card_html(scored_run.cards[picks[0]], mark=ranking.marks[picks[0]])


async def test_logprob_sort_without_logprobs_explains_itself(tiny_engine):
    _, run = await collect(tiny_engine, RunSpec(mode="completion", prompt="Hi", n=3, seed=1, max_tokens=6))
    ranking = rank(run, "logprob")
    assert ranking.order == [0, 1, 2] and "Tick **logprobs**" in ranking.note
    assert "ns-logprob" not in card_html(run.cards[0])
    remote_like = Run.start(RunSpec(n=2, logprobs=True), "m", [1, 2], ids_reported=False)
    remote_like.apply(StreamEvent(0, text="Hello"))
    assert "sent no logprobs" in rank(remote_like, "logprob").note


def test_token_spans_carry_probability_and_cut_offsets(scored_run):
    card = scored_run.cards[0]
    html = spans_html(card.text, card.logprobs)
    ends = [int(e) for e in re.findall(r'data-end="(\d+)"', html)]
    assert ends[-1] == len(card.text) and ends == sorted(ends)
    probabilities = [float(p) for p in re.findall(r"--p:([0-9.]+)", html)]
    assert len(probabilities) == len(card.logprobs)
    assert probabilities == pytest.approx([math.exp(t.logprob) for t in card.logprobs], abs=1e-3)
    cut = spans_html(card.text, card.logprobs, cut=ends[0])
    assert cut.count("ns-after-cut") == len(ends) - 1


def test_token_spans_align_trimmed_and_split_text():
    tokens = [TokenLogprob(1, "Hel", -0.1), TokenLogprob(2, "lo", -1.0), TokenLogprob(3, " wor", -2.0),
              TokenLogprob(4, "ld.", -0.5)]
    assert [(s, e) for s, e, _ in token_segments("Hello wor", tokens)] == [(0, 3), (3, 5), (5, 9)]  # stop cut "ld."
    split = [TokenLogprob(1, "caf", -0.1), TokenLogprob(2, "\ufffd", -0.2), TokenLogprob(3, "\ufffd", -0.3),
             TokenLogprob(4, "!", -0.4)]  # é arrived as two byte tokens
    segments = token_segments("café!", split)
    assert "".join("café!"[s:e] for s, e, _ in segments) == "café!" and segments[-1][:2] == (4, 5)
    words = spans_html("two words", [])
    assert re.findall(r'data-end="(\d+)"', words) == ["4", "9"] and "--p" not in words


def test_compare_highlights_the_differing_words(scored_run):
    left, right, ratio = diff_pieces("The cat sat on the mat.", "The dog sat on a mat.")
    assert [p for p, d in left if d] == [" cat", " the"] and [p for p, d in right if d] == [" dog", " a"]
    assert ratio == pytest.approx(2 * 5 / 14)  # 5 of 7 pieces (6 words and the full stop) match on each side
    assert diff_pieces("alpha beta", "gamma delta")[2] == 0  # spaces alone do not make texts alike
    html = compare_html(scored_run, 0, 1)
    assert html.count('class="ns-card"') == 2 and "difflib ratio" in html
    assert compare_html(scored_run, 0, 9) == "" and compare_html(None, 0, 1) == ""


async def test_stopped_run_gets_the_same_report(tiny_engine):
    stream = handlers.generate(tiny_engine, RunSpec(mode="completion", prompt="Count:", n=3, seed=2, max_tokens=1500),
                               interval=0.0)
    async for run in stream:
        if all(c.tokens >= 3 for c in run.cards):
            break
    await stream.aclose()
    await wait_idle(tiny_engine)
    assert run.cancelled and run.ended and not run.done
    rep = report.summarize(run)
    assert rep.headline.startswith("**Stopped run, partial texts.**") and "Vendi score" in rep.headline
    bars = rep.tokens_figure.data
    assert [b.name for b in bars] == ["finished: cancelled"] and list(bars[0].y) == [c.tokens for c in run.cards]
    assert rep.similarity_figure.data[0].type == "heatmap" and rep.diversity["n"] == 3
    table = usage_table(run)
    assert table["completion_tokens"].tolist() == [c.tokens for c in run.cards]
    assert (table["completion_tokens"] >= 3).all()
    assert table["finish_reason"].tolist() == ["cancelled"] * 3


def test_failed_run_report_names_the_error():
    run = Run.start(RunSpec(n=2), "m", [1, 2])
    run.apply(StreamEvent(0, text="partial", token_ids=[5]))
    run.fail("upstream went away")
    assert [c.finish_reason for c in run.cards] == ["error", "error"] and run.ended
    rep = report.summarize(run)
    assert "Failed run" in rep.headline and "upstream went away" in rep.headline
    assert list(rep.tokens_figure.data[0].y) == [1, 0]
