"""The answer of each choice, by an extractor; a choice without one keeps its row with answer None."""
import pandas as pd

from nsample.analysis.extractors import Extract, Extractor, answer_key, extractor, tidy
from nsample.analysis.inputs import Choices, choices_frame

NO_ANSWER = "no answer"
"""How vote() and the page label a choice whose text has no answer; answers() keeps None for it."""


def answers(data: Choices, extract: "Extract | Extractor" = "last number") -> pd.DataFrame:
    """One row per choice: index, seed, text and answer (None: no answer); attrs["extract"] names the extractor.

    A callable extractor that raises is a ValueError naming the choice, so a broken extractor is not mistaken
    for choices without answers.
    """
    frame = choices_frame(data)
    function = extractor(extract)
    texts = frame["text"].fillna("").astype(str)
    found = [_answer_of(function, text, index) for text, index in zip(texts, frame["index"])]
    table = pd.DataFrame({"index": frame["index"], "seed": frame["seed"], "text": texts,
                          "answer": pd.Series(found, index=frame.index, dtype=object)})  # None stays None
    table.attrs["extract"] = function.name
    return table


def normalize_expected(expected: str, extract: "Extract | Extractor" = "text") -> str:
    """The comparison key of an expected answer: what the extractor finds in it (else the text itself), as a key.

    So with extract="last number" the expected "forty-two" matches a choice answering 42.0.
    """
    function = extractor(extract)
    text = str(expected)
    found = function(text)
    return answer_key(found if found is not None else (tidy(text) or ""))


def _answer_of(function: Extractor, text: str, index) -> str | None:
    try:
        return function(text)
    except Exception as error:
        raise ValueError(f"extractor {function.name!r} raised on choice {index}: {error!r}") from error
