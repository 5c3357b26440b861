"""maj@k: the chance that a majority vote over k of the n choices, drawn without replacement, is right."""
from math import comb

import numpy as np
import pandas as pd

from nsample.analysis.answers import answers, normalize_expected
from nsample.analysis.extractors import Extract, Extractor
from nsample.analysis.inputs import Choices
from nsample.analysis.votes import answer_groups

METHODS = ("auto", "exact", "resample")
RESAMPLES = 2000  # draws of the resampling estimate, used only where the exact sum is too large
SEED = 0
EXACT_MAX_N = 1000  # counts of k-subsets of more choices overflow float64
EXACT_MAX_WORK = 200_000_000  # array cells updated by the exact sum before it gives way to resampling
TIES = "a tie between t answers for the most votes counts 1/t for each; choices without an answer do not vote"


def majority_at_k(data: Choices, extract: "Extract | Extractor" = "last number", reference: str | None = None, *,
                  method: str = "auto", resamples: int = RESAMPLES, seed: int = SEED) -> pd.DataFrame:
    """maj@k for k = 1..n: P(the majority answer of k choices drawn from the n equals the reference).

    The reference is compared after the extractor's normalisation ("forty-two" matches 42); without one it is
    the n-choice majority of vote(). The majority of k ignores choices without an answer (all-abstaining draws
    count 0), and a tie between t answers counts 1/t to each: the expected score of breaking ties at random.
    "exact" sums over the draws' vote counts per distinct answer (multivariate hypergeometric), polynomial in
    n; "resample" averages `resamples` random orders of the choices (seeded), each giving one draw per k.
    "auto" is exact unless that sum is too large. Columns k, majority_at_k; attrs: method, resamples, seed,
    reference (None: no answer to compare), reference_count, n, ties and extract.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    table = answers(data, extract)
    groups = answer_groups(table)
    n = len(table)
    if reference is None:
        ref_key, shown = next(((key, group["answer"]) for key, group in groups if key is not None), (None, None))
    else:
        ref_key, shown = normalize_expected(reference, extract), reference
    counts = {key: len(group["choices"]) for key, group in groups}
    ref_count = counts.get(ref_key, 0) if ref_key is not None else 0
    others = [count for key, count in counts.items() if key is not None and key != ref_key]
    if method == "auto":
        method = "exact" if n <= EXACT_MAX_N and exact_work(ref_count, others, n) <= EXACT_MAX_WORK else "resample"
    if method == "exact":
        probabilities = exact_majority_at_k(ref_count, others, n)
    else:
        probabilities = resampled_majority_at_k(ref_count, others, n, resamples, seed)
    frame = pd.DataFrame({"k": np.arange(1, n + 1), "majority_at_k": probabilities})
    frame.attrs.update(method=method, resamples=resamples if method == "resample" else None,
                       seed=seed if method == "resample" else None, reference=shown, reference_count=ref_count,
                       n=n, ties=TIES, extract=table.attrs["extract"])
    return frame


def exact_majority_at_k(ref_count: int, others: list[int], n: int) -> np.ndarray:
    """Exact maj@k for k = 1..n, given how many of the n choices give the reference and each other answer.

    For each r >= 1 reference votes drawn, the other answers that can reach r are tracked by (choices drawn
    from them, how many of them tie at r); rarer answers and non-answers cannot beat r, so their draws are
    counted in bulk by a binomial. Each draw's weight is its number of subsets, so dividing by C(n, k) at
    the end gives the probability.
    """
    wins = np.zeros(n + 1)  # by k: the number of k-subsets the reference wins, ties counted fractionally
    for r in range(1, ref_count + 1):
        rivals = [count for count in others if count >= r]
        table = np.zeros((n + 1, len(rivals) + 1))  # (drawn from rivals, rivals with exactly r votes)
        table[0, 0] = 1.0
        for count in rivals:
            grown = np.zeros_like(table)
            for x in range(r):
                grown[x:, :] += comb(count, x) * table[:n + 1 - x, :]
            grown[r:, 1:] += comb(count, r) * table[:n + 1 - r, :-1]
            table = grown
        shared = table @ (1.0 / np.arange(1, len(rivals) + 2))  # (n+1,): a tie with e rivals wins 1/(1+e)
        rest = n - ref_count - sum(rivals)
        spread = np.convolve(shared, [comb(rest, s) for s in range(rest + 1)])[:n + 1 - r]
        wins[r:r + len(spread)] += comb(ref_count, r) * spread
    subsets = np.array([comb(n, k) for k in range(1, n + 1)], dtype=np.float64)
    return np.clip(wins[1:] / subsets, 0.0, 1.0)


def exact_work(ref_count: int, others: list[int], n: int) -> int:
    """How many array cells exact_majority_at_k updates: its cost, to decide whether to resample instead."""
    work = 0
    for r in range(1, ref_count + 1):
        rivals = sum(1 for count in others if count >= r)
        work += rivals * (r + 1) * (n + 1) * (rivals + 1)
    return work


def resampled_majority_at_k(ref_count: int, others: list[int], n: int, resamples: int, seed: int) -> np.ndarray:
    """maj@k estimated from `resamples` seeded random orders of the choices; the first k of one is a k-draw."""
    labels = np.repeat(np.arange(-1, len(others) + 1), [n - ref_count - sum(others), ref_count, *others])
    rng = np.random.default_rng(seed)
    wins = np.zeros(n)
    for _ in range(resamples):
        votes = np.zeros(len(others) + 1, dtype=np.int64)  # 0: the reference, then the other answers
        best = tied = 0
        for k, label in enumerate(rng.permutation(labels)):
            if label >= 0:
                votes[label] += 1
                if votes[label] > best:
                    best, tied = votes[label], 1
                elif votes[label] == best:
                    tied += 1
            if best and votes[0] == best:
                wins[k] += 1.0 / tied
    return wins / resamples
