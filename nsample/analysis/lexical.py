"""Lexical diversity: distinct-n, self-BLEU, and edit / n-gram Jaccard similarity matrices."""
import math
import re
from collections.abc import Sequence

import numpy as np
import sacrebleu
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    """Lowercased words and punctuation marks: 'Hi, you!' -> ['hi', ',', 'you', '!']."""
    return TOKEN.findall(text.lower())


def ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: Sequence[str], n: int) -> float:
    """Unique n-grams over all n-grams, pooled across the texts (Li et al. 2016); NaN when there are none."""
    if n < 1:
        raise ValueError(f"distinct-n needs n >= 1, got {n}")
    grams = [g for text in texts for g in ngrams(tokens(text), n)]
    return len(set(grams)) / len(grams) if grams else math.nan


def self_bleu(texts: Sequence[str]) -> float:
    """Mean sacrebleu sentence BLEU (0..1) of each non-empty text against all the others; NaN below 2 texts."""
    scores = [bleu for bleu in per_choice_self_bleu(texts) if not math.isnan(bleu)]
    return float(np.mean(scores)) if scores else math.nan


def per_choice_self_bleu(texts: Sequence[str]) -> list[float]:
    """Each text's BLEU (0..1) against the other texts as references; NaN where it or they are all empty."""
    scores = []
    for i, hypothesis in enumerate(texts):
        references = [t for j, t in enumerate(texts) if j != i and t.strip()]
        if not hypothesis.strip() or not references:
            scores.append(math.nan)
        else:
            scores.append(sacrebleu.sentence_bleu(hypothesis, references).score / 100)
    return scores


def edit_similarity(texts: Sequence[str]) -> np.ndarray:
    """Pairwise normalized Levenshtein similarity, 1 - distance / longer length (two empty texts: 1)."""
    matrix = process.cdist(texts, texts, scorer=Levenshtein.normalized_similarity, workers=1)
    return np.asarray(matrix, dtype=np.float64)


def jaccard_similarity(texts: Sequence[str], n: int = 1) -> np.ndarray:
    """Pairwise Jaccard similarity of word n-gram sets; a text shorter than n counts as one n-gram."""
    sets = [_gram_set(tokens(text), n) for text in texts]
    size = len(sets)
    matrix = np.ones((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            matrix[i, j] = matrix[j, i] = _jaccard(sets[i], sets[j])
    return matrix


def _gram_set(words: list[str], n: int) -> set[tuple[str, ...]]:
    if n < 1:
        raise ValueError(f"n-gram Jaccard needs n >= 1, got {n}")
    return set(ngrams(words, n)) if len(words) >= n else ({tuple(words)} if words else set())


def _jaccard(a: set, b: set) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0
