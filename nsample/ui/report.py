"""After a run (finished, stopped or failed): headline diversity numbers and plotly figures, all computed by
nsample.analysis from what the page received (none here), so every ended run gets the same report."""
import math
from dataclasses import dataclass

import pandas as pd

from nsample import analysis
from nsample.ui.run import Run

HEADLINE = [("vendi_score", "Vendi score", "{:.2f} of {n}"), ("mean_similarity", "mean pairwise similarity", "{:.3f}"),
            ("distinct_1", "distinct-1", "{:.3f}"), ("distinct_2", "distinct-2", "{:.3f}"),
            ("self_bleu", "self-BLEU", "{:.3f}")]


@dataclass
class Report:
    headline: str  # markdown
    tokens_figure: object  # plotly Figure or None
    similarity_figure: object
    diversity: dict | None  # diversity_summary as plain values, for the JSON export
    similarity: pd.DataFrame | None = None  # the pairwise matrix, reused to pick the most diverse choices


def summarize(run: Run) -> Report:
    """The analysis of an ended run; a metric that cannot be computed becomes a note, never a failed page."""
    frame = run.to_dataframe()
    prefix = _partial(run)
    tokens = analysis.tokens_per_choice(frame)
    try:
        matrix = analysis.similarity_matrix(frame)
        summary = analysis.diversity_summary(frame)
        heatmap = analysis.similarity_heatmap(matrix)
    except (ValueError, ImportError) as e:
        return Report(f"{prefix}Diversity could not be computed: {e}", tokens, None, None)
    diversity = {k: _plain(v) for k, v in summary.items()}
    return Report(prefix + headline(diversity), tokens, heatmap, diversity, matrix)


def headline(diversity: dict) -> str:
    """One line of the numbers, formatted; NaN (e.g. no pairs when n=1) shows as n/a."""
    n = diversity.get("n")
    parts = []
    for key, label, fmt in HEADLINE:
        value = diversity.get(key)
        parts.append(f"{label} **{'n/a' if value is None else fmt.format(value, n=n)}**")
    similarity = f"  \n<sub>similarity: {diversity.get('similarity')}</sub>"
    return f"**Diversity of {n} choices:** " + " · ".join(parts) + similarity


def _partial(run: Run) -> str:
    if run.error is not None:
        return f"**Failed run, partial texts** ({run.error})  \n"
    if run.cancelled:
        return "**Stopped run, partial texts.**  \n"
    return ""


def _plain(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
