"""pass@k: the unbiased estimate (Chen et al. 2021) that at least one of k choices drawn from the n passes."""
from collections.abc import Iterable
from numbers import Integral

import numpy as np
import pandas as pd

from nsample.analysis.checks import results_of, run_checks
from nsample.analysis.inputs import Choices


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k), as the stable product 1 - prod_{i=n-c+1}^{n} (1 - k/i) (HumanEval's form)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k(data: Choices | pd.DataFrame, check=None, ks: Iterable[int] | None = None) -> pd.DataFrame:
    """pass@k for k = 1..n (or the given ks): columns k, pass_at_k.

    `data` is checked with run_checks(data, check); with check=None it must already be a run_checks() table,
    so a slow check (a CodeCheck) runs once for both the per-choice chips and the curve. An "error" choice
    counts as not passing. attrs: n, c (passes), errors, check (its name), and results, the per-choice
    "pass" / "fail" / "error" in choice order (run_checks gives the full table with details).
    """
    if check is None and not isinstance(data, pd.DataFrame):
        raise ValueError("pass_at_k needs a check, or a run_checks() table as data")
    checked = run_checks(data, check) if check is not None else data
    results = results_of(checked)
    n, c = len(results), results.count("pass")
    ks = list(range(1, n + 1)) if ks is None else _valid_ks(ks, n)
    frame = pd.DataFrame({"k": ks, "pass_at_k": [pass_at_k_estimate(n, c, k) for k in ks]})
    frame.attrs.update(n=n, c=c, errors=results.count("error"), check=checked.attrs.get("check"), results=results)
    return frame


def _valid_ks(ks: Iterable[int], n: int) -> list[int]:
    ks = list(ks)
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, Integral):
            raise TypeError(f"each k must be an integer, got {k!r}")
        if not 1 <= k <= n:
            raise ValueError(f"pass@k needs 1 <= k <= n = {n}, got k={k}")
    return [int(k) for k in ks]
