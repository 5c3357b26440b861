"""Analysis of n choices: diversity, quality, selection, sweeps and figures; pure on results, except sweep()."""
from nsample.analysis.figures import (
    diversity_vs_temperature,
    logprob_vs_diversity,
    similarity_heatmap,
    tokens_per_choice,
)
from nsample.analysis.lexical import distinct_n, edit_similarity, jaccard_similarity, self_bleu
from nsample.analysis.preferences import preference_pairs
from nsample.analysis.quality import perplexity, quality_table
from nsample.analysis.selection import best_of, most_diverse, rank_choices
from nsample.analysis.semantic import EmbeddingsUnavailable, embedding_similarity, embeddings_available
from nsample.analysis.similarity import mean_pairwise_similarity, similarity_label, similarity_matrix
from nsample.analysis.summary import diversity_summary
from nsample.analysis.sweep import sweep, sweep_summary
from nsample.analysis.vendi import vendi_score

__all__ = ["EmbeddingsUnavailable", "best_of", "distinct_n", "diversity_summary", "diversity_vs_temperature",
           "edit_similarity", "embedding_similarity", "embeddings_available", "jaccard_similarity",
           "logprob_vs_diversity", "mean_pairwise_similarity", "most_diverse", "perplexity", "preference_pairs",
           "quality_table", "rank_choices", "self_bleu", "similarity_heatmap", "similarity_label", "similarity_matrix",
           "sweep", "sweep_summary", "tokens_per_choice", "vendi_score"]
