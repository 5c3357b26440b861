"""Selection picks what it should on constructed inputs: best-of-n, max-min and MMR diversity."""
import numpy as np
import pandas as pd
import pytest

from nsample.analysis import best_of, most_diverse, rank_choices
from nsample.outputs import Choice, GenerationResult, Timings, TokenLogprob, Usage

# choices 0 and 1 are near-duplicates, 2 differs from both, 3 is close to 2
MATRIX = np.array([[1.0, 0.95, 0.1, 0.2],
                   [0.95, 1.0, 0.15, 0.25],
                   [0.1, 0.15, 1.0, 0.7],
                   [0.2, 0.25, 0.7, 1.0]])


def result_of(mean_logprobs: list[float | None], texts: list[str] | None = None) -> GenerationResult:
    texts = texts or [f"answer number {i}" for i in range(len(mean_logprobs))]
    choices = [Choice(index=i, seed=1000 + i, text=texts[i], token_ids=[1, 2], finish_reason="stop",
                      logprobs=None if lp is None else [TokenLogprob(1, "a", lp), TokenLogprob(2, "b", lp)])
               for i, lp in enumerate(mean_logprobs)]
    return GenerationResult([0], choices, Usage(), Timings())


def test_best_of_mean_logprob_returns_the_likeliest_choice_with_index_and_seed():
    best = best_of(result_of([-2.0, -0.5, -1.0]))
    assert (best["index"], best["seed"], best["score"]) == (1, 1001, -0.5)
    assert best["text"] == "answer number 1"


def test_best_of_perplexity_picks_the_lowest_and_agrees_with_mean_logprob():
    result = result_of([-2.0, -0.5, -1.0])
    assert best_of(result, by="perplexity")["index"] == 1
    assert rank_choices(result, by="perplexity")["index"].tolist() == [1, 2, 0]


def test_best_of_a_callable_scores_texts():
    result = result_of([-1.0, -1.0, -1.0], texts=["short", "the longest text", "medium one"])
    assert best_of(result, by=len)["index"] == 1
    assert best_of(result, by=lambda text: -len(text))["index"] == 0


def test_best_of_accepts_the_dataframe_and_breaks_ties_by_choice_order():
    frame = result_of([-1.0, -0.3, -0.3]).to_dataframe()
    assert best_of(frame)["index"] == 1


def test_choices_without_logprobs_rank_last_and_none_at_all_is_an_error():
    assert rank_choices(result_of([None, -3.0, -1.0]))["index"].tolist() == [2, 1, 0]
    with pytest.raises(ValueError, match="logprobs=True"):
        best_of(result_of([None, None]))
    with pytest.raises(ValueError, match="cannot rank by"):
        best_of(result_of([-1.0]), by="vibes")


def test_max_min_picks_one_of_each_cluster_before_any_duplicate():
    picked = most_diverse(result_of([-1.0] * 4), 3, similarity=MATRIX)
    assert picked["index"].tolist() == [2, 0, 3]  # 2 is least like the rest; 0 is farthest from it; then 3
    assert picked["seed"].tolist() == [1002, 1000, 1003]
    assert np.isnan(picked["similarity_to_previous"][0])
    assert picked["similarity_to_previous"].tolist()[1:] == [0.1, 0.7]


def test_mmr_with_no_diversity_is_best_of_and_with_full_diversity_avoids_duplicates():
    result = result_of([-0.1, -0.2, -3.0, -2.0])
    assert most_diverse(result, 2, similarity=MATRIX, method="mmr", diversity=0.0)["index"].tolist() == [0, 1]
    assert most_diverse(result, 2, similarity=MATRIX, method="mmr", diversity=1.0)["index"].tolist() == [0, 2]
    assert most_diverse(result, 2, similarity=MATRIX, method="mmr", diversity=0.5)["index"].tolist() == [0, 3]


def test_most_diverse_on_texts_uses_the_named_similarity():
    texts = ["the cat sat on the mat", "the cat sat on a mat", "stock prices fell", "the cat sat on the mat"]
    picked = most_diverse(texts, 2, similarity="jaccard")
    assert sorted(picked["index"]) in ([0, 2], [1, 2], [2, 3])
    assert picked.attrs["similarity"] == "word Jaccard"


def test_identical_choices_are_picked_honestly():
    picked = most_diverse(["same"] * 3, 3, similarity="edit")
    assert picked["index"].tolist() == [0, 1, 2]
    assert picked["similarity_to_previous"].tolist()[1:] == [1.0, 1.0]


@pytest.mark.parametrize("k", [0, 5, -1])
def test_k_outside_one_to_n_is_refused(k):
    with pytest.raises(ValueError, match="between 1 and 4"):
        most_diverse(result_of([-1.0] * 4), k, similarity=MATRIX)


def test_wrong_shaped_matrix_and_unknown_method_are_refused():
    with pytest.raises(ValueError, match="3x3 but there are 4 choices"):
        most_diverse(result_of([-1.0] * 4), 2, similarity=np.eye(3))
    with pytest.raises(ValueError, match="unknown method"):
        most_diverse(result_of([-1.0] * 4), 2, similarity=MATRIX, method="random")
    with pytest.raises(ValueError, match="diversity"):
        most_diverse(result_of([-1.0] * 4), 2, similarity=MATRIX, method="mmr", diversity=2)
    with pytest.raises(TypeError, match="integer"):
        most_diverse(result_of([-1.0] * 4), 2.0, similarity=MATRIX)


def test_one_choice_is_its_own_best_and_most_diverse():
    result = result_of([-1.0])
    assert best_of(result)["index"] == 0
    assert most_diverse(result, 1, similarity="edit")["index"].tolist() == [0]
    assert isinstance(most_diverse(pd.DataFrame({"text": ["x"]}), 1, similarity="edit"), pd.DataFrame)
