"""What the runner keeps for one running request: its rows, their KV cache, their next-token logits.

A request's prompt is prefilled once (in chunks), then forked into one row per distinct choice (greedy:
one row serves all n). Each step it samples a token column from its logits, hands each row its token,
drops finished rows, and offers the column of its live rows to the next decode forward.
"""
import time

import torch

from nsample.cpu import gguf_linear
from nsample.engine import sampler
from nsample.engine.engine_base import choice_groups
from nsample.engine.kv_cache import ForkedKV, SharedKV
from nsample.engine.sequence import Row
from nsample.models.token_bytes import token_text
from nsample.outputs import StreamEvent, TokenLogprob
from nsample.request import Request


class RequestState:
    def __init__(self, req: Request, model, tokenizer, eos_ids: set[int], vocab: int, shared: bool,
                 width: int | None, grammars=None):
        p, device = req.params, model.device
        self.req, self.device = req, device
        self.rows = [Row(g, [req.seeds[i] for i in g], req.prompt_ids, p, tokenizer, req.max_new, eos_ids)
                     for g in choice_groups(p)]
        self.seeds = torch.tensor([r.seeds[0] for r in self.rows], device=device)  # (R,) int64: each row's noise
        self.kv = (SharedKV if shared else ForkedKV)(model, len(req.prompt_ids), req.max_new)
        self.prefilled = 0  # prompt tokens prefilled so far
        self.prompt_lps: list[TokenLogprob | None] | None = None if p.prompt_logprobs is None else [None]
        self.logits: torch.Tensor | None = None  # (R, V) next-token logits of the live rows, once prefilled
        self.fixed = width is not None  # fixed width: finished rows stay in the cache as padding
        self.width = -(-len(self.rows) // width) * width if self.fixed else len(self.rows)
        self.slots = list(range(len(self.rows)))  # the cache row of each live row
        self.column: torch.Tensor | None = None  # (width,) the tokens to forward next, padded with 0
        self.counts = torch.zeros(len(self.rows), vocab, device=device) if _penalized(p) else None
        self.grammar = grammars.matchers(p, len(self.rows)) if grammars is not None else None  # RowMatchers
        self.bias = None
        if p.logit_bias:
            ids, vals = zip(*p.logit_bias.items())
            self.bias = torch.zeros(vocab, device=device).index_put_((torch.tensor(ids, device=device),),
                                                                     torch.tensor(vals, device=device))

    @property
    def generated(self) -> int:
        """Tokens each live row has generated (all live rows of a request advance together)."""
        return len(self.rows[0].token_ids)

    def next_chunk(self, budget: int) -> list[int]:
        """The next at most `budget` prompt tokens to prefill."""
        return self.req.prompt_ids[self.prefilled:self.prefilled + budget]

    @property
    def all_logits(self) -> bool:
        """Whether its prefill keeps every prompt position's logits (for prompt logprobs), not only the last."""
        return self.prompt_lps is not None

    def prefill(self, budget: int, token_bytes) -> int:
        """Forked caches: prefill up to `budget` more prompt tokens in a forward of its own. Returns tokens run."""
        t0, ids = time.perf_counter(), self.next_chunk(budget)
        with gguf_linear.head_rows_decoded(0 if self.all_logits else 1):  # as a packed prefill's (model_runner.py)
            logits = self.kv.prefill(torch.tensor([ids], device=self.device), self.all_logits)  # (C or 1, V)
        self.take_prefill(len(ids), logits, time.perf_counter() - t0, token_bytes)
        return len(ids)

    def take_prefill(self, tokens: int, logits: torch.Tensor, seconds: float, token_bytes) -> None:
        """`tokens` more prompt tokens were prefilled, with each one's logits (tokens, V) if all_logits, else the
        last one's (1, V); fork once all are."""
        if self.prompt_lps is not None:
            self._score_prompt(logits, token_bytes)
        self.prefilled += tokens
        if self.prefilled == len(self.req.prompt_ids):
            self.kv.fork(self.width)
            self.logits = logits[-1:].float().expand(len(self.rows), -1)
            self.req.prompt_logprobs = self.prompt_lps
        self.req.timings.prefill_s += seconds

    def _score_prompt(self, logits: torch.Tensor, token_bytes) -> None:
        """The logprobs of the prompt tokens this chunk's positions (C, V) predict: each position the next token."""
        ids = self.req.prompt_ids[self.prefilled + 1:self.prefilled + 1 + len(logits)]  # the last: none in a prompt
        if not ids:
            return
        k = self.req.params.prompt_logprobs
        chosen, ranks, top = sampler.prompt_token_logprobs(logits[:len(ids)], torch.tensor(ids, device=self.device),
                                                           k)
        for j, (tok, lp, rank) in enumerate(zip(ids, chosen.tolist(), ranks.tolist())):
            alts = ([], []) if top is None else (top.indices[j].tolist(), top.values[j].tolist())
            self.prompt_lps.append(logprob_entry(tok, lp, *alts, token_bytes, rank=rank))

    @property
    def draw_key(self) -> tuple | None:
        """What its rows' draw depends on besides their logits, seeds and positions, where that is its sampling
        parameters only (requests with equal keys may draw in one call, `draw_together`); None where it has
        tensors of its own (penalty counts, logit bias, a grammar) or draws nothing."""
        p = self.req.params
        if self.counts is not None or self.bias is not None or self.grammar is not None or self.req.max_new == 0:
            return None
        return p.temperature, p.top_k, p.top_p, p.min_p

    @property
    def positions(self) -> torch.Tensor:
        """(R,) the index in each live row's output of the token drawn now."""
        return torch.full((len(self.rows),), self.generated, device=self.device)

    def sample(self, token_bytes, tokens: torch.Tensor | None = None) -> list[StreamEvent]:
        """Sample one token per live row (or take `tokens` (R,), drawn with other requests' rows), hand it over,
        drop finished rows; set the next column."""
        p, R = self.req.params, len(self.rows)
        if self.req.max_new == 0:  # only the prompt scored (echo with max_tokens 0): every choice ends tokenless
            events = [StreamEvent(index=i, finish_reason="length", seed=s) for row in self.rows
                      for i, s in zip(row.indices, row.seeds)]
            self.rows = []
            return events
        if tokens is None:
            allowed = self.grammar.allowed(self.device) if self.grammar is not None else None  # (R, V)
            tokens = sampler.sample_rows(self.logits, p, self.seeds, self.positions, self.counts, self.bias,
                                         allowed)  # (R,)
        lps = _logprobs(self.logits, tokens, p.top_logprobs, token_bytes) if p.logprobs else [None] * R
        complete = self.grammar.accept(tokens.tolist()) if self.grammar is not None else [False] * R
        events = [ev for row, tok, lp, done in zip(self.rows, tokens.tolist(), lps, complete)
                  for ev in row.append(tok, lp, done)]
        if self.counts is not None:
            self.counts.scatter_add_(1, tokens[:, None], torch.ones(R, 1, device=tokens.device))
        live = [i for i, r in enumerate(self.rows) if not r.finished]
        if len(live) < R:  # drop finished rows from the batch, and from the cache unless the width is fixed
            self.rows, tokens, self.seeds = [self.rows[i] for i in live], tokens[live], self.seeds[live]
            self.counts = self.counts[live] if self.counts is not None else None
            if self.grammar is not None:
                self.grammar.keep(live)
            if self.fixed:
                self.slots = [self.slots[i] for i in live]
            elif live:
                self.kv.keep(live)
                self.slots, self.width = list(range(len(live))), len(live)
        if self.rows:
            slots = torch.tensor(self.slots, device=tokens.device)
            column = torch.zeros(self.width, dtype=tokens.dtype, device=tokens.device)  # (width,)
            self.column = column.index_copy_(0, slots, tokens)
        return events

    def take_logits(self, logits: torch.Tensor) -> None:
        """The decode forward's logits for this request's cache rows (width, V)."""
        self.logits = logits.float()[self.slots] if self.fixed else logits.float()

    def cancel(self) -> None:
        for row in self.rows:
            row.cancel()
        self.rows = []


def draw_together(states: list[RequestState]) -> list[torch.Tensor]:
    """The token columns of requests with one draw_key, drawn in one call on their rows stacked: each row's token
    is a function of its own logits, seed and position (sampler.py), so each column is the one it draws alone."""
    logits = torch.cat([st.logits for st in states])  # (ΣR, V)
    seeds, positions = torch.cat([st.seeds for st in states]), torch.cat([st.positions for st in states])  # (ΣR,)
    tokens = sampler.sample_rows(logits, states[0].req.params, seeds, positions)  # (ΣR,)
    return list(tokens.split([len(st.rows) for st in states]))


def _penalized(p) -> bool:
    return p.presence_penalty != 0 or p.frequency_penalty != 0 or p.repetition_penalty != 1


def _logprobs(raw_logits, tokens, top_n: int, token_bytes) -> list[TokenLogprob]:
    chosen, top = sampler.token_logprobs(raw_logits, tokens, top_n)
    return [logprob_entry(tok, lp, [] if top is None else top.indices[r].tolist(),
                          [] if top is None else top.values[r].tolist(), token_bytes)
            for r, (tok, lp) in enumerate(zip(tokens.tolist(), chosen.tolist()))]


def logprob_entry(token: int, logprob: float, top_ids: list[int], top_values: list[float], token_bytes,
                  rank: int | None = None) -> TokenLogprob:
    """One position's entry: the token, its logprob, its alternatives, each with its own bytes and their text."""
    alt_bytes = [token_bytes(i) for i in top_ids]
    alts = [(i, token_text(b), v) for i, b, v in zip(top_ids, alt_bytes, top_values)]
    own = token_bytes(token)
    return TokenLogprob(token, token_text(own), logprob, alts, token_bytes=own, top_bytes=alt_bytes, rank=rank)
