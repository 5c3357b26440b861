"""Structured outputs end to end on the embedded SmolLM2-135M-Instruct (-m e2e): n choices that all validate, the
seed contract under a schema, and the clients that ask for JSON: instructor (JSON mode) and DSPy's JSON adapter."""
import json

import jsonschema
import openai
import pytest
from api_helpers import TIMEOUT
from live_server import live_server
from pydantic import BaseModel

from nsample.server import ServerConfig, create_app

pytestmark = pytest.mark.e2e
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 130},
                                           "city": {"type": "string", "maxLength": 30}},
          "required": ["name", "age", "city"], "additionalProperties": False}
ASK = [{"role": "user", "content": "Invent a person: give a name, an age and a city, as JSON."}]


class Person(BaseModel):
    name: str
    age: int
    city: str


@pytest.fixture(scope="module")
def smol_url(smol_engine):
    with live_server(create_app(smol_engine, ServerConfig())) as url:
        yield url


@pytest.fixture
def client(smol_url):
    return openai.OpenAI(base_url=f"{smol_url}/v1", api_key="-", max_retries=0, timeout=TIMEOUT)


def test_n8_under_a_schema_all_validate_and_each_replays_alone(client, smol_engine):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    r = client.chat.completions.create(model=smol_engine.name, messages=ASK, n=8, seed=21, max_tokens=80,
                                       response_format=fmt)
    people = [json.loads(c.message.content) for c in r.choices]
    for p in people:
        jsonschema.validate(p, PERSON)
    assert len({json.dumps(p) for p in people}) >= 4 and {c.finish_reason for c in r.choices} == {"stop"}
    alone = client.chat.completions.create(model=smol_engine.name, messages=ASK, n=1, seed=24, max_tokens=80,
                                           response_format=fmt)
    assert alone.choices[0].message.content == r.choices[3].message.content


def test_instructor_json_modes(smol_url, smol_engine):
    """JSON_SCHEMA mode sends the schema as response_format, so the grammar holds the model to it. JSON mode sends
    json_object and the schema in a system message; a 135M model tends to copy the schema, so instructor may give
    up, but every answer it got must be a JSON object."""
    import instructor
    from instructor.core import InstructorRetryException

    raw = openai.OpenAI(base_url=f"{smol_url}/v1", api_key="-", timeout=TIMEOUT, max_retries=0)
    strict = instructor.from_openai(raw, mode=instructor.Mode.JSON_SCHEMA)
    person = strict.chat.completions.create(model=smol_engine.name, response_model=Person, messages=ASK,
                                            max_tokens=80, temperature=0, max_retries=0)
    assert isinstance(person, Person) and person.name and person.age >= 0
    loose, answers = instructor.from_openai(raw, mode=instructor.Mode.JSON), []
    loose.on("completion:response", lambda r: answers.append(r.choices[0].message.content))
    try:
        loose.chat.completions.create(model=smol_engine.name, response_model=Person, messages=ASK, max_tokens=80,
                                      seed=3, max_retries=1)
    except InstructorRetryException:
        pass
    assert answers and all(isinstance(json.loads(a), dict) for a in answers)


def test_dspy_json_adapter(smol_url, smol_engine, monkeypatch):
    """DSPy's JSON adapter asks for response_format json_schema from a server declared to support it (DSPy 3.4 sends
    none to a model it knows nothing of), and parses what the grammar held the model to."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its model list from GitHub
    import dspy
    from dspy._vendor.lm15.registry import AccessPolicy
    from dspy.lm15 import ModelSupport, OpenAIChatCompat, ProviderDefinition, register_provider

    server = ProviderDefinition.chat(AccessPolicy(provider="nsample", env_keys=(), base_url=f"{smol_url}/v1"),
                                     compat=OpenAIChatCompat.preset("vllm"))
    register_provider(server, supports=ModelSupport(response_schema=True), replace=True)
    lm = dspy.LM(f"nsample/{smol_engine.name}", api_base=f"{smol_url}/v1", api_key="-", cache=False,
                 temperature=0.0, max_tokens=120, num_retries=0)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        out = dspy.Predict("question -> answer: int, reason: str")(question="What is 2 + 3?")
    assert isinstance(out.answer, int) and isinstance(out.reason, str)
    assert lm.history[-1]["kwargs"]["response_format"] is not None
