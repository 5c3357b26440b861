"""/openapi.json describes the real bodies, streams and errors; a bounded schemathesis run finds no 5xx and no
response outside its schema, and neither do the hand-written cases (lone surrogates, NUL, over-long numbers, deep
nesting at every field: scripts/fuzz_cases.py). (The full run, over 1,000 requests: scripts/fuzz.py.)"""
import httpx
import pytest
from live_server import live_server
from script_runner import run_script

from nsample.config import EngineConfig
from nsample.engine import Engine
from nsample.models.tiny_model import tiny_model
from nsample.server import ServerConfig, create_app


@pytest.fixture(scope="module")
def url():
    """A small engine (n up to 4, a 96-token window), so every generated request is quick."""
    model, tokenizer = tiny_model()
    engine = Engine(model, tokenizer, EngineConfig(max_n=4, max_context=96), "nsample/tiny-random")
    with live_server(create_app(engine, ServerConfig())) as url:
        yield url
    engine.close()


def test_the_document_describes_real_requests_and_answers(url):
    doc = httpx.get(url + "/openapi.json").json()
    schemas = doc["components"]["schemas"]
    chat = schemas["ChatCompletionRequest"]["properties"]
    assert {"type": "integer", "minimum": 1, "maximum": 4} in chat["n"]["anyOf"]  # the engine's max_n
    assert any(m.get("minimum") == -(2**63) for m in chat["seed"]["anyOf"])
    assert any(m.get("$ref", "").endswith("/StreamOptions") for m in chat["stream_options"]["anyOf"])
    bias = next(m for m in chat["logit_bias"]["anyOf"] if m.get("type") == "object")
    assert bias["additionalProperties"]["maximum"] == 100 and "propertyNames" in bias
    assert schemas["ChatCompletionRequest"]["additionalProperties"] is False  # unknown fields are a 400
    op = doc["paths"]["/v1/chat/completions"]["post"]
    assert "422" not in op["responses"] and {"400", "401", "408", "413", "429"} <= set(op["responses"])
    assert op["responses"]["429"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    event = op["responses"]["200"]["content"]["text/event-stream"]["itemSchema"]
    assert "ChatCompletionChunk" in str(event) and "ChatCompletionChunk" in schemas


def test_bounded_schemathesis_run(url, tmp_path):
    code, report, output = run_script("fuzz.py", tmp_path, "--url", url, "--phases", "fuzzing", "--max-examples", "30",
                                      "--seed", "7")
    assert code == 0, output
    # 92 requests on a quiet machine (30 examples per operation, seed 7); schemathesis sends fewer to an operation
    # whose answers come slowly (its adaptive timeouts and schedule), so a busy machine has seen 73
    assert report["requests"] >= 60 and report["responses_5xx"] == 0 and report["failed_checks"] == {}
    assert {200, 400} <= {int(s) for s in report["statuses"]}
    cases = report["cases"]  # every string and number field of both POST operations, from this document
    assert cases["requests"] >= 500 and cases["responses_5xx"] == 0 and cases["failures"] == 0, cases
    assert {200, 400} <= {int(s) for s in cases["statuses"]}
