"""Pairwise similarity between choices: which measure, the labelled matrix, and checks on matrices."""
import math

import numpy as np
import pandas as pd

from nsample.analysis.inputs import Choices, choices_frame
from nsample.analysis.lexical import edit_similarity, jaccard_similarity
from nsample.analysis.semantic import INSTALL_HINT, MODEL_NAME, embedding_similarity, embeddings_available

METHODS = ("auto", "embedding", "edit", "jaccard")
LABELS = {"embedding": f"embedding cosine ({MODEL_NAME})", "edit": "normalized edit similarity",
          "jaccard": "word Jaccard"}
FALLBACK_NOTE = f" (embeddings extra not installed: {INSTALL_HINT})"


def resolve_method(method: str = "auto") -> str:
    """'auto' means embeddings when the extra is installed, else edit similarity."""
    if method not in METHODS:
        raise ValueError(f"unknown similarity {method!r}; choose one of {', '.join(METHODS)}")
    if method == "auto":
        return "embedding" if embeddings_available() else "edit"
    return method


def similarity_label(method: str = "auto") -> str:
    """What a similarity method measures, in words, noting when 'auto' fell back to a lexical measure."""
    resolved = resolve_method(method)
    fell_back = method == "auto" and resolved != "embedding"
    return LABELS[resolved] + (FALLBACK_NOTE if fell_back else "")


def similarity_matrix(data: Choices, method: str = "auto") -> pd.DataFrame:
    """The n x n similarity of every pair of choices, labelled by choice index; attrs say which measure."""
    frame = choices_frame(data)
    texts = frame["text"].fillna("").astype(str).tolist()
    resolved = resolve_method(method)
    compute = {"embedding": embedding_similarity, "edit": edit_similarity, "jaccard": jaccard_similarity}
    labels = pd.Index(frame["index"].tolist(), name="choice")
    matrix = pd.DataFrame(compute[resolved](texts), index=labels, columns=labels)
    matrix.attrs.update(similarity=resolved, similarity_label=similarity_label(method))
    return matrix


def check_similarity(matrix, n: int | None = None) -> np.ndarray:
    """The matrix as a float array, after checking it is square (n x n when n is given), finite, unit-diagonal."""
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] == 0:
        raise ValueError(f"a similarity matrix must be square and non-empty, got shape {array.shape}")
    if n is not None and array.shape[0] != n:
        raise ValueError(f"the similarity matrix is {array.shape[0]}x{array.shape[1]} but there are {n} choices")
    if not np.isfinite(array).all():
        raise ValueError("the similarity matrix has NaN or infinite entries")
    if not np.allclose(np.diag(array), 1.0, atol=1e-3):
        raise ValueError("a similarity matrix needs ones on its diagonal (each choice is identical to itself)")
    return array


def mean_pairwise_similarity(matrix) -> float:
    """Mean similarity over distinct pairs; NaN for a single choice, which has no pairs."""
    array = check_similarity(matrix)
    size = len(array)
    if size < 2:
        return math.nan
    return float((array.sum() - np.trace(array)) / (size * (size - 1)))


def similarity_to_others(matrix) -> np.ndarray:
    """Each choice's mean similarity to the other choices; NaN for a single choice."""
    array = check_similarity(matrix)
    size = len(array)
    if size < 2:
        return np.full(size, math.nan)
    return (array.sum(axis=1) - np.diag(array)) / (size - 1)
