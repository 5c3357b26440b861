"""Per-choice quality signals and the headline diversity summary."""
import math

import numpy as np
import pandas as pd
import pytest

from nsample.analysis import diversity_summary, quality_table
from nsample.outputs import Choice, GenerationResult, Timings, TokenLogprob, Usage


def result_of(texts: list[str], logprobs: list[list[float]] | None = None) -> GenerationResult:
    choices = []
    for i, text in enumerate(texts):
        lps = None if logprobs is None else [TokenLogprob(t, f"t{t}", lp) for t, lp in enumerate(logprobs[i])]
        ids = list(range(len(logprobs[i]))) if logprobs else list(range(len(text.split())))
        choices.append(Choice(index=i, seed=100 + i, text=text, token_ids=ids, finish_reason="stop", logprobs=lps))
    return GenerationResult([1, 2], choices, Usage(), Timings())


def test_quality_table_has_mean_logprob_perplexity_and_length():
    table = quality_table(result_of(["a b", "c"], [[-1.0, -3.0], [-0.5]]))
    assert table["mean_logprob"].tolist() == [-2.0, -0.5]
    assert table["perplexity"].tolist() == pytest.approx([math.exp(2.0), math.exp(0.5)])
    assert table["completion_tokens"].tolist() == [2, 1]
    assert table["seed"].tolist() == [100, 101]


def test_quality_table_without_logprobs_has_missing_signals_not_zeros():
    table = quality_table(result_of(["a b", "c"]))
    assert table["mean_logprob"].isna().all() and table["perplexity"].isna().all()


def test_quality_table_accepts_the_dataframe_and_plain_texts():
    result = result_of(["a b", "c"], [[-1.0, -3.0], [-0.5]])
    assert quality_table(result.to_dataframe()).equals(quality_table(result))
    texts = quality_table(["x", "y z"])
    assert texts["index"].tolist() == [0, 1] and texts["completion_tokens"].isna().all()


def test_empty_inputs_are_refused():
    with pytest.raises(ValueError, match="empty"):
        quality_table(GenerationResult([1], [], Usage(), Timings()))
    with pytest.raises(ValueError, match="text"):
        quality_table(pd.DataFrame({"seed": [1]}))


def test_summary_of_identical_texts():
    summary = diversity_summary(["the same answer"] * 4, "edit")
    assert summary["n"] == 4
    assert summary["vendi_score"] == pytest.approx(1.0)
    assert summary["mean_similarity"] == pytest.approx(1.0)
    assert summary["self_bleu"] == pytest.approx(1.0)
    assert summary["distinct_1"] == pytest.approx(3 / 12)
    assert summary["similarity"] == "normalized edit similarity"


def test_summary_of_disjoint_texts():
    summary = diversity_summary(["aaa", "bbb", "ccc"], "jaccard")
    assert summary["vendi_score"] == pytest.approx(3.0)
    assert summary["mean_similarity"] == 0.0 and summary["distinct_1"] == 1.0


def test_summary_of_one_choice_is_honest():
    summary = diversity_summary(result_of(["only one"]), "edit")
    assert summary["n"] == 1 and summary["vendi_score"] == 1.0
    assert np.isnan(summary["self_bleu"]) and np.isnan(summary["mean_similarity"])


def test_summary_of_empty_texts():
    summary = diversity_summary(["", ""], "edit")
    assert np.isnan(summary["distinct_1"]) and np.isnan(summary["self_bleu"])
    assert summary["vendi_score"] == pytest.approx(1.0)
