"""The sampling functions on hand-made tensors."""
import torch

from nsample import sampler


def test_penalties_follow_openai_and_hugging_face_semantics():
    logits = torch.tensor([[2.0, -2.0, 1.0, 0.5]])
    counts = torch.tensor([[2.0, 1.0, 0.0, 0.0]])
    out = sampler.apply_penalties(logits, counts, torch.tensor([0.5]), torch.tensor([0.25]), torch.tensor([2.0]))
    # token 0: 2/2 - 0.25*2 - 0.5; token 1: -2*2 - 0.25 - 0.5; unseen tokens unchanged
    assert torch.allclose(out, torch.tensor([[0.0, -4.75, 1.0, 0.5]]))


def test_top_k_top_p_min_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    keep = lambda x: (x > float("-inf")).tolist()[0]
    assert keep(sampler.apply_top_k(logits, torch.tensor([2]))) == [True, True, False, False]
    assert keep(sampler.apply_top_k(logits, torch.tensor([0]))) == [True] * 4
    assert keep(sampler.apply_top_p(logits, torch.tensor([0.8]))) == [True, True, False, False]
    assert keep(sampler.apply_top_p(logits, torch.tensor([0.81]))) == [True, True, True, False]
    assert keep(sampler.apply_top_p(logits, torch.tensor([0.0]))) == [True, False, False, False]
    assert keep(sampler.apply_min_p(logits, torch.tensor([0.2]))) == [True, True, True, False]


def test_sampling_matches_the_distribution_and_masked_tokens_never_win():
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    logits = probs.log().expand(4, -1)
    counts = torch.zeros(4)
    gens = [torch.Generator().manual_seed(s) for s in range(4)]
    for _ in range(5000):
        counts += torch.bincount(sampler.sample(logits, torch.ones(4), gens), minlength=4)
    freq = counts / counts.sum()
    assert counts[3] == 0 and torch.allclose(freq, probs, atol=0.02)


def test_a_rows_draws_depend_only_on_its_own_generator():
    logits = torch.randn(3, 1000, generator=torch.Generator().manual_seed(0))
    alone = [sampler.sample(logits[1:2], torch.ones(1), [torch.Generator().manual_seed(7)]) for _ in range(1)]
    batch = sampler.sample(logits, torch.ones(3), [torch.Generator().manual_seed(s) for s in (5, 7, 9)])
    assert batch[1] == alone[0][0]


def test_greedy_rows_take_the_argmax():
    logits = torch.tensor([[0.1, 3.0, 0.2], [2.0, 0.0, 1.0]])
    out = sampler.sample(logits, torch.tensor([0.0, 1.0]), [None, torch.Generator().manual_seed(0)])
    assert out[0] == 1
