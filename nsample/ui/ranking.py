"""The order and marks of the cards: by index, mean token logprob (best-of), length, or the most diverse k.
Scores and picks come from nsample.analysis (rank_choices, most_diverse); here they become an order and notes."""
from dataclasses import dataclass, field

from nsample import analysis
from nsample.ui.run import Run

SORTS = {"index": "index", "logprob": "mean logprob (best first)", "length": "length (longest first)",
         "diverse": "most diverse k"}
RANKED_BY = {"logprob": "mean_logprob", "length": "completion_tokens"}


@dataclass
class Ranking:
    order: list[int]  # choice indices, first shown first
    marks: dict[int, str] = field(default_factory=dict)  # a badge per marked choice
    note: str = ""  # why a sort did not apply, or what the marks mean


def rank(run: Run, by: str = "index", k: int = 2) -> Ranking:
    """The cards of `run` ordered `by` one of SORTS; the most diverse k are marked and shown first."""
    indices = [c.index for c in run.cards]
    if by not in SORTS:
        raise ValueError(f"unknown sort {by!r}; choose one of {', '.join(SORTS)}")
    if by == "index" or len(indices) < 2:
        return Ranking(indices)
    if by == "logprob" and not run.has_logprobs:
        return Ranking(indices, note=logprob_note(run))
    frame = run.to_dataframe()
    if by == "diverse":
        k = max(1, min(int(k), len(indices)))
        similarity = getattr(run.report, "similarity", None)
        picks = analysis.most_diverse(frame, k, similarity="auto" if similarity is None else similarity)
        chosen = [int(i) for i in picks["index"]]
        marks = {i: f"diverse pick {p + 1}/{k}" for p, i in enumerate(chosen)}
        return Ranking(chosen + [i for i in indices if i not in chosen], marks,
                       f"The {k} choices that differ most ({picks.attrs['similarity']}) are marked and shown first.")
    ranked = analysis.rank_choices(frame, RANKED_BY[by])
    order = [int(i) for i in ranked["index"]]
    marks = {i: f"rank {r + 1}" for r, i in enumerate(order)}
    if by == "logprob":
        marks[order[0]] = "best of n"
    return Ranking(order, marks)


def logprob_note(run: Run) -> str:
    """Why this run has no logprob features: not asked for, or asked for and the upstream sent none."""
    if not run.spec.logprobs:
        return "Tick **logprobs** before Generate to rank by mean token logprob and shade tokens by probability."
    if not run.ids_reported:
        return ("The upstream server sent no logprobs: ranking by mean logprob and token shading are off "
                "for this run.")
    return "No choice has tokens yet, so there are no logprobs to rank by."


def order_css(ranking: Ranking | None) -> str:
    """A style element that moves the card columns into the ranking's order (the cards keep their buttons)."""
    if ranking is None:
        return ""
    rules = " ".join(f"#ns-col-{i} {{ order: {position}; }}" for position, i in enumerate(ranking.order))
    return f"<style>{rules}</style>"
