"""After a run: headline diversity numbers and plotly figures, all computed by nsample.analysis (none here)."""
import math
from dataclasses import dataclass

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


def summarize(run: Run) -> Report:
    """The analysis of a finished run; a metric that cannot be computed becomes a note, never a failed page."""
    result = run.result
    try:
        summary = analysis.diversity_summary(result)
        heatmap = analysis.similarity_heatmap(result)
    except (ValueError, ImportError) as e:
        return Report(f"Diversity could not be computed: {e}", _tokens(result), None, None)
    diversity = {k: _plain(v) for k, v in summary.items()}
    return Report(headline(diversity), _tokens(result), heatmap, diversity)


def headline(diversity: dict) -> str:
    """One line of the numbers, formatted; NaN (e.g. no pairs when n=1) shows as n/a."""
    n = diversity.get("n")
    parts = []
    for key, label, fmt in HEADLINE:
        value = diversity.get(key)
        parts.append(f"{label} **{'n/a' if value is None else fmt.format(value, n=n)}**")
    return f"**Diversity of {n} choices:** " + " · ".join(parts) + f"  \n<sub>similarity: {diversity.get('similarity')}</sub>"


def _tokens(result):
    try:
        return analysis.tokens_per_choice(result)
    except ValueError:
        return None


def _plain(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
