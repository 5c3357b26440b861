"""The Sweep tab's work: nsample.analysis.sweep over the page's prompt, progress, stopping, and bad grids."""
import pytest

from nsample.errors import InvalidRequest
from nsample.ui.run import RunSpec
from nsample.ui.sweep import MAX_POINTS, SweepStopped, parse_values, run_sweep

SPEC = RunSpec(mode="chat", user="Name a fruit.", n=3, seed=4, max_tokens=8)


def test_sweep_reports_progress_and_the_notebook_figures(tiny_engine):
    calls = []
    view = run_sweep(tiny_engine, SPEC, [0.5, 1.5], [1.0], progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 2), (1, 2), (2, 2)]
    assert view.summary["temperature"].tolist() == [0.5, 1.5] and (view.summary["vendi_score"] >= 1).all()
    assert len(view.frame) == 2 * 3 and set(view.frame["seed"]) == {4, 5, 6}  # the same seeds at every point
    assert [t.name for t in view.diversity_figure.data] == ["top_p=1"]
    assert list(view.diversity_figure.data[0].x) == [0.5, 1.5]
    assert view.quality_figure is not None and view.quality_figure.data[0].x is not None and view.note == ""


def test_stopping_between_points(tiny_engine):
    def stop_after_first(done, total):
        if done == 1:
            raise SweepStopped

    with pytest.raises(SweepStopped):
        run_sweep(tiny_engine, SPEC, [0.5, 1.0, 1.5], [1.0], progress=stop_after_first)


def test_bad_grids_are_invalid_requests(tiny_engine):
    assert parse_values("0.3, 0.7 1", "temperature", 0, 2) == [0.3, 0.7, 1.0]
    for text in ("", "hot", "0.5, 3"):
        with pytest.raises(InvalidRequest):
            parse_values(text, "temperature", 0, 2)
    with pytest.raises(InvalidRequest):
        run_sweep(tiny_engine, SPEC, [0.1 * i for i in range(MAX_POINTS + 1)], [1.0])
