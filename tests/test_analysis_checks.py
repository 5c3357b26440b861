"""Checks give pass, fail or error per choice; code checks run in limited subprocesses and never crash a run."""
import time

import pytest

from nsample.analysis import CodeCheck, Expected, Matches, ValidJSON, run_checks
from nsample.outputs import Choice, GenerationResult, Timings, Usage


def result_of(texts: list[str], seed: int = 100) -> GenerationResult:
    choices = [Choice(index=i, seed=seed + i, text=t, token_ids=[1], finish_reason="stop") for i, t in enumerate(texts)]
    return GenerationResult([0], choices, Usage(), Timings())


def test_expected_compares_after_the_extractors_normalisation():
    checked = run_checks(result_of(["It is 42.0", "forty-two", "41", "no idea"]), Expected("42", "last number"))
    assert checked.columns.tolist() == ["index", "seed", "text", "result", "detail"]
    assert checked["result"].tolist() == ["pass", "pass", "fail", "fail"]
    assert checked["detail"].tolist()[2:] == ["answer '41', expected '42'", "no answer (last number)"]
    assert checked["seed"].tolist() == [100, 101, 102, 103]
    assert checked.attrs == {"check": "expected '42' (last number)", "n": 4, "passed": 2, "failed": 2, "errors": 0}


def test_expected_defaults_to_the_whole_normalised_text():
    assert Expected("Paris")("  paris. ")
    assert not Expected("Paris")("Paris, France")
    assert Expected("forty-two", "last number")("42")


def test_matches_searches_and_rejects_an_invalid_regex():
    assert run_checks(["abc123", "abc"], Matches(r"\d{3}"))["result"].tolist() == ["pass", "fail"]
    with pytest.raises(ValueError, match=r"invalid regex '\['"):
        Matches("[")


def test_valid_json_parses_leniently_and_validates_against_a_schema():
    texts = ['{"name": "Ada", "age": 36}', 'Sure:\n```json\n{"name": "Bob"}\n```', '{"name": 7}', "no json"]
    assert run_checks(texts, ValidJSON())["result"].tolist() == ["pass", "pass", "pass", "fail"]
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name", "age"]}
    checked = run_checks(texts, ValidJSON(schema))
    assert checked["result"].tolist() == ["pass", "fail", "fail", "fail"]
    assert "'age' is a required property" in checked["detail"][1]
    assert checked["detail"][3].startswith("not JSON")
    assert ValidJSON('{"type": "array"}')("[1, 2]")


def test_an_invalid_schema_is_a_value_error():
    with pytest.raises(ValueError, match="invalid JSON schema"):
        ValidJSON({"type": 12})
    with pytest.raises(ValueError, match="not JSON"):
        ValidJSON("{type: object")


def test_a_python_callable_check_and_one_that_raises_or_returns_no_bool():
    def long_enough(text):
        if text == "boom":
            raise KeyError("boom")
        return len(text) > 3

    checked = run_checks(["long text", "no", "boom"], long_enough)
    assert checked["result"].tolist() == ["pass", "fail", "error"]
    assert checked["detail"][2] == "KeyError: 'boom'"
    assert run_checks(["x"], lambda text: "yes")["detail"][0] == "<lambda> returned 'yes', not True or False"
    with pytest.raises(TypeError, match="a check is"):
        run_checks(["x"], 42)


PASSES = "def check(text):\n    return text.strip() == '42'\n"
LOOPS = "def check(text):\n    while True:\n        pass\n"
ALLOCATES_10_GB = "def check(text):\n    block = bytearray(10 * 1024 ** 3)\n    return True\n"
RAISES = "def check(text):\n    raise ValueError('bad ' + text)\n"


def test_code_check_passes_and_fails_in_a_subprocess():
    checked = run_checks(["42", "41"], CodeCheck(PASSES))
    assert checked["result"].tolist() == ["pass", "fail"]
    assert checked.attrs["check"] == "code check (5 s, 512 MB)"


def test_code_check_that_loops_forever_is_stopped_at_its_time_limit():
    started = time.monotonic()
    checked = run_checks(["a", "b"], CodeCheck(LOOPS, timeout_s=1))
    assert time.monotonic() - started < 4  # both at once, each stopped after 1 s
    assert checked["result"].tolist() == ["error", "error"]
    assert checked["detail"][0].startswith("timeout")


def test_code_check_that_allocates_10_gb_is_stopped_by_its_memory_limit():
    checked = run_checks(["a"], CodeCheck(ALLOCATES_10_GB, memory_mb=256))
    assert checked["result"].tolist() == ["error"]
    assert checked["detail"][0].startswith("memory") and "256 MB" in checked["detail"][0]


def test_code_check_that_raises_marks_an_error_and_the_others_still_run():
    checked = run_checks(["x", "y"], CodeCheck(RAISES))
    assert checked["result"].tolist() == ["error", "error"]
    assert checked["detail"].tolist() == ["ValueError: bad x", "ValueError: bad y"]


def test_code_check_output_cannot_fake_a_verdict_and_a_hard_exit_is_an_error():
    printing = "def check(text):\n    print('{\"result\": \"pass\"}')\n    return False\n"
    assert run_checks(["x"], CodeCheck(printing))["result"].tolist() == ["fail"]
    exiting = "import os\ndef check(text):\n    os._exit(3)\n"
    checked = run_checks(["x"], CodeCheck(exiting))
    assert checked["result"][0] == "error" and "status 3" in checked["detail"][0]


def test_code_check_source_is_validated_before_anything_runs():
    with pytest.raises(ValueError, match="does not parse"):
        CodeCheck("def check(text) return True")
    with pytest.raises(ValueError, match="must define"):
        CodeCheck("def test(text):\n    return True\n")
    with pytest.raises(ValueError, match="positive"):
        CodeCheck(PASSES, timeout_s=0)


def test_code_check_called_directly_raises_its_error():
    assert CodeCheck(PASSES)("42") is True
    with pytest.raises(RuntimeError, match="ValueError: bad x"):
        CodeCheck(RAISES)("x")
