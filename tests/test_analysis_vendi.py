"""Known answers for the Vendi score and the checks on similarity matrices."""
import numpy as np
import pandas as pd
import pytest

from nsample.analysis import vendi_score
from nsample.analysis.vendi import vendi_from_matrix


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_identity_gives_n_and_all_ones_gives_one(n):
    assert vendi_score(np.eye(n)) == pytest.approx(n)
    assert vendi_score(np.ones((n, n))) == pytest.approx(1.0)


def test_two_groups_of_identical_choices_count_as_two():
    block = np.kron(np.eye(2), np.ones((3, 3)))  # choices 0-2 alike, 3-5 alike
    assert vendi_score(block) == pytest.approx(2.0)


def test_known_value_for_a_two_by_two_matrix():
    s = 0.5  # eigenvalues of K/2 are (1 +- s) / 2
    p = np.array([(1 + s) / 2, (1 - s) / 2])
    assert vendi_score(np.array([[1, s], [s, 1]])) == pytest.approx(np.exp(-(p * np.log(p)).sum()))


@pytest.mark.parametrize("method", ["edit", "jaccard"])
def test_identical_texts_give_one_and_disjoint_texts_give_n(method):
    assert vendi_score(["same answer here"] * 5, method) == pytest.approx(1.0)
    assert vendi_score(["aaa", "bbb", "ccc", "ddd"], method) == pytest.approx(4.0)


def test_accepts_a_labelled_dataframe_and_a_list_of_lists():
    assert vendi_score(pd.DataFrame(np.eye(3))) == pytest.approx(3.0)
    assert vendi_score([[1.0, 0.0], [0.0, 1.0]]) == pytest.approx(2.0)


def test_non_psd_matrix_is_symmetrized_and_clipped_into_range():
    # not PSD (eigenvalue 1 - 0.9 * sqrt(2) < 0) and not symmetric
    matrix = np.array([[1.0, 0.9, 0.0], [0.9, 1.0, 0.9], [0.0, 0.8, 1.0]])
    assert np.linalg.eigvalsh((matrix + matrix.T) / 2).min() < 0
    score = vendi_from_matrix(matrix)
    assert 1.0 <= score <= 3.0
    assert score == pytest.approx(vendi_from_matrix(matrix.T))


@pytest.mark.parametrize("bad, message", [
    (np.ones((2, 3)), "square"),
    (np.ones(4), "square"),
    (np.zeros((0, 0)), "non-empty"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), "NaN"),
    (np.array([[2.0, 0.0], [0.0, 2.0]]), "diagonal"),
])
def test_nonsense_matrices_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        vendi_score(bad)


def test_empty_choices_are_refused():
    with pytest.raises(ValueError, match="empty"):
        vendi_score([])
