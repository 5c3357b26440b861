"""A token's alternatives (top_logprobs) and the branch from one of them, on the tiny engine, without Gradio."""
import re

import pytest
from test_ui_handlers import collect

from nsample.errors import InvalidRequest
from nsample.ui import handlers
from nsample.ui.alternatives import alternatives_html
from nsample.ui.run import TOP_ALTERNATIVES, RunSpec
from nsample.ui.token_spans import spans_html, token_runs
from nsample.ui.tree import RunTree


async def test_picking_an_alternative_branches_from_the_text_before_it(tiny_engine):
    spec = RunSpec(mode="chat", user="What is 17 + 25?", n=2, seed=21, max_tokens=10, logprobs=True)
    assert spec.sampling["top_logprobs"] == TOP_ALTERNATIVES and "top_logprobs" not in RunSpec().sampling
    _, parent = await collect(tiny_engine, spec)
    RunTree().add(parent)
    card = parent.cards[1]
    assert all(len(t.top) == TOP_ALTERNATIVES for t in card.logprobs)
    start, _, token = token_runs(card.text, card.logprobs)[2]
    assert f'data-tok="{token}" data-start="{start}"' in spans_html(card.text, card.logprobs)
    with pytest.raises(InvalidRequest):  # no token picked yet
        handlers.branch_at_token(parent, 1, 0, spec)
    parent.alternatives = (1, token, start)
    html = alternatives_html(parent)
    assert len(re.findall(r'data-alt="\d+"', html)) == TOP_ALTERNATIVES and "ns-sampled" in html
    top = card.logprobs[token].top
    alternative = next(j for j, (_, text, _) in enumerate(top) if text != card.logprobs[token].token
                       and "\ufffd" not in text)
    child_spec, origin = handlers.branch_at_token(parent, 1, alternative, spec)
    assert child_spec.continuation == card.text[:start] + top[alternative][1] and origin.token == top[alternative][1]
    _, child = await collect(tiny_engine, child_spec)
    assert len(child.cards) == 2 and all(c.text for c in child.cards)
    with pytest.raises(InvalidRequest):
        handlers.branch_at_token(parent, 1, 99, spec)
