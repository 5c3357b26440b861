"""Continue from a choice: the branch prompt (raw and chat), reproducibility of the child run, the run tree, export."""
import json

import openai
import pytest
from live_server import live_server
from test_ui_handlers import collect

from nsample.errors import InvalidRequest
from nsample.server import ServerConfig, create_app
from nsample.ui import handlers
from nsample.ui.export import write_exports
from nsample.ui.run import Origin, Run, RunSpec
from nsample.ui.tree import MAX_RUNS, RunTree

RAW = RunSpec(mode="completion", prompt="Once upon a time", n=3, seed=21, max_tokens=24)
CHAT = RunSpec(mode="chat", system="You are terse.", user="Name a colour.", n=2, seed=5, max_tokens=24)


async def parent_run(engine, spec, tree):
    _, run = await collect(engine, spec)
    return tree.add(run)


async def test_raw_branch_prompt_is_parent_prompt_plus_cut_text(tiny_engine):
    tree = RunTree()
    parent = await parent_run(tiny_engine, RAW, tree)
    text = parent.cards[1].text
    parent.cut = (1, len(text) // 2)  # a click in card #1
    settings = RunSpec(n=2, seed=100, temperature=0.8, max_tokens=16)
    spec, origin = handlers.branch(parent, 1, settings)
    assert spec.engine_prompt == RAW.prompt + text[:len(text) // 2]
    half = len(text) // 2
    assert (origin.parent, origin.choice, origin.cut, origin.text) == (parent.id, 1, half, text[:half])
    assert spec.sampling == settings.sampling  # the current settings, the parent's prompt
    other, whole = handlers.branch(parent, 2, settings)  # no cut picked in card #2: its whole text
    assert other.engine_prompt == RAW.prompt + parent.cards[2].text and whole.cut == len(parent.cards[2].text)


async def test_chat_branch_leaves_the_assistant_turn_open(tiny_engine):
    tree = RunTree()
    parent = await parent_run(tiny_engine, CHAT, tree)
    cut_text = parent.cards[0].text[:10]
    parent.cut = (0, 10)
    spec, _ = handlers.branch(parent, 0, CHAT)
    assert spec.engine_prompt.messages[-1] == {"role": "assistant", "content": cut_text}
    decode = tiny_engine.tokenizer.decode
    templated = decode(tiny_engine.tokenize(CHAT.engine_prompt))
    assert decode(tiny_engine.tokenize(spec.engine_prompt)) == templated + cut_text
    # a grandchild continues the child's continuation
    _, child = await collect(tiny_engine, spec)
    child.origin, child.cut = handlers.branch(parent, 0, CHAT)[1], (1, 4)
    tree.add(child)
    grand, _ = handlers.branch(child, 1, CHAT)
    assert grand.continuation == cut_text + child.cards[1].text[:4]


async def test_the_api_gives_the_same_branch(tiny_engine):
    """The API form of a chat branch: the partial answer as a final assistant message, continue_final_message."""
    tree = RunTree()
    parent = await parent_run(tiny_engine, CHAT, tree)
    parent.cut = (1, 12)
    spec, _ = handlers.branch(parent, 1, RunSpec(mode="chat", n=2, seed=70, max_tokens=12))
    _, child = await collect(tiny_engine, spec)
    with live_server(create_app(tiny_engine, ServerConfig())) as base:
        client = openai.AsyncOpenAI(base_url=base + "/v1", api_key="x", timeout=60)
        answer = await client.chat.completions.create(model=tiny_engine.name, messages=spec.engine_prompt.messages,
                                                      n=2, seed=70, max_tokens=12,
                                                      extra_body={"continue_final_message": True})
        await client.close()
    assert [c.message.content for c in answer.choices] == [c.text for c in child.cards]


async def test_child_choices_reproduce_alone(tiny_engine):
    tree = RunTree()
    parent = await parent_run(tiny_engine, RAW, tree)
    spec, origin = handlers.branch(parent, 0, RunSpec(n=3, seed=40, max_tokens=20))
    _, child = await collect(tiny_engine, spec)
    child.origin = origin
    tree.add(child)
    assert [c.seed for c in child.cards] == [40, 41, 42]
    assert len({c.text for c in child.cards}) == 3
    for i in (0, 2):
        repro = await handlers.reproduce(tiny_engine, child, i)
        assert repro.identical and repro.token_ids == child.result.choices[i].token_ids
    assert tree.path(child) == [parent, child] and tree.children(parent) == [child]


async def test_branch_needs_an_ended_run_and_a_real_choice(tiny_engine):
    with pytest.raises(InvalidRequest):
        handlers.branch(None, 0, RAW)
    tree = RunTree()
    parent = await parent_run(tiny_engine, RAW, tree)
    with pytest.raises(InvalidRequest):
        handlers.branch(parent, 3, RAW)
    parent.cut = (0, 10_000)
    with pytest.raises(InvalidRequest):
        handlers.branch(parent, 0, RAW)
    running = Run.start(RAW, "m", [1, 2])
    with pytest.raises(InvalidRequest):
        handlers.branch(running, 0, RAW)


async def test_export_contains_the_tree(tiny_engine, tmp_path):
    tree = RunTree()
    parent = await parent_run(tiny_engine, RAW, tree)
    parent.cut = (2, 5)
    spec, origin = handlers.branch(parent, 2, RunSpec(n=2, seed=3, max_tokens=8))
    _, child = await collect(tiny_engine, spec)
    child.origin = origin
    tree.add(child)
    record = json.loads(write_exports(child, tmp_path, tree=tree)[0].read_text())
    assert record["run"] == child.id and record["branch"] == {"parent": parent.id, "choice": 2, "cut": 5,
                                                              "text": parent.cards[2].text[:5]}
    assert record["prompt"] == {"mode": "completion", "prompt": RAW.prompt + parent.cards[2].text[:5],
                                "continued": parent.cards[2].text[:5]}
    assert [r["run"] for r in record["tree"]] == [parent.id, child.id]
    assert "branch" not in record["tree"][0] and record["tree"][1]["branch"]["parent"] == parent.id
    assert [c["text"] for c in record["tree"][0]["choices"]] == [c.text for c in parent.cards]


def test_tree_labels_outline_and_pruning():
    tree = RunTree()
    root = tree.add(Run.start(RAW, "m", [1]))
    child = Run.start(RAW, "m", [1])
    child.origin = Origin(root.id, 0, 7, "x")
    tree.add(child)
    assert tree.breadcrumb(child) == [("Run 1", 1), ("Run 2 ← #0 of run 1 at 7 chars", 2)]
    assert [run_id for _, run_id in tree.outline()] == [1, 2] and tree.outline()[1][0].startswith("\u2003")
    for _ in range(MAX_RUNS):
        tree.add(Run.start(RAW, "m", [1]))
    assert len(tree.runs) == MAX_RUNS and root.id not in tree.runs and child.id not in tree.runs
    assert tree.get("nope") is None and tree.get(str(tree.next_id - 1)) is not None
