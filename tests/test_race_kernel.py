"""The sampler's race in C++ (csrc/race.cpp) against sampler.py's torch ops: the same tokens, row by row."""
import pytest
import torch

from nsample.cpu import kernels
from nsample.engine import sampler


@pytest.fixture(scope="module")
def ops(kernel_ops):
    return kernel_ops


def torch_race(probs, seeds, positions):
    """sampler.race's torch path, whatever this process has loaded."""
    return probs.div(sampler.race_noise(seeds, positions, probs.shape[1])).argmax(-1)


def draw(ops, probs, seeds, positions):
    return ops.race_sample(probs, seeds, positions, sampler._token_hashes(probs.shape[1], probs.device))


@pytest.mark.parametrize("V", [1, 7, 1003, 49152])  # a vocabulary of less than a vector, and ends mid-vector
def test_the_kernel_draws_the_tokens_of_the_torch_ops(ops, V):
    g = torch.Generator().manual_seed(V)
    rows = 300 if V < 49152 else 40
    probs = (torch.randn(rows, V, generator=g) * 3).softmax(-1)
    seeds = torch.randint(-2**63, 2**63 - 1, (rows,), generator=g)
    positions = torch.randint(0, 10**6, (rows,), generator=g)
    got = draw(ops, probs, seeds, positions)
    assert got.dtype == torch.long and torch.equal(got, torch_race(probs, seeds, positions))
    if V > 1:
        assert len(set(got.tolist())) > 1  # rows differ: the draws are not all one token


@pytest.mark.parametrize("spread", [0.0, 0.3, 30.0])  # flat, nearly flat, one token nearly certain
def test_the_tokens_the_kernel_skips_could_not_have_won(ops, spread):
    """The kernel skips the log and division of the vectors where p / (1 - u) cannot beat any lane's best: the
    torch ops' tokens however the probability is spread."""
    g = torch.Generator().manual_seed(5)
    probs = (torch.randn(64, 49152, generator=g) * spread).softmax(-1)
    seeds, positions = torch.randint(0, 2**62, (64,), generator=g), torch.arange(64)
    got = draw(ops, probs, seeds, positions)
    assert torch.equal(got, torch_race(probs, seeds, positions))
    assert len(set(got.tolist())) > (1 if spread > 10 else 32)


@pytest.mark.parametrize(("p", "drawn"), [(0.0, False), (1e-12, False), (1e-3, True)])
def test_the_token_with_the_smallest_noise_wins_by_its_probability(ops, p, drawn):
    """Seed 740 at position 0 draws the top 24 bits for token 19165 (test_sampler): its E is the smallest there is,
    and positive. It was -0: at probability 0 (masked) the row was NaN, which torch drew and the kernel answered with
    token 0; at any other, p / -0 = -inf never won. Now it wins where p / E beats the others (10^-3 / 6·10^-8,
    against 2·10^-5 over their smallest E, 3.5·10^-5) and not at 0 or 10^-12, on both paths alike."""
    probs = torch.full((1, 49152), 1 / 49151)
    probs[0, 19165] = p
    seeds, positions = torch.tensor([740]), torch.tensor([0])
    got = draw(ops, probs, seeds, positions)
    assert (got[0] == 19165) == drawn and torch.equal(got, torch_race(probs, seeds, positions))


def test_each_row_draws_alone_what_it_draws_among_others(ops):
    g = torch.Generator().manual_seed(1)
    probs = torch.randn(9, 5000, generator=g).softmax(-1)
    seeds, positions = torch.arange(9) * 7919 - 40, torch.arange(9) % 4
    together = draw(ops, probs, seeds, positions)
    for r in range(9):
        assert draw(ops, probs[r:r + 1].contiguous(), seeds[r:r + 1], positions[r:r + 1])[0] == together[r]


def test_the_kernel_follows_the_distribution_and_never_draws_a_masked_token(ops):
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0]).expand(64, -1).contiguous()
    seeds, counts = torch.arange(64) * 1_000_003 - 2**62, torch.zeros(4)
    for position in range(300):  # 19,200 draws over seeds and positions
        counts += torch.bincount(draw(ops, probs, seeds, torch.full((64,), position)), minlength=4)
    assert counts[3] == 0 and torch.allclose(counts / counts.sum(), probs[0], atol=0.01)


def test_a_row_with_nan_takes_its_first_nan_as_torch_argmax_does(ops):
    probs = torch.full((2, 40), 1 / 40)
    probs[1, 17] = probs[1, 30] = float("nan")
    seeds, positions = torch.tensor([3, 4]), torch.tensor([0, 0])
    got = draw(ops, probs, seeds, positions)
    assert got[1] == 17 and torch.equal(got, torch_race(probs, seeds, positions))


def test_the_sampler_takes_the_kernel_once_loaded_and_never_builds_one(ops, monkeypatch):
    probs = torch.randn(4, 1003, generator=torch.Generator().manual_seed(2)).softmax(-1)
    seeds, positions = torch.tensor([1, 2, 3, 4]), torch.tensor([5, 5, 5, 5])
    assert kernels.loaded() is ops
    assert torch.equal(sampler.race(probs, seeds, positions), draw(ops, probs, seeds, positions))
    other = "neon" if kernels.isa() != "neon" else "avx2"  # a set this process has not loaded: torch ops instead
    monkeypatch.setenv("NSAMPLE_ISA", other)
    assert kernels.loaded() is None
    assert torch.equal(sampler.race(probs, seeds, positions), torch_race(probs, seeds, positions))
    assert other not in kernels._built
