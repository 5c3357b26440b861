"""Analysis of n choices: diversity, quality, selection, answers and votes, checks and pass@k, sweeps, figures.

Pure on results, except sweep() (which generates) and CodeCheck (which runs Python source in subprocesses).
"""
from nsample.analysis.answers import NO_ANSWER, answers, normalize_expected
from nsample.analysis.checks import Expected, Matches, ValidJSON, Verdict, run_checks
from nsample.analysis.code_check import CodeCheck
from nsample.analysis.extractors import PRESETS, Extractor, answer_key, extractor
from nsample.analysis.figures import (
    diversity_vs_temperature,
    logprob_vs_diversity,
    similarity_heatmap,
    tokens_per_choice,
)
from nsample.analysis.groups import group_similar
from nsample.analysis.lexical import distinct_n, edit_similarity, jaccard_similarity, self_bleu
from nsample.analysis.majority_at_k import majority_at_k
from nsample.analysis.pass_at_k import pass_at_k, pass_at_k_estimate
from nsample.analysis.preferences import preference_pairs
from nsample.analysis.quality import perplexity, quality_table
from nsample.analysis.selection import best_of, most_diverse, rank_choices
from nsample.analysis.semantic import EmbeddingsUnavailable, embedding_similarity, embeddings_available
from nsample.analysis.similarity import mean_pairwise_similarity, similarity_label, similarity_matrix
from nsample.analysis.summary import diversity_summary
from nsample.analysis.sweep import sweep, sweep_summary
from nsample.analysis.vendi import vendi_score
from nsample.analysis.votes import vote

__all__ = ["NO_ANSWER", "PRESETS", "CodeCheck", "EmbeddingsUnavailable", "Expected", "Extractor", "Matches",
           "ValidJSON", "Verdict", "answer_key", "answers", "best_of", "distinct_n", "diversity_summary",
           "diversity_vs_temperature", "edit_similarity", "embedding_similarity", "embeddings_available", "extractor",
           "group_similar", "jaccard_similarity", "logprob_vs_diversity", "majority_at_k", "mean_pairwise_similarity",
           "most_diverse", "normalize_expected", "pass_at_k", "pass_at_k_estimate", "perplexity", "preference_pairs",
           "quality_table", "rank_choices", "run_checks", "self_bleu", "similarity_heatmap", "similarity_label",
           "similarity_matrix", "sweep", "sweep_summary", "tokens_per_choice", "vendi_score", "vote"]
