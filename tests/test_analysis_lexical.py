"""Known answers for the lexical metrics: distinct-n, self-BLEU, edit and Jaccard similarity."""
import math

import numpy as np
import pytest
import sacrebleu

from nsample.analysis import distinct_n, edit_similarity, jaccard_similarity, self_bleu
from nsample.analysis.lexical import per_choice_self_bleu, tokens


def test_tokens_are_lowercased_words_and_punctuation():
    assert tokens("Hi, you!  The END.") == ["hi", ",", "you", "!", "the", "end", "."]


def test_distinct_n_on_a_hand_counted_example():
    texts = ["the cat sat", "the cat ran"]
    # unigrams: the cat sat the cat ran -> 4 unique of 6; bigrams: the-cat x2, cat-sat, cat-ran -> 3 of 4;
    # trigrams: the-cat-sat, the-cat-ran -> 2 of 2
    assert distinct_n(texts, 1) == pytest.approx(4 / 6)
    assert distinct_n(texts, 2) == pytest.approx(3 / 4)
    assert distinct_n(texts, 3) == 1.0


def test_distinct_n_is_nan_without_ngrams_and_rejects_n_below_1():
    assert math.isnan(distinct_n(["", ""], 1))
    assert math.isnan(distinct_n(["one two"], 3))
    with pytest.raises(ValueError, match="n >= 1"):
        distinct_n(["a"], 0)


def test_identical_texts_have_distinct_n_of_one_copy():
    assert distinct_n(["a b c"] * 4, 1) == pytest.approx(3 / 12)


def test_self_bleu_matches_sacrebleu_directly():
    texts = ["the quick brown fox jumps over the lazy dog", "a quick brown dog jumps over the lazy fox",
             "stock prices fell sharply on monday morning"]
    expected = [sacrebleu.sentence_bleu(t, [o for o in texts if o is not t]).score / 100 for t in texts]
    assert per_choice_self_bleu(texts) == pytest.approx(expected)
    assert self_bleu(texts) == pytest.approx(np.mean(expected))


def test_self_bleu_of_identical_texts_is_one_and_of_one_text_is_nan():
    assert self_bleu(["the same four words"] * 3) == pytest.approx(1.0)
    assert math.isnan(self_bleu(["alone"]))


def test_self_bleu_skips_empty_texts():
    assert math.isnan(self_bleu(["", "  "]))
    texts = ["the cat sat on the mat", "", "the cat sat on the mat"]
    assert per_choice_self_bleu(texts)[1] != per_choice_self_bleu(texts)[1]  # NaN: an empty text has no BLEU
    assert self_bleu(texts) == pytest.approx(1.0)


def test_edit_similarity_known_values():
    matrix = edit_similarity(["abcd", "abcf", "wxyz", ""])
    assert matrix.shape == (4, 4)
    assert np.diag(matrix) == pytest.approx(np.ones(4))
    assert matrix[0, 1] == pytest.approx(0.75)  # one substitution in four characters
    assert matrix[0, 2] == 0.0
    assert matrix[0, 3] == 0.0
    assert edit_similarity(["", ""])[0, 1] == 1.0  # two empty texts are identical


def test_jaccard_similarity_known_values():
    matrix = jaccard_similarity(["the cat sat", "the cat ran", "dogs bark", ""])
    assert matrix[0, 1] == pytest.approx(2 / 4)  # {the, cat} of {the, cat, sat, ran}
    assert matrix[0, 2] == 0.0
    assert matrix[3, 3] == 1.0 and matrix[0, 3] == 0.0
    assert np.allclose(matrix, matrix.T)


def test_jaccard_on_bigrams_counts_short_texts_as_one_gram():
    matrix = jaccard_similarity(["hello", "world", "hello"], n=2)
    assert matrix[0, 1] == 0.0 and matrix[0, 2] == 1.0
    assert jaccard_similarity(["a b c", "a b d"], n=2)[0, 1] == pytest.approx(1 / 3)
