"""pass@k against the estimator computed by hand, at the edges c = 0 and c = n, and from a run_checks table."""
from math import comb

import numpy as np
import pytest

from nsample.analysis import Matches, pass_at_k, pass_at_k_estimate, run_checks


def by_hand(n: int, c: int, k: int) -> float:
    return 1 - comb(n - c, k) / comb(n, k)


def test_the_estimator_by_hand_for_small_n_and_c():
    # n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass@3 = 1 - 1/10; pass@4 = 1
    assert [pass_at_k_estimate(5, 2, k) for k in range(1, 6)] == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0])
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k_estimate(n, c, k) == pytest.approx(by_hand(n, c, k))


def test_no_passes_and_all_passes():
    assert pass_at_k(["a", "b", "c"], Matches("z"))["pass_at_k"].tolist() == [0.0, 0.0, 0.0]
    assert pass_at_k(["z", "z", "z"], Matches("z"))["pass_at_k"].tolist() == [1.0, 1.0, 1.0]


def test_the_estimate_is_stable_for_large_n():
    assert pass_at_k_estimate(200, 1, 1) == pytest.approx(1 / 200)
    assert pass_at_k_estimate(1000, 3, 500) == pytest.approx(by_hand(1000, 3, 500))


def test_pass_at_k_frame_attrs_and_errors_count_as_not_passing():
    def check(text):
        if text == "err":
            raise RuntimeError("broken")
        return text == "ok"

    frame = pass_at_k(["ok", "no", "err", "ok"], check)
    assert frame.columns.tolist() == ["k", "pass_at_k"]
    assert frame["k"].tolist() == [1, 2, 3, 4]
    assert np.allclose(frame["pass_at_k"], [by_hand(4, 2, k) for k in range(1, 5)])
    assert frame.attrs == {"n": 4, "c": 2, "errors": 1, "check": "check", "results": ["pass", "fail", "error", "pass"]}


def test_given_ks_and_a_k_above_n():
    assert pass_at_k(["a", "b", "a"], Matches("a"), ks=[1, 3])["pass_at_k"].tolist() == pytest.approx([2 / 3, 1.0])
    with pytest.raises(ValueError, match="k=4"):
        pass_at_k(["a", "b", "a"], Matches("a"), ks=[4])
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k_estimate(3, 1, 0)


def test_a_run_checks_table_gives_pass_at_k_without_checking_again():
    checked = run_checks(["a", "b", "a", "c"], Matches("a"))
    frame = pass_at_k(checked)
    assert frame["pass_at_k"][0] == pytest.approx(0.5)
    assert frame.attrs["check"] == "matches 'a'"
    with pytest.raises(ValueError, match="needs a check"):
        pass_at_k(["a"])
    with pytest.raises(ValueError, match="'result' column"):
        pass_at_k(checked.drop(columns="result"))
