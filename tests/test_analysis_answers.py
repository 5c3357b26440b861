"""Answer extractors on constructed texts: every preset, numbers in words, regexes, callables and no answer."""
import re

import pytest

from nsample.analysis import NO_ANSWER, PRESETS, answer_key, answers, extractor, normalize_expected
from nsample.analysis.numbers import canonical_number, digit_numbers, word_numbers
from nsample.outputs import Choice, GenerationResult, Timings, Usage


def result_of(texts: list[str], seed: int = 100) -> GenerationResult:
    choices = [Choice(index=i, seed=seed + i, text=t, token_ids=[1], finish_reason="stop") for i, t in enumerate(texts)]
    return GenerationResult([0], choices, Usage(), Timings())


def extract(spec, text):
    return extractor(spec)(text)


@pytest.mark.parametrize("spelling", ["42", "42.0", "+42", "42.", "42.000", "4.2e1"])
def test_one_number_has_one_spelling(spelling):
    assert canonical_number(spelling) == "42"


@pytest.mark.parametrize(("text", "number"), [
    ("17 + 25 = 42.", "42"), ("It costs $1,234.50 in total", "1234.5"), ("x = -5", "-5"), ("\u22123 degrees", "-3"),
    ("pages 3-4", "4"), ("about .5 of it", "0.5"), ("from 12,34 to 7", "7"), ("1e3 grams", "1000"),
    ("the answer is 0.0", "0"), ("the score is 3/4", "4"),
])
def test_last_number_reads_signs_decimals_and_thousands_separators(text, number):
    assert extract("last number", text) == number


@pytest.mark.parametrize(("text", "number"), [
    ("forty-two", "42"), ("The answer is Forty Two.", "42"), ("one hundred and five", "105"),
    ("two thousand three hundred forty-one apples", "2341"), ("minus seven", "-7"), ("zero", "0"),
    ("nine hundred ninety-nine thousand nine hundred ninety-nine", "999999"), ("a thousand", "1000"),
])
def test_last_number_reads_numbers_in_words(text, number):
    assert extract("last number", text) == number


def test_numbers_in_words_split_where_a_new_number_starts():
    assert word_numbers("two three, and then twenty ten") == ["2", "3", "20", "10"]
    assert word_numbers("rock and roll") == []


def test_digits_win_over_words_so_a_stray_one_is_not_the_answer():
    assert extract("last number", "It is 42, the one I meant") == "42"
    assert digit_numbers("v2 is not a number but 7 is") == ["7"]


def test_boxed_takes_the_last_complete_box_with_nested_braces():
    assert extract("boxed", r"first \boxed{\frac{1}{2}} then \boxed{42.0}") == "42"
    assert extract("boxed", r"\boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert extract("boxed", r"\boxed{a{b}c} and \boxed{unclosed") == "a{b}c"
    assert extract("boxed", "no box here") is None


def test_answer_takes_the_rest_of_the_line_after_answer_or_hashes():
    assert extract("answer", "Let me think.\nAnswer: Paris.\nThanks") == "Paris"
    assert extract("answer", "work...\n#### 1,234") == "1234"
    assert extract("answer", "answer: 1\nFinal answer: 2") == "2"
    assert extract("answer", "Answer:\n\n  B") == "B"
    assert extract("answer", "I answered nothing") is None


@pytest.mark.parametrize(("text", "letter"), [
    ("(B)", "B"), ("Answer: C", "C"), ("B. Paris", "B"), ("The answer is (E).", "E"), ("**D**", "D"),
    ("I think (A) is wrong and (D) is right", "D"), ("Option B, because", "B"),
])
def test_choice_letter(text, letter):
    assert extract("choice letter", text) == letter


@pytest.mark.parametrize("text", ["A cat sat on the mat", "F. none of these", "(F)"])
def test_no_choice_letter(text):
    assert extract("choice letter", text) is None


def test_first_line_skips_blank_lines():
    assert extract("first line", "\n\n  Blue  whale.  \nThe rest") == "Blue whale"
    assert extract("first line", " \n\t") is None


def test_json_paths_through_objects_and_arrays_fenced_or_amid_text():
    fenced = 'Here you go:\n```json\n{"result": {"value": 42.0}}\n```\nDone.'
    assert extract("json:result.value", fenced) == "42"
    assert extract("json:items.0.name", 'Sure! {"items": [{"name": "Bob"}]} Hope it helps') == "Bob"
    assert extract("json:items.-1", '{"items": [1, 2, 3]}') == "3"
    assert extract("json:", '{"b": 1, "a": [true, null]}') == '{"a":[true,null],"b":1}'
    assert extract("json:missing", '{"result": 1}') is None
    assert extract("json:items.5", '{"items": [1]}') is None
    assert extract("json:result", "not json at all") is None


def test_text_normalises_case_whitespace_and_final_punctuation():
    assert extract("text", "  The   Eiffel Tower!! ") == "the eiffel tower"
    assert extract("text", "...") is None


def test_a_regex_gives_its_first_match_group_one_when_it_has_groups():
    assert extract(r"x=(\d+)", "x=3 then x=4") == "3"
    assert extract(r"\d+", "x=3 then x=4") == "3"
    assert extract(re.compile(r"final: (\w+)", re.IGNORECASE), "FINAL: yes") == "yes"
    assert extract(r"x=(\d+)?y", "x=y") is None
    assert extractor(r"x=(\d+)").name == r"regex: x=(\d+)"


def test_an_invalid_regex_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"'\(unclosed'.*not a valid regex"):
        extractor("(unclosed")


def test_a_callable_extractor_and_its_name():
    def shout(text):
        return text.upper() if text else None

    assert extract(shout, "yes ") == "YES"
    assert extract(shout, "") is None
    assert extractor(shout).name == "shout"
    assert extract(len, "four") == "4"


def test_presets_are_all_usable_by_name():
    assert PRESETS[0] == "last number"
    for name in PRESETS:
        assert extractor(name).name == name
        extractor(name)("some text 1")


def test_answers_keeps_every_choice_and_none_for_no_answer():
    table = answers(result_of(["It is 42.", "I don't know", "forty-two"]), "last number")
    assert table.columns.tolist() == ["index", "seed", "text", "answer"]
    assert table["answer"].tolist() == ["42", None, "42"]
    assert table["seed"].tolist() == [100, 101, 102]
    assert table.attrs["extract"] == "last number"
    assert NO_ANSWER == "no answer"


def test_answers_accepts_the_dataframe_and_plain_texts():
    frame = result_of(["1", "2"]).to_dataframe()
    assert answers(frame)["answer"].tolist() == ["1", "2"]
    assert answers(["(A)", "B."], "choice letter")["answer"].tolist() == ["A", "B"]


def test_a_raising_callable_extractor_names_the_choice():
    def broken(text):
        raise RuntimeError("boom")

    with pytest.raises(ValueError, match=r"'broken' raised on choice 0"):
        answers(["x"], broken)


def test_answer_keys_and_expected_answers_compare_after_normalisation():
    assert answer_key("Paris.") == answer_key("  paris") == "paris"
    assert answer_key("42.0") == answer_key("42")
    assert normalize_expected("forty-two", "last number") == "42"
    assert normalize_expected("Paris", "answer") == "paris"
    assert normalize_expected("B", "choice letter") == "b"
