"""Plotly figures: tokens per choice, similarity heatmap, diversity vs temperature, logprob vs diversity."""
import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from nsample.analysis.inputs import Choices, is_choices
from nsample.analysis.quality import quality_table, require_logprobs
from nsample.analysis.similarity import check_similarity, similarity_matrix, similarity_to_others
from nsample.analysis.sweep import sweep_summary
from nsample.analysis.vendi import vendi_from_matrix

METRIC_LABELS = {
    "vendi_score": "Vendi score (effective number of distinct choices)",
    "mean_similarity": "mean pairwise similarity",
    "self_bleu": "self-BLEU (0–1, higher = more repetitive)",
    "distinct_1": "distinct-1 (unique words / words)",
    "distinct_2": "distinct-2 (unique bigrams / bigrams)",
    "distinct_3": "distinct-3 (unique trigrams / trigrams)",
    "mean_logprob": "mean token logprob",
}
LOGPROB_AXIS = "mean token logprob (higher = more likely under the model)"
_CHOICE_HOVER = ("choice %{customdata[0]} (seed %{customdata[1]})<br>mean logprob %{customdata[2]}<br>"
                 "%{customdata[3]}<br>")


def tokens_per_choice(data: Choices) -> go.Figure:
    """Bars of completion tokens per choice, coloured by finish reason; hover shows seed, logprob and text."""
    table = quality_table(data)
    if table["completion_tokens"].isna().all():
        raise ValueError("tokens per choice needs token counts: pass a GenerationResult or result.to_dataframe()")
    figure = go.Figure()
    for reason, rows in table.groupby(table["finish_reason"].fillna("unknown"), sort=True):
        figure.add_bar(x=rows["index"], y=rows["completion_tokens"], name=f"finished: {reason}",
                       customdata=_hover_data(rows), hovertemplate=_CHOICE_HOVER + "%{y} tokens<extra></extra>")
    figure.update_layout(title=f"Tokens per choice (n={len(table)})", barmode="overlay",
                         xaxis={"title": "choice index", "type": "category", "categoryorder": "array",
                                "categoryarray": sorted(table["index"])},
                         yaxis_title="completion tokens", legend_title="finish reason")
    return figure


def similarity_heatmap(data, method: str = "auto") -> go.Figure:
    """Heatmap of pairwise similarity between choices (or of a given matrix), titled with its measure and Vendi."""
    matrix = similarity_matrix(data, method) if is_choices(data) else _as_frame(data)
    values = check_similarity(matrix)
    labels = [str(label) for label in matrix.index]
    label = matrix.attrs.get("similarity_label", "given similarity")
    figure = go.Figure(go.Heatmap(
        z=values, x=labels, y=labels, zmin=min(0.0, float(values.min())), zmax=1.0, colorscale="Viridis",
        colorbar={"title": "similarity"}, name="similarity",
        hovertemplate="choice %{y} vs choice %{x}<br>similarity %{z:.3f}<extra></extra>"))
    figure.update_layout(
        title=f"Pairwise similarity of {len(values)} choices: {label}<br>"
              f"<sup>Vendi score {vendi_from_matrix(values):.2f} of {len(values)} possible</sup>",
        xaxis={"title": "choice index", "type": "category"},
        yaxis={"title": "choice index", "type": "category", "autorange": "reversed"})
    return figure


def diversity_vs_temperature(sweep_frame: pd.DataFrame, metric: str = "vendi_score") -> go.Figure:
    """A line per top_p of a run-level diversity metric against temperature, from a sweep() DataFrame."""
    if metric not in METRIC_LABELS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRIC_LABELS)}")
    runs = sweep_summary(sweep_frame)
    n = int(runs["n"].max())
    figure = go.Figure()
    for top_p, rows in runs.groupby("top_p", sort=True):
        figure.add_scatter(x=rows["temperature"], y=rows[metric], mode="lines+markers", name=f"top_p={top_p:g}",
                           customdata=rows[["top_p", "mean_logprob"]].to_numpy(),
                           hovertemplate=f"temperature %{{x:g}}, top_p %{{customdata[0]:g}}<br>{metric} %{{y:.3f}}"
                                         "<br>mean logprob %{customdata[1]:.2f}<extra></extra>")
    if metric == "vendi_score":
        figure.add_hline(y=n, line_dash="dot", annotation_text=f"all {n} choices different")
    figure.update_layout(title=f"{METRIC_LABELS[metric]} vs temperature (n={n})<br>"
                               f"<sup>similarity: {runs['similarity'].iloc[0]}</sup>",
                         xaxis_title="temperature", yaxis_title=METRIC_LABELS[metric], legend_title="top_p")
    return figure


def logprob_vs_diversity(data, method: str = "auto") -> go.Figure:
    """Quality against diversity: per choice for a result, or per grid point for a sweep() DataFrame."""
    if isinstance(data, pd.DataFrame) and "run" in data.columns and "vendi_score" in data.columns:
        return _sweep_scatter(sweep_summary(data))
    return _choice_scatter(data, method)


def _choice_scatter(data: Choices, method: str) -> go.Figure:
    table = quality_table(data)
    require_logprobs(table)
    matrix = similarity_matrix(data, method)
    table["distinctness"] = 1 - similarity_to_others(matrix)
    figure = go.Figure(go.Scatter(
        x=table["distinctness"], y=table["mean_logprob"], mode="markers+text", text=table["index"].astype(str),
        textposition="top center", name="choices", customdata=_hover_data(table),
        hovertemplate=_CHOICE_HOVER + "distinctness %{x:.3f}<extra></extra>"))
    figure.update_layout(title=f"Mean token logprob vs distinctness of {len(table)} choices<br>"
                               f"<sup>similarity: {matrix.attrs['similarity_label']}</sup>",
                         xaxis_title="distinctness (1 − mean similarity to the other choices)",
                         yaxis_title=LOGPROB_AXIS)
    return figure


def _sweep_scatter(runs: pd.DataFrame) -> go.Figure:
    figure = go.Figure()
    for top_p, rows in runs.groupby("top_p", sort=True):
        figure.add_scatter(x=rows["vendi_score"], y=rows["mean_logprob"], mode="markers+text+lines",
                           name=f"top_p={top_p:g}", text=[f"T={t:g}" for t in rows["temperature"]],
                           textposition="top center", customdata=rows[["temperature", "top_p"]].to_numpy(),
                           hovertemplate="temperature %{customdata[0]:g}, top_p %{customdata[1]:g}<br>"
                                         "Vendi %{x:.2f}<br>mean logprob %{y:.2f}<extra></extra>")
    figure.update_layout(title=f"Quality vs diversity across the sweep (n={int(runs['n'].max())})<br>"
                               f"<sup>similarity: {runs['similarity'].iloc[0]}</sup>",
                         xaxis_title=METRIC_LABELS["vendi_score"], yaxis_title=LOGPROB_AXIS, legend_title="top_p")
    return figure


def _hover_data(rows: pd.DataFrame) -> np.ndarray:
    logprob = [f"{v:.3f}" if pd.notna(v) else "n/a" for v in rows["mean_logprob"]]
    return np.column_stack([rows["index"], rows["seed"].astype(object).fillna("n/a"), logprob,
                            [_preview(t) for t in rows["text"].fillna("")]])


def _preview(text: str, width: int = 80) -> str:
    flat = " ".join(text.split())
    return html.escape(flat if len(flat) <= width else flat[:width - 1] + "…")


def _as_frame(matrix) -> pd.DataFrame:
    return matrix if isinstance(matrix, pd.DataFrame) else pd.DataFrame(np.asarray(matrix, dtype=np.float64))
