"""The headline diversity numbers for one set of choices, as the notebooks and the UI show them."""
import pandas as pd

from nsample.analysis.inputs import Choices, texts_of
from nsample.analysis.lexical import distinct_n, self_bleu
from nsample.analysis.similarity import mean_pairwise_similarity, similarity_matrix
from nsample.analysis.vendi import vendi_from_matrix

SUMMARY_FIELDS = ["n", "distinct_1", "distinct_2", "distinct_3", "self_bleu", "mean_similarity", "vendi_score",
                  "similarity"]


def diversity_summary(data: Choices, method: str = "auto") -> pd.Series:
    """n, distinct-1/2/3, self-BLEU, mean pairwise similarity, Vendi score, and which similarity was used."""
    texts = texts_of(data)
    matrix = similarity_matrix(texts, method)
    return pd.Series({
        "n": len(texts),
        "distinct_1": distinct_n(texts, 1),
        "distinct_2": distinct_n(texts, 2),
        "distinct_3": distinct_n(texts, 3),
        "self_bleu": self_bleu(texts),
        "mean_similarity": mean_pairwise_similarity(matrix),
        "vendi_score": vendi_from_matrix(matrix),
        "similarity": matrix.attrs["similarity_label"],
    }, name="diversity")
