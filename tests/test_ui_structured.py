"""The page's JSON schema box: every card follows the schema, bad schemas are refused with a clear message, a
link carries the schema, and a branch under a schema is refused (a schema holds an answer from its start)."""
import json
from urllib.parse import urlsplit

import jsonschema
import pytest
from test_ui_handlers import collect

from nsample.errors import InvalidRequest
from nsample.ui.links import LinkStore, make_link, parse_link
from nsample.ui.run import RunSpec

SCHEMA = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]}, "size": {"type": "integer"}},
          "required": ["colour", "size"], "additionalProperties": False}


def spec_with(schema_text: str, **kw) -> RunSpec:
    return RunSpec.from_ui("chat", "", "Describe a ball", "", kw.get("n", 4), "5", 1.0, 1.0, 40, [], False,
                           schema_text)


async def test_every_card_follows_the_schema_and_replays_from_a_link(tiny_engine):
    spec = spec_with(json.dumps(SCHEMA))
    assert spec.sampling["json_schema"] == SCHEMA
    _, run = await collect(tiny_engine, spec)
    for card in run.cards:
        assert card.finish_reason == "stop", card.text
        jsonschema.validate(json.loads(card.text), SCHEMA)
    link = parse_link(urlsplit(make_link("http://127.0.0.1:7860/", run, LinkStore())[0]).query)
    assert json.loads(link.spec.json_schema) == SCHEMA
    _, again = await collect(tiny_engine, link.spec)
    assert [c.text for c in again.cards] == [c.text for c in run.cards]


@pytest.mark.parametrize("text,words", [("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object")])
def test_bad_schemas_are_refused_before_anything_runs(text, words):
    with pytest.raises(InvalidRequest) as e:
        spec_with(text)
    assert words in e.value.message and e.value.param == "json_schema"


def test_an_empty_box_is_free_text():
    assert "json_schema" not in spec_with("  ").sampling


def test_a_schema_the_engine_cannot_compile_is_its_400(tiny_engine):
    spec = spec_with(json.dumps({"type": "object", "properties": {"a": {"type": "integr"}}}))
    with pytest.raises(InvalidRequest) as e:
        tiny_engine.submit(spec.engine_prompt, **spec.sampling)
    assert e.value.param == "json_schema"


def test_a_branch_under_a_schema_is_refused():
    parent = spec_with(json.dumps(SCHEMA))
    with pytest.raises(InvalidRequest) as e:
        _ = parent.continued(parent, '{"colour": "r').sampling
    assert "branch" in e.value.message
