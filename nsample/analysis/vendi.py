"""The Vendi score: the effective number of distinct choices, from 1 (all alike) to n (all different)."""
import numpy as np

from nsample.analysis.inputs import is_choices
from nsample.analysis.similarity import check_similarity, similarity_matrix


def vendi_score(data, method: str = "auto") -> float:
    """exp(Shannon entropy of the eigenvalues of K/n) for a similarity matrix K, or for choices via `method`."""
    return vendi_from_matrix(_matrix(data, method))


def vendi_from_matrix(matrix) -> float:
    """The Vendi score of a unit-diagonal similarity matrix (Friedman & Dieng, 2023)."""
    array = check_similarity(matrix)
    # Edit-similarity matrices need not be PSD: take the nearest symmetric PSD matrix (symmetrize, then
    # clip negative eigenvalues to 0) and renormalize the eigenvalues into a probability distribution.
    symmetric = (array + array.T) / 2
    eigenvalues = np.clip(np.linalg.eigvalsh(symmetric / len(array)), 0.0, None)  # (n,)
    weights = eigenvalues / eigenvalues.sum()
    weights = weights[weights > 0]
    return float(np.clip(np.exp(-(weights * np.log(weights)).sum()), 1.0, len(array)))


def _matrix(data, method: str):
    return similarity_matrix(data, method) if is_choices(data) else data
