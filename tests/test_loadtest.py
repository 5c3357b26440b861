"""scripts/loadtest.py: a bounded run against a live server, and its stream checks failing on broken streams."""
import sys

import pytest
from live_server import live_server
from script_runner import ROOT, run_script

from nsample.server import ServerConfig, create_app

sys.path.insert(0, str(ROOT / "scripts"))
from loadtest import Spec, from_chunks  # noqa: E402

SPEC = Spec(chat=False, prompt=0, n=2, seed=1, max_tokens=4, temperature=1.0, stop=None)


def chunk(index=None, text="", finish=None, usage=None) -> dict:
    choices = [] if index is None else [{"index": index, "text": text, "finish_reason": finish, "seed": 1 + index}]
    return {"choices": choices, "usage": usage}


USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
GOOD = [chunk(0, "a"), chunk(1, "b"), chunk(0, "", "length"), chunk(1, "", "length"), chunk(usage=USAGE)]


def test_concurrent_clients_get_what_each_request_gets_alone(tiny_engine, tmp_path):
    with live_server(create_app(tiny_engine, ServerConfig())) as url:
        code, report, output = run_script("loadtest.py", tmp_path, "--url", url, "--clients", "6", "--duration", "8",
                                          "--pool", "8", "--max-n", "4")
    assert code == 0, output
    assert report["requests"] >= 6 and report["errors"] == 0 and report["mismatches"] == 0
    assert report["latency_p95_ms"] >= report["latency_p50_ms"] > 0 and report["ttft_p50_ms"] > 0


def test_a_well_formed_stream_merges():
    answer = from_chunks(SPEC, GOOD, True, 0.1)
    assert answer.choices == {0: (1, "a", "length"), 1: (2, "b", "length")} and answer.usage == (3, 2)


@pytest.mark.parametrize("chunks, done, problem", [
    (GOOD, False, "DONE"),
    (GOOD[:2] + GOOD[3:], True, "finish chunks"),  # index 0 never finishes
    (GOOD[:3] + [chunk(0, "", "stop")] + GOOD[3:], True, "finish chunks"),  # index 0 finishes twice
    (GOOD[:-1], True, "usage"),
    (GOOD[:-1] + [chunk(usage=USAGE)] * 2, True, "usage"),
    ([chunk(0, "a"), chunk(0, "", "length"), chunk(usage=USAGE)], True, "indices"),
    ([{"error": {"message": "boom"}}] + GOOD, True, "error"),
])
def test_a_broken_stream_is_named(chunks, done, problem):
    with pytest.raises(ValueError, match=problem):
        from_chunks(SPEC, chunks, done, None)
