"""The Sweep tab's work as plain Python: nsample.analysis.sweep over the page's prompt, its two figures and table."""
import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from nsample import analysis
from nsample.errors import InvalidRequest
from nsample.ui.run import RunSpec

MAX_POINTS = 12  # temperatures x top_p values, each a run of n choices
SUMMARY_COLUMNS = ["temperature", "top_p", "vendi_score", "mean_similarity", "distinct_2", "mean_logprob",
                   "perplexity", "completion_tokens"]


class SweepStopped(Exception):
    """The user stopped the sweep between two grid points."""


@dataclass
class SweepView:
    frame: pd.DataFrame  # sweep()'s tidy frame, one row per choice and grid point
    summary: pd.DataFrame  # one row per grid point
    diversity_figure: object  # Vendi score vs temperature
    quality_figure: object  # mean logprob vs Vendi score, or None when no logprobs came back
    note: str = ""


def pass_rates(frame: pd.DataFrame, check) -> pd.DataFrame:
    """pass@1 and pass@n at every grid point of a sweep() frame, by nsample.analysis.pass_at_k on its n choices."""
    rows = []
    for (t, p), point in frame.groupby(["temperature", "top_p"], sort=True):
        curve = analysis.pass_at_k(point.reset_index(drop=True), check)
        rows.append({"temperature": t, "top_p": p, "pass_at_1": curve["pass_at_k"].iloc[0],
                     "pass_at_n": curve["pass_at_k"].iloc[-1], "passed": curve.attrs["c"], "n": curve.attrs["n"]})
    return pd.DataFrame(rows)


def pass_figure(rates: pd.DataFrame, check_name: str):
    """pass@1 and pass@n against temperature, one pair of lines per top_p: more diversity, higher pass@n."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for p, line in rates.groupby("top_p", sort=True):
        n = int(line["n"].iloc[0])
        figure.add_trace(go.Scatter(x=line["temperature"], y=line["pass_at_1"], mode="lines+markers",
                                    name=f"pass@1 (top_p {p:g})"))
        figure.add_trace(go.Scatter(x=line["temperature"], y=line["pass_at_n"], mode="lines+markers",
                                    line={"dash": "dash"}, name=f"pass@{n} (top_p {p:g})"))
    figure.update_layout(title=f"pass@1 and pass@n vs temperature ({check_name})", xaxis_title="temperature",
                         yaxis_title="pass rate", yaxis_range=[0, 1.05], height=320)
    return figure


def parse_values(text: str, name: str, low: float, high: float) -> list[float]:
    """A comma- or space-separated list of numbers in [low, high], in the order given."""
    try:
        values = [float(v) for v in re.split(r"[,\s]+", str(text or "").strip()) if v]
    except ValueError:
        raise InvalidRequest(f"{name}: write numbers separated by commas, e.g. 0.3, 0.7, 1.0.", param=name) from None
    if not values:
        raise InvalidRequest(f"{name}: give at least one value.", param=name)
    bad = [v for v in values if not low <= v <= high]
    if bad:
        raise InvalidRequest(f"{name} must be between {low:g} and {high:g}, got {bad[0]:g}.", param=name)
    return values


def run_sweep(engine, spec: RunSpec, temperatures: list[float], top_ps: list[float],
              progress: Callable[[int, int], None] | None = None) -> SweepView:
    """n choices at every (temperature, top_p), one seed; `progress` may raise SweepStopped between points."""
    points = len(temperatures) * len(top_ps)
    if points > MAX_POINTS:
        raise InvalidRequest(f"A sweep from the page has at most {MAX_POINTS} points (temperatures x top_p "
                             f"values); got {points}.", param="temperature")
    seed = {} if spec.seed is None else {"seed": spec.seed}
    frame = analysis.sweep(engine, spec.engine_prompt, n=spec.n, temperature=temperatures, top_p=top_ps,
                           max_tokens=spec.max_tokens, stop=list(spec.stop), progress=progress or False, **seed)
    summary, notes = analysis.sweep_summary(frame)[SUMMARY_COLUMNS], []
    if not (summary["completion_tokens"] > 0).any():  # a remote engine's choices carry no token ids
        summary = summary.drop(columns="completion_tokens")
        notes.append("The engine reports no token ids, so the table has no token counts.")
    quality = None
    if frame["mean_logprob"].isna().all():
        notes.append("The engine sent no logprobs, so there is no quality-vs-diversity figure.")
    else:
        quality = analysis.logprob_vs_diversity(frame)
    return SweepView(frame, summary, analysis.diversity_vs_temperature(frame), quality, " ".join(notes))
