"""What the analysis functions accept: a GenerationResult, a to_dataframe() frame, or a list of texts."""
from collections.abc import Sequence

import pandas as pd

from nsample.outputs import GenerationResult

CHOICE_COLUMNS = ["index", "seed", "text", "completion_tokens", "finish_reason", "mean_logprob"]

Choices = GenerationResult | pd.DataFrame | Sequence[str]


def choices_frame(data: Choices) -> pd.DataFrame:
    """One row per choice with the to_dataframe() columns; texts alone get index 0..n-1 and no seed."""
    if isinstance(data, GenerationResult):
        frame = data.to_dataframe()
    elif isinstance(data, pd.DataFrame):
        if "text" not in data.columns:
            raise ValueError(f"a choices DataFrame needs a 'text' column (as from result.to_dataframe()); "
                             f"got columns {list(data.columns)}")
        frame = data.reset_index(drop=True).copy()
        for column in CHOICE_COLUMNS:
            if column not in frame.columns:
                frame[column] = range(len(frame)) if column == "index" else None
    elif isinstance(data, Sequence) and not isinstance(data, str):
        frame = pd.DataFrame({"index": range(len(data)), "seed": None, "text": _strings(data),
                              "completion_tokens": None, "finish_reason": None, "mean_logprob": None})
    else:
        raise TypeError(f"expected a GenerationResult, a DataFrame from result.to_dataframe() or a list of "
                        f"strings, got {type(data).__name__}")
    if frame.empty:
        raise ValueError("no choices to analyse: the result (or list of texts) is empty")
    frame["mean_logprob"] = pd.to_numeric(frame["mean_logprob"], errors="coerce").astype(float)
    return frame


def texts_of(data: Choices) -> list[str]:
    """The choices' texts, in choice order."""
    return choices_frame(data)["text"].fillna("").astype(str).tolist()


def _strings(items: Sequence) -> list[str]:
    bad = [type(x).__name__ for x in items if not isinstance(x, str)]
    if bad:
        raise TypeError(f"expected a list of strings, found an item of type {bad[0]}")
    return list(items)


def is_choices(data) -> bool:
    """Whether `data` holds choices (a result, a to_dataframe() frame, texts) rather than a similarity matrix."""
    if isinstance(data, GenerationResult):
        return True
    if isinstance(data, pd.DataFrame):
        return "text" in data.columns
    return isinstance(data, Sequence) and not isinstance(data, str) and all(isinstance(x, str) for x in data)
