"""Selection: the best choice by a quality signal, and the k most mutually different choices."""
import math
from collections.abc import Callable
from numbers import Integral

import numpy as np
import pandas as pd

from nsample.analysis.inputs import Choices
from nsample.analysis.quality import quality_table, require_logprobs
from nsample.analysis.similarity import check_similarity, similarity_matrix, similarity_to_others

RANKABLE = ("mean_logprob", "perplexity", "completion_tokens")
LOWER_IS_BETTER = {"perplexity"}
Scorer = str | Callable[[str], float]


def rank_choices(data: Choices, by: Scorer = "mean_logprob") -> pd.DataFrame:
    """All choices, best first, with a `score` column; ties keep choice order, unscored choices come last."""
    table = quality_table(data)
    table["score"] = _scores(table, by)
    ascending = isinstance(by, str) and by in LOWER_IS_BETTER
    return table.sort_values("score", ascending=ascending, kind="stable", na_position="last").reset_index(drop=True)


def best_of(data: Choices, by: Scorer = "mean_logprob") -> pd.Series:
    """The best choice (its index, seed, text and score) by a quality column or a callable(text) -> score."""
    return rank_choices(data, by).iloc[0].rename("best")


def most_diverse(data: Choices, k: int, *, similarity: str | np.ndarray | pd.DataFrame = "auto",
                 method: str = "maxmin", by: Scorer = "mean_logprob", diversity: float = 0.5) -> pd.DataFrame:
    """k choices picked greedily to differ most: max-min similarity, or MMR trading `by` against diversity."""
    table = quality_table(data)
    _check_k(k, len(table))
    if isinstance(similarity, str):
        labelled = similarity_matrix(data, similarity)
        matrix, label = check_similarity(labelled), labelled.attrs["similarity_label"]
    else:
        matrix = check_similarity(similarity, n=len(table))
        label = getattr(similarity, "attrs", {}).get("similarity_label", "given matrix")
    if method == "maxmin":
        picks = max_min_order(matrix, k)
    elif method == "mmr":
        if not 0 <= diversity <= 1:
            raise ValueError(f"diversity must be between 0 and 1, got {diversity}")
        picks = mmr_order(matrix, _relevance(table, by), k, diversity)
    else:
        raise ValueError(f"unknown method {method!r}; choose 'maxmin' or 'mmr'")
    chosen = table.iloc[picks].reset_index(drop=True)
    chosen["similarity_to_previous"] = _closeness_at_pick(matrix, picks)
    chosen.attrs["similarity"] = label
    return chosen


def max_min_order(matrix: np.ndarray, k: int) -> list[int]:
    """Start from the choice least like the rest, then add the one whose nearest pick is least similar."""
    isolation = np.nan_to_num(similarity_to_others(matrix), nan=0.0)
    picks = [int(np.argmin(isolation))]
    while len(picks) < k:
        closeness = _masked(matrix[:, picks].max(axis=1), picks, fill=math.inf)
        picks.append(int(np.argmin(closeness)))
    return picks


def mmr_order(matrix: np.ndarray, relevance: np.ndarray, k: int, diversity: float) -> list[int]:
    """Maximal marginal relevance: start from the most relevant, then maximize relevance minus redundancy."""
    picks = [int(np.argmax(relevance))]
    while len(picks) < k:
        gain = (1 - diversity) * relevance - diversity * matrix[:, picks].max(axis=1)
        picks.append(int(np.argmax(_masked(gain, picks, fill=-math.inf))))
    return picks


def _scores(table: pd.DataFrame, by: Scorer) -> pd.Series:
    if callable(by):
        return pd.Series([float(by(text)) for text in table["text"].fillna("")], index=table.index)
    if by not in RANKABLE:
        raise ValueError(f"cannot rank by {by!r}: use one of {', '.join(RANKABLE)} or a callable(text) -> score")
    if by != "completion_tokens":
        require_logprobs(table)
    return table[by].astype(float)


def _relevance(table: pd.DataFrame, by: Scorer) -> np.ndarray:
    """Scores rescaled to 0..1 (best = 1) so they weigh like similarities; unscored choices get 0."""
    scores = _scores(table, by).to_numpy(dtype=np.float64)
    if isinstance(by, str) and by in LOWER_IS_BETTER:
        scores = -scores
    low, high = np.nanmin(scores), np.nanmax(scores)
    scaled = (scores - low) / (high - low) if high > low else np.ones_like(scores)
    return np.nan_to_num(scaled, nan=0.0)


def _masked(values: np.ndarray, picks: list[int], fill: float) -> np.ndarray:
    values = values.astype(np.float64).copy()
    values[picks] = fill
    return values


def _closeness_at_pick(matrix: np.ndarray, picks: list[int]) -> list[float]:
    return [math.nan] + [float(matrix[p, picks[:i]].max()) for i, p in enumerate(picks) if i > 0]


def _check_k(k: int, n: int) -> None:
    if isinstance(k, bool) or not isinstance(k, Integral):
        raise TypeError(f"k must be an integer, got {type(k).__name__}")
    if not 1 <= k <= n:
        raise ValueError(f"cannot pick k={k} of {n} choices: k must be between 1 and {n}")
