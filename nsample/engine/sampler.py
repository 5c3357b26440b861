"""Sampling as small pure functions on tensors. R = rows in the batch, V = vocabulary size.

Order (as in vLLM): grammar mask -> penalties -> logit bias -> temperature -> top-k -> top-p -> min-p -> sample.
Sampling is the exponential race (argmax p / E with E ~ Exp(1) is an exact sample from p, the form of
Gumbel-max vLLM uses). The E are counter-based: a hash of (the row's seed, the token's position in
the row's output, the token id) - splitmix64 of (seed, position) gives the row's key, murmur3's fmix32
of key ^ hash(token) gives 24 uniform bits per token - so a row's tokens depend only on its seed, never
on n, its place in the batch or the other requests, and all rows draw theirs in a few vectorized
32-bit integer ops (per-row torch.Generator draws took 7-9 ms of a CPU step at n=8-16; these take 1-2,
and nsample's C++ kernels, where loaded, run the race in one pass a row: csrc/race.cpp).
Inverse-CDF sampling would need one draw instead of V, but its cumulative sum turns last-bit
differences between a batch of n and a batch of 1 into token flips far more often (seen in the
seed-contract test); the race flips only when the two best perturbed scores are within rounding.
"""
import functools
from typing import NamedTuple

import torch

from nsample.cpu import kernels


def apply_allowed(logits, allowed):
    # allowed (R, V) bool: the tokens each row's grammar allows (structured.py); the others can never be drawn
    return logits.masked_fill(~allowed, float("-inf"))


def apply_penalties(logits, counts, presence, frequency, repetition):
    # logits (R, V); counts (R, V) of each row's own generated tokens; presence/frequency/repetition (R,)
    seen = counts > 0
    rep = repetition[:, None].expand_as(logits)  # (R, V)
    logits = torch.where(seen & (logits > 0), logits / rep, logits)
    logits = torch.where(seen & (logits <= 0), logits * rep, logits)
    return logits - frequency[:, None] * counts - presence[:, None] * seen.float()


def apply_temperature(logits, temperature):
    # temperature (R,); greedy rows (0) are left alone and decided by argmax later
    t = torch.where(temperature > 0, temperature, torch.ones_like(temperature))
    return logits / t[:, None]


def apply_top_k(logits, top_k):
    # top_k (R,) long, 0 = off
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, logits.shape[-1])).clamp(max=logits.shape[-1])
    kth = logits.sort(dim=-1, descending=True).values.gather(-1, (k - 1)[:, None])  # (R, 1)
    return logits.masked_fill(logits < kth, float("-inf"))


def apply_top_p(logits, top_p):
    # top_p (R,); keeps the smallest set of tokens whose mass reaches top_p, always at least one
    sorted_logits, order = logits.sort(dim=-1, descending=True)  # (R, V)
    probs = sorted_logits.softmax(-1)
    mass_before = probs.cumsum(-1) - probs  # (R, V) mass of the better tokens
    drop_sorted = mass_before >= top_p[:, None]
    drop_sorted[:, 0] = False
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def apply_min_p(logits, min_p):
    # min_p (R,); drops tokens whose probability is below min_p times the best token's
    probs = logits.softmax(-1)
    return logits.masked_fill(probs < min_p[:, None] * probs.max(-1, keepdim=True).values, float("-inf"))


GOLDEN64 = -7046029254386353131  # splitmix64's increment 0x9e3779b97f4a7c15, as a signed int64
MIX64 = (-4658895280553007687, -7723592293110705685)  # its multipliers 0xbf58476d1ce4e5b9, 0x94d049bb133111eb
GOLDEN32 = -1640531527  # 0x9e3779b9
MIX32 = (-2048144789, -1028477387)  # murmur3's fmix32 multipliers 0x85ebca6b, 0xc2b2ae35
CHUNK = 2**18  # noise elements per pass: a few rows at a time stay in the CPU's cache (3-4x faster at 16 rows)


def _mix(x, rounds, bits: int):
    # a multiply-xorshift finalizer on signed ints, in place (products wrap; logical shifts as masked arithmetic)
    tmp = torch.empty_like(x)
    for shift, mul in rounds:
        x.bitwise_xor_(torch.bitwise_right_shift(x, shift, out=tmp).bitwise_and_((1 << bits - shift) - 1))
        if mul is not None:
            x.mul_(mul)
    return x


@functools.lru_cache(maxsize=8)
def _token_hashes(vocab: int, device: torch.device):
    # (V,) int32: fmix32 of token * golden, computed once per vocabulary and device
    h = (torch.arange(vocab, device=device) * GOLDEN32).to(torch.int32)
    return _mix(h, ((16, MIX32[0]), (13, MIX32[1]), (16, None)), 32)


def race_bits(seeds, positions, vocab: int):
    # seeds, positions (R,) int64 -> (R, V) int32: 24 uniform bits per token, a pure function of (seed, position, token)
    key = _mix(seeds * GOLDEN64 + positions, ((30, MIX64[0]), (27, MIX64[1]), (31, None)), 64)  # (R,) splitmix64
    key = (key & 0xFFFFFFFF).to(torch.int32)  # its low 32 bits (the cast wraps)
    h = _token_hashes(vocab, seeds.device)[None, :] ^ key[:, None]  # (R, V) int32
    h = _mix(h, ((16, MIX32[0]), (13, MIX32[1]), (16, None)), 32)
    return h.bitwise_right_shift_(8).bitwise_and_(0xFFFFFF)


BELOW_ONE = 1 - 2**-24  # the largest float32 below 1


def race_noise(seeds, positions, vocab: int):
    # seeds, positions (R,) int64 -> (R, V) float32 Exp(1) draws E = -log u, u = (bits + 0.5) / 2^24 in float32. The
    # top bits' u rounds to 1, and E to -0: that token (in one draw of about 300 at a 49152-token vocabulary) could
    # then never win (p / -0 = -inf), and where its probability was 0 (masked, or below float32's range) made the row
    # NaN: the torch ops drew it, the C++ race token 0. So u stops at the largest float32 below 1
    u = race_bits(seeds, positions, vocab).float().add_(0.5).mul_(2.0**-24).clamp_(max=BELOW_ONE)  # (R, V) in (0, 1)
    return u.log_().neg_()


def sample(logits, temperature, seeds, positions):
    # logits (R, V) after filtering; temperature, seeds, positions (R,) -> tokens (R,); greedy rows: argmax
    R, V = logits.shape
    greedy = temperature <= 0
    if bool(greedy.all()):
        return logits.argmax(-1)
    tokens = race(logits.softmax(-1), seeds, positions)
    return torch.where(greedy, logits.argmax(-1), tokens) if bool(greedy.any()) else tokens


def race(probs, seeds, positions):
    # probs (R, V); seeds, positions (R,) -> tokens (R,): argmax of probs / race_noise. On a CPU whose C++ kernels
    # this process has loaded, one pass a row (csrc/race.cpp, the same tokens); else torch ops, a few rows at a time
    R, V = probs.shape
    ops = kernels.loaded() if probs.device.type == "cpu" else None
    if ops is not None:
        return ops.race_sample(probs.contiguous(), seeds, positions, _token_hashes(V, probs.device))
    tokens, step = torch.empty(R, dtype=torch.long, device=probs.device), max(1, CHUNK // V)
    for rows in (slice(i, i + step) for i in range(0, R, step)):
        tokens[rows] = (probs[rows] / race_noise(seeds[rows], positions[rows], V)).argmax(-1)
    return tokens


class Top(NamedTuple):
    values: torch.Tensor  # (R, n) logprobs, best first
    indices: torch.Tensor  # (R, n) their token ids


def top_ids(logits, n: int):
    # logits (R, V) -> (R, n) the ids of the n largest, best first, equal values in the order argmax breaks them (the
    # lower id first), so that a greedy token leads its own top list: topk orders equal values arbitrarily (on a CPU
    # and on cuda), and bfloat16 logits tie often
    top = logits.topk(min(n + 1, logits.shape[-1]), dim=-1)  # (R, n + 1): one more, to see a tie at the edge
    ids = top.indices[:, :n].clone()
    tied = (top.values[:, 1:] == top.values[:, :-1]).any(-1)  # (R,)
    if bool(tied.any()):
        rows = tied.nonzero()[:, 0]
        ids[rows] = logits[rows].sort(dim=-1, descending=True, stable=True).indices[:, :n]
    return ids


def top_logprobs(logits, logp, n: int):
    # logits (R, V) and their log_softmax logp -> Top of n, ordered by the logits (log_softmax can round two of them
    # to one logprob, and argmax reads the logits), or None for n = 0
    if not n:
        return None
    ids = top_ids(logits, n)
    return Top(logp.gather(-1, ids), ids)


def token_logprobs(raw_logits, tokens, top_n: int):
    # raw_logits (R, V) straight from the model; tokens (R,) -> chosen (R,), Top (R, top_n) or None
    logits = raw_logits.float()
    logp = logits.log_softmax(-1)
    chosen = logp.gather(-1, tokens[:, None])[:, 0]
    return chosen, top_logprobs(logits, logp, top_n)


def prompt_token_logprobs(raw_logits, next_ids, top_n: int):
    # raw_logits (C, V) of C prompt positions; next_ids (C,) the prompt tokens they predict -> chosen (C,),
    # ranks (C,) (1 = the most likely token), top values/ids (C, top_n)
    logits = raw_logits.float()
    logp = logits.log_softmax(-1)
    chosen = logp.gather(-1, next_ids[:, None])[:, 0]
    ranks = (logp > chosen[:, None]).sum(-1) + 1
    return chosen, ranks, top_logprobs(logits, logp, top_n)


def sample_rows(logits, p, seeds, positions, counts=None, bias=None, allowed=None):
    # logits (R, V) of one request's rows; p its SamplingParams; seeds, positions (R,) int64; counts (R, V) of
    # generated tokens; allowed (R, V) bool of a grammar -> tokens (R,)
    R = logits.shape[0]
    full = lambda v: torch.full((R,), float(v), device=logits.device)  # noqa: E731
    if allowed is not None:
        logits = apply_allowed(logits, allowed)
    if counts is not None:
        logits = apply_penalties(logits, counts, full(p.presence_penalty), full(p.frequency_penalty),
                                 full(p.repetition_penalty))
    if bias is not None:
        logits = logits + bias
    temperature = full(p.temperature)
    if not p.greedy:
        if p.temperature != 1:  # logits / 1 are the logits, bitwise
            logits = apply_temperature(logits, temperature)
        if p.top_k:
            k = min(p.top_k, logits.shape[-1])  # above the vocabulary is off, however large (an int64 holds it)
            logits = apply_top_k(logits, torch.full((R,), k, device=logits.device))
        if p.top_p < 1:
            logits = apply_top_p(logits, full(p.top_p))
        if p.min_p > 0:
            logits = apply_min_p(logits, full(p.min_p))
    return sample(logits, temperature, seeds, positions)
