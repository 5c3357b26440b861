"""The fan-out loop, one step at a time: prefill once, fork the KV cache to n rows, decode the rows as one batch."""
import time

import torch

from nsample import sampler
from nsample.kv_cache import KVCache
from nsample.outputs import TokenLogprob
from nsample.request import Request
from nsample.sequence import Row


class DecodeState:
    """What one request needs between steps: its rows, their KV cache and their next-token logits."""

    def __init__(self, rows: list[Row], cache: KVCache, logits: torch.Tensor, vocab: int, width: int | None):
        self.rows, self.cache, self.logits = rows, cache, logits  # logits (R, V)
        self.fixed = width is not None  # fixed width: finished rows stay in the cache as padding
        self.slots = list(range(len(rows)))  # the cache row of each live row
        self.width = -(-len(rows) // width) * width if self.fixed else len(rows)
        self.counts = torch.zeros(len(rows), vocab, device=logits.device) if _penalized(rows) else None
        self.bias = None
        if rows[0].params.logit_bias:
            ids, vals = zip(*rows[0].params.logit_bias.items())
            self.bias = torch.zeros(vocab, device=logits.device).index_put_(
                (torch.tensor(ids, device=logits.device),), torch.tensor(vals, device=logits.device))


def _penalized(rows: list[Row]) -> bool:
    p = rows[0].params
    return p.presence_penalty != 0 or p.frequency_penalty != 0 or p.repetition_penalty != 1


@torch.inference_mode()
def prefill(engine, req: Request) -> None:
    """Run the prompt once at batch 1, then fork its cache into one row per distinct choice."""
    t0 = time.perf_counter()
    req.timings.queued_s = t0 - req.submitted
    p = req.params
    groups = [list(range(p.n))] if p.greedy else [[i] for i in range(p.n)]  # greedy: one row serves all n
    rows = [Row(g, [req.seeds[i] for i in g], req.prompt_ids, p, engine.tokenizer, req.max_new, engine.eos_ids,
                engine.device) for g in groups]
    ids = torch.tensor([req.prompt_ids], device=engine.device)  # (1, P)
    cache = KVCache(engine.model, len(req.prompt_ids), req.max_new, engine.shared_prefix)
    logits = cache.prefill(ids).float()  # (1, V)
    req.state = DecodeState(rows, cache, logits.expand(len(rows), -1), engine.vocab_size, engine.config.decode_width)
    cache.fork(req.state.width)
    req.timings.prefill_s = time.perf_counter() - t0


@torch.inference_mode()
def step(engine, req: Request) -> None:
    """Sample one token for every live row, publish it, drop finished rows, and run the next forward."""
    t0 = time.perf_counter()
    st, p = req.state, req.params
    R = len(st.rows)
    # 1) process the logits row-wise and sample a token column
    logits = st.logits  # (R, V)
    if st.counts is not None:
        logits = sampler.apply_penalties(logits, st.counts, _full(R, p.presence_penalty, logits),
                                         _full(R, p.frequency_penalty, logits), _full(R, p.repetition_penalty, logits))
    if st.bias is not None:
        logits = logits + st.bias
    temperature = _full(R, p.temperature, logits)
    if not p.greedy:
        logits = sampler.apply_temperature(logits, temperature)
        if p.top_k:
            logits = sampler.apply_top_k(logits, torch.full((R,), p.top_k, device=logits.device))
        if p.top_p < 1:
            logits = sampler.apply_top_p(logits, _full(R, p.top_p, logits))
        if p.min_p > 0:
            logits = sampler.apply_min_p(logits, _full(R, p.min_p, logits))
    tokens = sampler.sample(logits, temperature, [r.generator for r in st.rows])  # (R,)
    lps = _logprobs(engine, st.logits, tokens, p) if p.logprobs else [None] * R
    # 2) hand each row its token: detokenize, check stops, publish the deltas
    events = []
    for row, tok, lp in zip(st.rows, tokens.tolist(), lps):
        events += row.append(tok, lp)
        if row.finished:
            for i in row.indices:
                req.choices[i].stop_reason = row.stop_reason
    req.publish(events)
    if st.counts is not None:
        st.counts.scatter_add_(1, tokens[:, None], torch.ones(R, 1, device=tokens.device))
    # 3) drop finished rows from the batch, and from the cache unless the width is fixed
    live = [i for i, r in enumerate(st.rows) if not r.finished]
    if len(live) < R:
        st.rows, tokens = [st.rows[i] for i in live], tokens[live]
        st.counts = st.counts[live] if st.counts is not None else None
        if st.fixed:
            st.slots = [st.slots[i] for i in live]
        elif live:
            st.cache.keep(live)
            st.slots, st.width = list(range(len(live))), len(live)
    # 4) forward the token column of the live rows (padded to the fixed width with token 0)
    if st.rows:
        slots = torch.tensor(st.slots, device=tokens.device)
        column = torch.zeros(st.width, dtype=tokens.dtype, device=tokens.device).index_copy_(0, slots, tokens)
        st.logits = st.cache.decode(column, len(st.rows[0].token_ids)).float()[slots]  # (R_live, V)
    req.timings.decode_s += time.perf_counter() - t0


def _full(rows: int, value: float, like: torch.Tensor) -> torch.Tensor:
    return torch.full((rows,), float(value), device=like.device)


def _logprobs(engine, raw_logits, tokens, p) -> list[TokenLogprob]:
    chosen, top = sampler.token_logprobs(raw_logits, tokens, p.top_logprobs)
    text = engine.token_text
    out = []
    for r, (tok, lp) in enumerate(zip(tokens.tolist(), chosen.tolist())):
        alts = [] if top is None else [(i, text(i), v) for v, i in zip(top.values[r].tolist(), top.indices[r].tolist())]
        out.append(TokenLogprob(tok, text(tok), lp, alts))
    return out
