"""Quality signals per choice from its logprobs: mean token logprob, perplexity and length."""
import numpy as np
import pandas as pd

from nsample.analysis.inputs import Choices, choices_frame

QUALITY_COLUMNS = ["index", "seed", "completion_tokens", "finish_reason", "mean_logprob", "perplexity", "text"]
LOGPROBS_HINT = "generate with logprobs=True to get per-token logprobs"


def perplexity(mean_logprob: float | pd.Series) -> float | pd.Series:
    """exp(-mean token logprob): how many tokens the model was choosing between, on average."""
    return np.exp(-mean_logprob)


def quality_table(data: Choices) -> pd.DataFrame:
    """One row per choice: its index, seed, length in tokens, finish reason, mean logprob and perplexity."""
    frame = choices_frame(data)
    frame["perplexity"] = perplexity(frame["mean_logprob"])
    frame["completion_tokens"] = pd.to_numeric(frame["completion_tokens"], errors="coerce").astype("Int64")
    return frame[QUALITY_COLUMNS]


def require_logprobs(table: pd.DataFrame, column: str = "mean_logprob") -> None:
    """Fail clearly when no choice has the signal (choices with no tokens have none either)."""
    if table[column].isna().all():
        raise ValueError(f"no choice has a {column}: {LOGPROBS_HINT}")
