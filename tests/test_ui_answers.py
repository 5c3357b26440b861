"""The Answers panel's work without Gradio: chips and chart from analysis.vote, checks, pass@k, code checks off."""
import pytest

from nsample import analysis
from nsample.errors import InvalidRequest
from nsample.outputs import StreamEvent
from nsample.ui import decide
from nsample.ui.cards import run_cards
from nsample.ui.run import Run, RunSpec

TEXTS = ["17 + 25 = 32", "It is 42.", "42", "forty-two", "I don't know", "32", "42!", "31"]


def texts_run(texts=TEXTS) -> Run:
    run = Run.start(RunSpec(n=len(texts)), "m", list(range(100, 100 + len(texts))))
    for i, text in enumerate(texts):
        run.apply(StreamEvent(i, text=text, finish_reason="stop"))
    return run


def test_chips_chart_and_majority_follow_the_vote():
    run = texts_run()
    votes = decide.votes(run, "last number")
    table = analysis.vote(TEXTS, "last number")
    figure = votes.figure.data[0]
    assert list(figure.x) == [str(a) for a in table["answer"]] and list(figure.y) == table["count"].tolist()
    assert "answer: 42 · 4/8" in votes.chips[1] and "answer: 42 · 4/8" in votes.chips[3]  # forty-two counts
    assert "no answer · 1/8" in votes.chips[4]
    assert votes.keys[1] == votes.keys[6] and "Majority answer: 42" in votes.majority and "seeds 101, 102, 103, 106" \
        in votes.majority
    run.votes = votes
    assert 'data-answer="42"' in run_cards(run)[2] and "ns-answer" in run_cards(run)[2]


def test_extractor_specs_and_bad_regexes():
    assert decide.extract_spec("regex", r"is (\d+)") == r"is (\d+)"
    assert decide.extract_spec("json:", "a.b") == "json:a.b" and decide.extract_spec("boxed") == "boxed"
    with pytest.raises(InvalidRequest):
        decide.extract_spec("regex", "  ")
    with pytest.raises(InvalidRequest):
        decide.votes(texts_run(), "(unclosed")


def test_checks_give_chips_and_the_pass_at_k_curve():
    run = texts_run()
    done = decide.checked(run, decide.make_check("expected answer", "42", "last number", False, (5, 512)))
    assert sum("ns-check-pass" in chip for chip in done.chips.values()) == 4
    curve = analysis.pass_at_k(TEXTS, analysis.Expected("42", extract="last number"))
    assert list(done.figure.data[0].y) == curve["pass_at_k"].tolist() and "4 of 8 pass" in done.summary
    regex = decide.checked(run, decide.make_check("regex", r"\d", "text", False, (5, 512)))
    assert sum("ns-check-pass" in c for c in regex.chips.values()) == 6
    assert decide.make_check("JSON schema", "", "text", False, (5, 512)) == analysis.ValidJSON(None)
    assert decide.make_check("none", "", "text", False, (5, 512)) is None


def test_code_checks_only_where_the_server_allows_them():
    source = "def check(text):\n    return '42' in text"
    with pytest.raises(InvalidRequest, match="--allow-code-checks"):
        decide.make_check("Python code", source, "text", False, (5, 512))
    check = decide.make_check("Python code", source, "text", True, (5, 256))
    assert isinstance(check, analysis.CodeCheck) and check.memory_mb == 256
    done = decide.checked(texts_run(["42", "no", "while True: pass"]),
                          decide.make_check("Python code", "def check(text):\n    exec(text)\n    return True",
                                            "text", True, (1, 256)))
    assert [("pass" in c, "error" in c) for c in done.chips.values()] == [(True, False), (False, True), (False, True)]


def test_sweep_pass_at_1_and_pass_at_n_per_temperature(tiny_engine):
    from nsample.ui.sweep import pass_figure, pass_rates, run_sweep

    spec = RunSpec(mode="completion", prompt="17 + 25 =", n=3, seed=4, max_tokens=4)
    view = run_sweep(tiny_engine, spec, [0.5, 1.5], [1.0])
    check = analysis.Matches(r"[aeiou]")
    rates = pass_rates(view.frame, check)
    assert rates["temperature"].tolist() == [0.5, 1.5] and rates["n"].tolist() == [3, 3]
    for row, (_, point) in zip(rates.itertuples(), view.frame.groupby("temperature")):
        c = sum(check(t) for t in point["text"])
        assert row.passed == c and row.pass_at_1 == pytest.approx(c / 3) and row.pass_at_n == (1.0 if c else 0.0)
    figure = pass_figure(rates, check.name)
    assert [t.name for t in figure.data] == ["pass@1 (top_p 1)", "pass@3 (top_p 1)"]
