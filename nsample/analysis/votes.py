"""Self-consistency: the choices' answers counted as votes, most votes first, and the majority answer."""
import pandas as pd

from nsample.analysis.answers import NO_ANSWER, answers
from nsample.analysis.extractors import Extract, Extractor, answer_key
from nsample.analysis.inputs import Choices

VOTE_COLUMNS = ["answer", "count", "share", "choices", "seeds"]


def vote(data: Choices, extract: "Extract | Extractor" = "last number") -> pd.DataFrame:
    """One row per distinct answer: answer, count, share of n, choices (indices) and seeds; most votes first.

    Answers that differ only in case, spacing, final punctuation or number spelling are one answer, shown as
    first seen. Ties keep the order in which the answers first appear; the NO_ANSWER row, when any choice has
    no answer, always comes last. attrs: "majority" (the first row's answer; None when no choice has an answer,
    so NO_ANSWER is never the majority), "agreement" (the majority's share of all n choices, 0.0 without one),
    "tied" (the answers sharing the top count), "n" and "extract" (the extractor's name).
    """
    table = answers(data, extract)
    groups = answer_groups(table)
    n = len(table)
    rows = [{"answer": NO_ANSWER if key is None else group["answer"], "count": len(group["choices"]),
             "share": len(group["choices"]) / n, "choices": group["choices"], "seeds": group["seeds"]}
            for key, group in groups]
    votes = pd.DataFrame(rows, columns=VOTE_COLUMNS)
    voted = [row for (key, _), row in zip(groups, rows) if key is not None]
    top = voted[0]["count"] if voted else 0
    votes.attrs.update(majority=voted[0]["answer"] if voted else None,
                       agreement=voted[0]["share"] if voted else 0.0,
                       tied=[row["answer"] for row in voted if row["count"] == top], n=n,
                       extract=table.attrs["extract"])
    return votes


def answer_groups(table: pd.DataFrame) -> list[tuple[str | None, dict]]:
    """An answers() table grouped by answer_key (None: no answer), most votes first, no answer last.

    Each group holds the answer as first seen and the choices' indices and seeds, in choice order.
    """
    groups: dict[str | None, dict] = {}
    for answer, index, seed in zip(table["answer"], table["index"].tolist(), table["seed"].tolist()):
        key = None if answer is None else answer_key(answer)
        group = groups.setdefault(key, {"answer": answer, "choices": [], "seeds": []})
        group["choices"].append(index)  # tolist(): Python ints, and None seeds for texts alone
        group["seeds"].append(seed)
    return sorted(groups.items(), key=lambda item: (item[0] is None, -len(item[1]["choices"])))  # stable: ties

