"""Votes, maj@k against hand counts and brute force, and near-duplicate groups."""
from collections import Counter
from itertools import combinations

import numpy as np
import pytest

from nsample.analysis import NO_ANSWER, group_similar, majority_at_k, vote
from nsample.analysis.majority_at_k import exact_majority_at_k, resampled_majority_at_k
from nsample.outputs import Choice, GenerationResult, Timings, Usage


def result_of(texts: list[str], seed: int = 100) -> GenerationResult:
    choices = [Choice(index=i, seed=seed + i, text=t, token_ids=[1], finish_reason="stop") for i, t in enumerate(texts)]
    return GenerationResult([0], choices, Usage(), Timings())


ARITHMETIC = ["32", "The answer is 31.", "32.", "42", "no idea", "forty-two", "32", "I can't say"]


def test_vote_counts_answers_most_first_with_choices_and_seeds():
    votes = vote(result_of(ARITHMETIC), "last number")
    assert votes.columns.tolist() == ["answer", "count", "share", "choices", "seeds"]
    assert votes["answer"].tolist() == ["32", "42", "31", NO_ANSWER]
    assert votes["count"].tolist() == [3, 2, 1, 2]
    assert votes["share"].tolist() == [3 / 8, 2 / 8, 1 / 8, 2 / 8]
    assert votes["choices"].tolist() == [[0, 2, 6], [3, 5], [1], [4, 7]]
    assert votes["seeds"].tolist()[0] == [100, 102, 106]
    assert votes.attrs == {"majority": "32", "agreement": 3 / 8, "tied": ["32"], "n": 8, "extract": "last number"}


def test_vote_ties_keep_first_seen_order_and_no_answer_comes_last_even_when_largest():
    votes = vote(["?", "b", "a", "?", "a", "b", "?"], r"[ab]")
    assert votes["answer"].tolist() == ["b", "a", NO_ANSWER]
    assert votes.attrs["majority"] == "b"
    assert votes.attrs["tied"] == ["b", "a"]
    assert votes.attrs["agreement"] == 2 / 7


def test_vote_groups_spellings_of_one_answer_under_the_first_seen():
    votes = vote(["Answer: Paris", "answer: paris.", "Answer: PARIS!", "Answer: Rome"], "answer")
    assert votes["answer"].tolist() == ["Paris", "Rome"]
    assert votes["count"].tolist() == [3, 1]


def test_vote_when_no_choice_has_an_answer():
    votes = vote(["hmm", "no"], "last number")
    assert votes["answer"].tolist() == [NO_ANSWER]
    assert votes.attrs["majority"] is None
    assert votes.attrs["agreement"] == 0.0
    assert votes.attrs["tied"] == []


def test_majority_at_k_by_hand():
    # A A B C, reference A.  k=1: 2/4.  k=2: AA wins (1 pair), AB and AC tie (4 pairs, 1/2 each), BC loses:
    # (1 + 2) / 6.  k=3: AAB, AAC win (2), A?BC is a three-way tie (2 triples, 1/3 each): (2 + 2/3) / 4.
    frame = majority_at_k(["A", "A", "B", "C"], "text", reference="a")
    assert frame.columns.tolist() == ["k", "majority_at_k"]
    assert frame["k"].tolist() == [1, 2, 3, 4]
    assert np.allclose(frame["majority_at_k"], [1 / 2, 1 / 2, 2 / 3, 1])
    assert frame.attrs["method"] == "exact"
    assert frame.attrs["reference_count"] == 2


def test_majority_at_k_without_reference_targets_the_n_choice_majority():
    # 32 32 31 and one without an answer: k=2 draws 32,32 (win), 32,31 (tie: 1/2, twice), 32,- (win, twice),
    # 31,- (lose): (1 + 1 + 2) / 6
    frame = majority_at_k(["32", "32", "31", "no idea"], "last number")
    assert frame.attrs["reference"] == "32"
    assert np.isclose(frame["majority_at_k"][1], 4 / 6)
    assert frame["majority_at_k"].iloc[-1] == 1.0


def test_majority_at_k_of_an_answer_nobody_gave_is_zero():
    frame = majority_at_k(["1", "2", "2"], reference="7")
    assert frame["majority_at_k"].tolist() == [0.0, 0.0, 0.0]
    assert frame.attrs["reference_count"] == 0
    assert majority_at_k(["none", "here"])["majority_at_k"].tolist() == [0.0, 0.0]


def brute_force(labels: list[str | None], reference: str) -> list[float]:
    """maj@k over every k-subset, ties 1/t, choices without an answer not voting."""
    n, out = len(labels), []
    for k in range(1, n + 1):
        total = 0.0
        subsets = list(combinations(labels, k))
        for subset in subsets:
            counts = Counter(label for label in subset if label is not None)
            if counts:
                top = max(counts.values())
                tied = [label for label, count in counts.items() if count == top]
                total += (reference in tied) / len(tied)
        out.append(total / len(subsets))
    return out


@pytest.mark.parametrize("trial", range(12))
def test_exact_majority_at_k_equals_brute_force(trial):
    rng = np.random.default_rng(trial)
    labels = [None if x == 0 else "abc"[x - 1] for x in rng.integers(0, 4, rng.integers(2, 10))]
    reference = next((label for label in labels if label), "a")
    counts = Counter(label for label in labels if label is not None)
    others = [count for label, count in counts.items() if label != reference]
    exact = exact_majority_at_k(counts.get(reference, 0), others, len(labels))
    assert np.allclose(exact, brute_force(labels, reference))


def test_resampling_is_seeded_and_close_to_exact():
    texts = ["1"] * 5 + ["2"] * 4 + ["3"] * 2 + ["?"]
    exact = majority_at_k(texts)
    resampled = majority_at_k(texts, method="resample", resamples=2000, seed=3)
    assert resampled.attrs["method"] == "resample" and resampled.attrs["resamples"] == 2000
    assert np.abs(exact["majority_at_k"] - resampled["majority_at_k"]).max() < 0.05
    again = resampled_majority_at_k(5, [4, 2], 12, 200, 3)
    assert np.array_equal(again, resampled_majority_at_k(5, [4, 2], 12, 200, 3))


def test_a_large_run_is_exact_and_an_n_choice_tie_is_shared():
    frame = majority_at_k([str(i % 5) for i in range(128)], "text")  # 26 each of 0, 1, 2; 25 each of 3, 4
    assert frame.attrs["method"] == "exact" and frame.attrs["reference"] == "0"
    assert np.isclose(frame["majority_at_k"][0], 26 / 128)
    assert np.isclose(frame["majority_at_k"].iloc[-1], 1 / 3)
    assert frame["majority_at_k"].between(0, 1).all()


def test_group_similar_finds_near_duplicates_with_a_medoid():
    texts = ["The cat sat on the mat.", "The cat sat on the mat!", "A dog ran in the park.",
             "The cat sat on a mat.", "Stocks fell sharply today."]
    groups = group_similar(result_of(texts), method="edit")
    assert groups.columns.tolist() == ["group", "size", "share", "representative", "seed", "text", "choices",
                                       "seeds", "cohesion"]
    assert groups["choices"].tolist() == [[0, 1, 3], [2], [4]]
    assert groups["size"].tolist() == [3, 1, 1]
    assert groups["representative"][0] == 0 and groups["seed"][0] == 100
    assert groups["cohesion"][1] == 1.0 and 0.8 < groups["cohesion"][0] < 1.0
    assert groups.attrs == {"similarity": "edit", "similarity_label": "normalized edit similarity", "threshold": 0.8}


def test_group_similar_threshold_and_fallback_label(monkeypatch):
    from nsample.analysis import similarity

    monkeypatch.setattr(similarity, "embeddings_available", lambda: False)
    texts = ["aaaa", "aaab", "zzzz"]
    groups = group_similar(texts)
    assert groups.attrs["similarity"] == "edit" and "nsample[embeddings]" in groups.attrs["similarity_label"]
    assert groups["choices"].tolist() == [[0], [1], [2]]  # 0.75 < 0.8
    assert group_similar(texts, threshold=0.7)["choices"].tolist() == [[0, 1], [2]]


def test_group_members_are_all_close_to_the_founder_not_chained():
    # 1 is close to 0 and to 2, but 0 and 2 are far apart: a star around 1 would hold all three
    texts = ["aaaaaaaaaa", "aaaaabbbbb", "bbbbbbbbbb"]
    groups = group_similar(texts, threshold=0.5, method="edit")
    assert groups["choices"].tolist() == [[0, 1], [2]]
    assert groups["representative"].tolist() == [0, 2]
