"""Near-duplicate groups of free-text choices, by similarity, each with a representative (medoid) and a size."""
import numpy as np
import pandas as pd

from nsample.analysis.inputs import Choices, choices_frame
from nsample.analysis.similarity import check_similarity, resolve_method, similarity_label, similarity_matrix

THRESHOLDS = {"embedding": 0.85, "edit": 0.8, "jaccard": 0.6}
"""Default similarity at or above which two choices count as saying the same, per measure."""
GROUP_COLUMNS = ["group", "size", "share", "representative", "seed", "text", "choices", "seeds", "cohesion"]


def group_similar(data: Choices, threshold: float | None = None, method: str = "auto") -> pd.DataFrame:
    """Choices grouped with their near-duplicates: one row per group, largest first (ties: first seen).

    Every two members of a group are at least `threshold` similar, so similarity does not chain across a group:
    the ungrouped choice with the most ungrouped neighbours founds the next group, and its neighbours join,
    most similar first, if close to every member so far. The representative is the group's medoid, the member
    most similar on average to the others. Columns: group, size, share of n, representative
    (its choice index), seed and text (the representative's), choices and seeds (all members, in order),
    cohesion (mean pairwise similarity within the group, 1.0 for one choice). attrs: similarity (the
    measure used), similarity_label (in words, saying when 'auto' fell back to edit similarity), threshold.
    """
    frame = choices_frame(data)
    resolved = resolve_method(method)
    threshold = THRESHOLDS[resolved] if threshold is None else float(threshold)
    labelled = similarity_matrix(frame, resolved)
    matrix = check_similarity(labelled)
    indices, seeds, texts = frame["index"].tolist(), frame["seed"].tolist(), frame["text"].fillna("").tolist()
    rows = []
    for members in sorted(close_groups(matrix, threshold), key=lambda group: (-len(group), group[0])):
        centre = medoid(matrix, members)
        rows.append({"size": len(members), "share": len(members) / len(frame), "representative": indices[centre],
                     "seed": seeds[centre], "text": texts[centre], "choices": [indices[i] for i in members],
                     "seeds": [seeds[i] for i in members], "cohesion": cohesion(matrix, members)})
    table = pd.DataFrame(rows).assign(group=range(len(rows)))[GROUP_COLUMNS]
    table.attrs.update(similarity=resolved, similarity_label=similarity_label(method), threshold=threshold)
    return table


def close_groups(matrix: np.ndarray, threshold: float) -> list[list[int]]:
    """Positions in groups whose every pair is at least `threshold` similar, founded most-connected first.

    The founder is the ungrouped choice with the most ungrouped neighbours (ties: the earliest); its neighbours
    join, most similar to it first, each only if it is close to every member so far.
    """
    close = matrix >= threshold
    ungrouped = np.ones(len(matrix), dtype=bool)
    groups = []
    while ungrouped.any():
        neighbours = (close & ungrouped[None, :]).sum(axis=1)
        neighbours[~ungrouped] = -1
        founder = int(np.argmax(neighbours))
        members = [founder]
        candidates = [i for i in np.flatnonzero(close[founder] & ungrouped).tolist() if i != founder]
        for candidate in sorted(candidates, key=lambda i: -matrix[founder, i]):  # stable: ties by choice order
            if close[candidate, members].all():
                members.append(candidate)
        members.sort()
        groups.append(members)
        ungrouped[members] = False
    return groups


def medoid(matrix: np.ndarray, members: list[int]) -> int:
    """The member with the highest total similarity to the group (ties: the earliest)."""
    block = matrix[np.ix_(members, members)]
    return members[int(np.argmax(block.sum(axis=1)))]


def cohesion(matrix: np.ndarray, members: list[int]) -> float:
    """Mean similarity over the group's distinct pairs; 1.0 for a group of one."""
    if len(members) < 2:
        return 1.0
    block = matrix[np.ix_(members, members)]
    return float((block.sum() - np.trace(block)) / (len(members) * (len(members) - 1)))
