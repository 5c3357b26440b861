"""sweep() runs the full grid on the tiny engine and returns one row per choice with its parameters."""
import pytest

from nsample.analysis import sweep, sweep_summary
from nsample.errors import InvalidRequest

PROMPT = "Name a colour."
FIXED = {"max_tokens": 4, "similarity": "edit", "progress": False}


@pytest.fixture(scope="module")
def grid(tiny_engine):
    return sweep(tiny_engine, PROMPT, n=3, temperature=[0.5, 1.0], top_p=[0.8, 1.0], seed=11, **FIXED)


def test_sweep_returns_every_grid_point_with_its_parameters(grid):
    assert len(grid) == 2 * 2 * 3
    points = grid[["run", "temperature", "top_p"]].drop_duplicates().values.tolist()
    assert points == [[0, 0.5, 0.8], [1, 0.5, 1.0], [2, 1.0, 0.8], [3, 1.0, 1.0]]
    for _, rows in grid.groupby("run"):
        assert rows["index"].tolist() == [0, 1, 2]
        assert rows["seed"].tolist() == [11, 12, 13]  # the same seeds at every grid point


def test_sweep_rows_carry_quality_and_their_runs_diversity(grid):
    assert grid["mean_logprob"].notna().all()  # logprobs are on by default in a sweep
    assert (grid["completion_tokens"] <= 4).all()
    assert grid.groupby("run")["vendi_score"].nunique().eq(1).all()
    assert grid["vendi_score"].between(1, 3).all()
    assert (grid["similarity"] == "normalized edit similarity").all()


def test_each_row_reproduces_from_its_seed_and_parameters(grid, tiny_engine):
    row = grid[(grid["run"] == 2) & (grid["index"] == 1)].iloc[0]
    again = tiny_engine.generate(PROMPT, n=1, seed=int(row["seed"]), temperature=row["temperature"],
                                 top_p=row["top_p"], max_tokens=4)
    assert again.choices[0].text == row["text"]


def test_sweep_summary_has_one_row_per_grid_point(grid):
    runs = sweep_summary(grid)
    assert len(runs) == 4 and runs["n"].tolist() == [3] * 4
    first = grid[grid["run"] == 0]
    assert runs.loc[0, "mean_logprob"] == pytest.approx(first["mean_logprob"].mean())
    with pytest.raises(ValueError, match="not a sweep"):
        sweep_summary(grid.drop(columns=["vendi_score"]))


def test_scalars_make_a_one_point_grid_and_progress_callbacks_count_runs(tiny_engine):
    calls = []
    frame = sweep(tiny_engine, PROMPT, n=2, temperature=0.7, seed=3, max_tokens=2, similarity="edit",
                  progress=lambda done, total: calls.append((done, total)))
    assert len(frame) == 2 and frame["top_p"].tolist() == [1.0, 1.0]
    assert calls == [(0, 1), (1, 1)]


class CountingEngine:
    def __init__(self):
        self.calls = 0

    def generate(self, *args, **kwargs):
        self.calls += 1
        raise AssertionError("should not generate")


def test_bad_grids_fail_before_generating_anything():
    engine = CountingEngine()
    with pytest.raises(InvalidRequest, match="temperature"):
        sweep(engine, PROMPT, temperature=[0.5, 3.0], **FIXED)
    with pytest.raises(ValueError, match="at least one top_p"):
        sweep(engine, PROMPT, top_p=[], **FIXED)
    assert engine.calls == 0
