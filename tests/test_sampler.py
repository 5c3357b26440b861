"""The sampling functions on hand-made tensors."""
import torch

from nsample.engine import sampler


def test_penalties_follow_openai_and_hugging_face_semantics():
    logits = torch.tensor([[2.0, -2.0, 1.0, 0.5]])
    counts = torch.tensor([[2.0, 1.0, 0.0, 0.0]])
    out = sampler.apply_penalties(logits, counts, torch.tensor([0.5]), torch.tensor([0.25]), torch.tensor([2.0]))
    # token 0: 2/2 - 0.25*2 - 0.5; token 1: -2*2 - 0.25 - 0.5; unseen tokens unchanged
    assert torch.allclose(out, torch.tensor([[0.0, -4.75, 1.0, 0.5]]))


def test_top_k_top_p_min_p_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    def keep(x):
        return (x > float("-inf")).tolist()[0]

    assert keep(sampler.apply_top_k(logits, torch.tensor([2]))) == [True, True, False, False]
    assert keep(sampler.apply_top_k(logits, torch.tensor([0]))) == [True] * 4
    assert keep(sampler.apply_top_p(logits, torch.tensor([0.8]))) == [True, True, False, False]
    assert keep(sampler.apply_top_p(logits, torch.tensor([0.81]))) == [True, True, True, False]
    assert keep(sampler.apply_top_p(logits, torch.tensor([0.0]))) == [True, False, False, False]
    assert keep(sampler.apply_min_p(logits, torch.tensor([0.2]))) == [True, True, True, False]


def test_sampling_matches_the_distribution_and_masked_tokens_never_win():
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    logits = probs.log().expand(64, -1)
    counts = torch.zeros(4)
    seeds = torch.arange(64) * 1_000_003 - 2**62
    for position in range(300):  # 19,200 draws over seeds and positions
        tokens = sampler.sample(logits, torch.ones(64), seeds, torch.full((64,), position))
        counts += torch.bincount(tokens, minlength=4)
    freq = counts / counts.sum()
    assert counts[3] == 0 and torch.allclose(freq, probs, atol=0.01)


def test_race_noise_is_exponential_and_independent_across_tokens_positions_and_seeds():
    seeds, positions = torch.tensor([0, 1, -5, 2**63 - 1]), torch.tensor([0, 0, 3, 10**6])
    e = sampler.race_noise(seeds, positions, 100_000)  # (4, V)
    assert e.min() > 0 and abs(e.mean() - 1) < 0.01 and abs(e.var() - 1) < 0.02
    u = torch.exp(-e)  # back to uniforms: each decile holds a tenth
    assert ((torch.histc(u, bins=10, min=0, max=1) / u.numel() - 0.1).abs() < 0.003).all()
    flat = e - 1
    assert abs((flat[0] * flat[1]).mean()) < 0.02 and abs((flat[:, :-1] * flat[:, 1:]).mean()) < 0.02
    later = sampler.race_noise(seeds, positions + 1, 100_000)
    assert abs(((e - 1) * (later - 1)).mean()) < 0.02


def test_the_top_bits_draw_a_small_noise_not_zero():
    """(bits + 0.5) / 2^24 rounds to 1 in float32 for the top bits, and E = -log u to -0 (in one draw of about 300
    at a 49152-token vocabulary). Seed 740 at position 0 has them at token 19165."""
    seeds, positions = torch.tensor([740]), torch.tensor([0])
    assert sampler.race_bits(seeds, positions, 49152)[0, 19165] == 0xFFFFFF
    e = sampler.race_noise(seeds, positions, 49152)[0]
    assert e.min() == e[19165] == -torch.tensor(sampler.BELOW_ONE).log() > 0


def test_a_rows_draws_depend_only_on_its_seed_and_position():
    logits = torch.randn(3, 1000, generator=torch.Generator().manual_seed(0))
    alone = sampler.sample(logits[1:2], torch.ones(1), torch.tensor([7]), torch.tensor([4]))
    batch = sampler.sample(logits, torch.ones(3), torch.tensor([5, 7, 9]), torch.tensor([4, 4, 4]))
    assert batch[1] == alone[0]
    noise = sampler.race_noise(torch.tensor([5, 7, 9]), torch.tensor([4, 4, 4]), 1000)
    assert torch.equal(noise[1], sampler.race_noise(torch.tensor([7]), torch.tensor([4]), 1000)[0])


def test_greedy_rows_take_the_argmax():
    logits = torch.tensor([[0.1, 3.0, 0.2], [2.0, 0.0, 1.0]])
    out = sampler.sample(logits, torch.tensor([0.0, 1.0]), torch.tensor([0, 1]), torch.tensor([0, 0]))
    assert out[0] == 1


def test_top_logprobs_order_ties_as_greedy_breaks_them():
    torch.manual_seed(0)
    logits = torch.randn(64, 49152).to(torch.bfloat16).float()  # logits from a bfloat16 model: equal values are common
    logits[:4, [7, 40000, 123]] = 50.0  # a three-way tie at the top
    zeros = torch.zeros(64, dtype=torch.long)
    greedy = sampler.sample(logits, torch.zeros(64), zeros, zeros)
    chosen, top = sampler.token_logprobs(logits, greedy, 3)
    assert torch.equal(top.indices[:, 0], greedy)  # each greedy token leads its own top list
    assert top.indices[:4].tolist() == [[7, 123, 40000]] * 4
    assert torch.equal(top.values, logits.log_softmax(-1).gather(-1, top.indices))
    assert torch.equal(chosen, top.values[:, 0])
    assert (top.values[:, :-1] >= top.values[:, 1:]).all()
    _, _, prompt_top = sampler.prompt_token_logprobs(logits, greedy, 3)
    assert torch.equal(prompt_top.indices, top.indices)
