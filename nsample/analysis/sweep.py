"""Sweeps: n choices at every point of a temperature x top_p grid, as one tidy DataFrame."""
import itertools
import warnings
from collections.abc import Callable, Iterable, Sequence
from numbers import Real

import pandas as pd
from tqdm import TqdmWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", TqdmWarning)  # without ipywidgets, tqdm.auto falls back to a text bar
    from tqdm.auto import tqdm

from nsample.analysis.quality import quality_table
from nsample.analysis.summary import SUMMARY_FIELDS, diversity_summary
from nsample.outputs import GenerationResult
from nsample.sampling_params import SamplingParams

GRID_COLUMNS = ["run", "temperature", "top_p"]
Progress = bool | Callable[[int, int], None]


def sweep(engine, prompt, *, n: int = 8, temperature: float | Sequence[float] = 1.0,
          top_p: float | Sequence[float] = 1.0, seed: int | None = 0, similarity: str = "auto",
          progress: Progress = True, **params) -> pd.DataFrame:
    """One row per choice at every (temperature, top_p): its parameters, quality signals and its run's diversity.

    Every grid point uses the same seed, so differences come from the parameters, not the dice.
    `progress` is True for a tqdm bar, False for none, or a callback(done, total) for a UI.
    """
    params.setdefault("logprobs", True)
    grid = grid_points(temperature, top_p)
    for t, p in grid:  # fail on a bad value before spending minutes on the points before it
        SamplingParams.from_kwargs(n=n, seed=seed, temperature=t, top_p=p, **params)
    frames = []
    for run, (t, p) in enumerate(_tracked(grid, progress)):
        result = engine.generate(prompt, n=n, seed=seed, temperature=t, top_p=p, **params)
        frames.append(run_frame(result, run=run, temperature=t, top_p=p, similarity=similarity))
    return pd.concat(frames, ignore_index=True)


def grid_points(temperature: float | Sequence[float], top_p: float | Sequence[float]) -> list[tuple[float, float]]:
    """Every (temperature, top_p) pair, temperature-major."""
    return list(itertools.product(_values("temperature", temperature), _values("top_p", top_p)))


def run_frame(result: GenerationResult, *, run: int, temperature: float, top_p: float,
              similarity: str = "auto") -> pd.DataFrame:
    """One grid point's choices: parameters first, then per-choice quality, then the run's diversity summary."""
    table = quality_table(result)
    for position, (name, value) in enumerate(zip(GRID_COLUMNS, (run, temperature, top_p), strict=True)):
        table.insert(position, name, value)
    summary = diversity_summary(result, similarity)
    for field in SUMMARY_FIELDS:
        table[field] = summary[field]
    return table


def sweep_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per grid point: its parameters, mean quality over its choices, and its diversity summary."""
    missing = [c for c in [*GRID_COLUMNS, "mean_logprob", *SUMMARY_FIELDS] if c not in frame.columns]
    if missing:
        raise ValueError(f"not a sweep() DataFrame: missing columns {missing}")
    grouped = frame.groupby(GRID_COLUMNS, sort=True)
    means = grouped[["mean_logprob", "perplexity", "completion_tokens"]].mean()
    return means.join(grouped[SUMMARY_FIELDS].first()).reset_index()


def _values(name: str, value: float | Sequence[float]) -> list[float]:
    values = [value] if isinstance(value, Real) else list(value)
    if not values:
        raise ValueError(f"sweep needs at least one {name} value")
    return [float(v) for v in values]


def _tracked(grid: list, progress: Progress) -> Iterable:
    if progress is True:
        yield from tqdm(grid, desc="sweep", unit="run")
        return
    report = progress if callable(progress) else None
    for done, point in enumerate(grid):
        if report:
            report(done, len(grid))
        yield point
    if report:
        report(len(grid), len(grid))
