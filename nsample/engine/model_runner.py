"""The model runner: owns the running requests' state and runs the model, one step at a time.

One step: (1) cancelled requests leave; (2) up to `prefill_chunk` prompt tokens are prefilled, the request
with the least prompt left first (a short prompt arriving during a long prefill gets its first token at the
next step), so a long prompt never stalls the running streams for more than a chunk; the chunks of several
requests run packed into one forward (short prompts' in the C++ kernels, `nsample/cpu/fused_decode.py`); (3) every
request with logits draws a token column (requests that sample alike in one call), published then, before the next
forward; (4) one decode forward runs the live rows of all shared-prefix requests together, ordered by cohort (the
requests whose decoding started at the same step share their generated tokens' KV buffers, `nsample/engine/cohort.py`):
the model's own forward, or for a quantized Llama-style model on a CPU where nsample's kernels run the C++ one
(`nsample/cpu/fused_decode.py`); forked-cache requests, for architectures without the shared layout, each run a
forward of their own.
"""
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from nsample.config import EngineConfig
from nsample.cpu import fused_decode, gguf_linear
from nsample.engine.cohort import Cohort
from nsample.engine.prefix_attention import Chunk, Group, Segment
from nsample.engine.request_state import RequestState, draw_together
from nsample.outputs import StreamEvent
from nsample.request import Request


@dataclass
class Update:
    """One request's news from one step: its events, and whether it is done (with an error, if it failed)."""

    req: Request
    events: list[StreamEvent] = field(default_factory=list)
    done: bool = False
    error: BaseException | None = None


class ModelRunner:
    def __init__(self, model, tokenizer, config: EngineConfig, eos_ids: set[int], vocab: int, shared: bool,
                 token_bytes, grammars=None):
        self.model, self.tokenizer, self.config = model, tokenizer, config
        self.eos_ids, self.vocab, self.shared, self.token_bytes = eos_ids, vocab, shared, token_bytes
        self.grammars = grammars  # structured outputs' compiled grammars (nsample/engine/structured.py)
        self.states: dict[Request, RequestState] = {}  # in admission order
        self.fused = fused_decode.build(model) if shared else None  # decode steps in C++ kernels, where they apply

    @property
    def busy(self) -> bool:
        return bool(self.states)

    def add(self, req: Request) -> None:
        self.states[req] = RequestState(req, self.model, self.tokenizer, self.eos_ids, self.vocab, self.shared,
                                        self.config.decode_width, self.grammars)

    @torch.inference_mode()
    def step(self) -> Iterator[Update]:
        """One step, as updates: the sampled tokens' news comes before the decode forward runs, so a stream (and
        a caller waiting for a first token to send its next request) sees each token a forward sooner; then the
        requests the decode forward failed."""
        updates = {req: Update(req) for req in self.states}
        for st in list(self.states.values()):  # 1) cancelled requests leave the batch
            if st.req.cancelled:
                st.cancel()
        chunks, budget = [], self.config.prefill_chunk  # 2) prefill prompt chunks, shortest rest first
        for st in sorted((s for s in self.states.values() if s.rows and s.logits is None), key=_prompt_left):
            if budget <= 0:
                break
            chunks.append((st, st.next_chunk(budget)))
            budget -= len(chunks[-1][1])
        if self.shared and chunks:  # packed into one forward
            self._guard(updates, [st for st, _ in chunks], lambda: self._prefill(chunks))
        for st, chunk in chunks if not self.shared else []:  # forked caches: a forward per request
            self._guard(updates, [st], lambda: st.prefill(len(chunk), self.token_bytes))
        t0 = time.perf_counter()
        decoding = [s for s in self.states.values() if s.rows and s.logits is not None]
        self._sample(updates, decoding)  # 3) a token column for every request with logits
        spent = time.perf_counter() - t0
        for st in decoding:
            st.req.timings.decode_s += spent
        yield from self._news(updates)  # the tokens, and the requests with no live row left
        live = [s for s in decoding if s.rows]
        updates, t0 = {st.req: Update(st.req) for st in live}, time.perf_counter()
        with gguf_linear.decoding():  # decode forwards: a GGUF's blocks on the decode kernels
            if self.shared and live:  # 4) one decode forward for the live rows of all requests
                self._guard(updates, live, lambda: self._decode(live))
            for st in live if not self.shared else []:  # forked caches: a forward per request
                self._guard(updates, [st], lambda: st.take_logits(st.kv.decode(st.column, st.generated)))
        spent = time.perf_counter() - t0
        for st in live:
            st.req.timings.decode_s += spent
        yield from self._news(updates)  # the requests whose decode failed

    def _news(self, updates: dict[Request, Update]) -> list[Update]:
        """The updates with events or an end; the requests that ended (no live row left) leave."""
        for st in [s for s in self.states.values() if not s.rows]:
            updates[st.req].done = True
            del self.states[st.req]
        return [u for u in updates.values() if u.events or u.done]

    def _sample(self, updates: dict[Request, Update], decoding: list[RequestState]) -> None:
        """Each request draws its token column; those that draw alike (one draw_key) draw in one call, which for
        many small requests costs one call's overhead instead of one each."""
        alike: dict[object, list[RequestState]] = {}
        for st in decoding:
            alike.setdefault(st.draw_key or st, []).append(st)  # no key: a draw of its own
        for states in alike.values():
            columns = self._guard(updates, states, lambda: draw_together(states)) if len(states) > 1 else [None]
            for st, tokens in zip(states, columns or []):  # none: the draw failed, and so did its requests
                self._guard(updates, [st], lambda: updates[st.req].events.extend(st.sample(self.token_bytes, tokens)))

    def _prefill(self, chunks: list[tuple[RequestState, list[int]]]) -> None:
        """Forward the prompt chunks of several requests packed into one sequence (1, T); each chunk attends to
        its own request's prompt only. A chunk keeps its last position's logits, or all (for prompt logprobs).
        Short prompts' chunks run in the C++ kernels where the decode does (fused_decode.py), their projections on
        the decode kernels; the rest in the model's forward, on the GEMM. Which is the prompt's length's choice,
        never its neighbours'."""
        short = [self.fused is not None and len(st.req.prompt_ids) <= fused_decode.SHORT_PROMPT for st, _ in chunks]
        for fused in (True, False):
            part = [c for c, s in zip(chunks, short) if s == fused]
            if part:
                self._prefill_packed(part, fused)

    def _prefill_packed(self, chunks: list[tuple[RequestState, list[int]]], fused: bool) -> None:
        t0, packed, ids, positions, last, every = time.perf_counter(), [], [], [], [], []
        for st, chunk in chunks:
            packed.append(Chunk(len(ids), len(ids) + len(chunk), st.kv, st.prefilled))
            if st.all_logits:
                every += range(len(ids), len(ids) + len(chunk))
            else:
                last.append(len(ids) + len(chunk) - 1)
            ids += chunk
            positions += range(st.prefilled, st.prefilled + len(chunk))
        device, keep = self.model.device, last + every  # the one-row requests' rows first: the head decodes them
        ids, positions = torch.tensor(ids, device=device), torch.tensor(positions, device=device)  # (T,)
        if fused:
            logits = self.fused.prefill(ids, positions, packed, keep)  # (len(keep), V)
        else:
            with gguf_linear.head_rows_decoded(len(last)):
                logits = self.model(input_ids=ids[None], position_ids=positions[None], use_cache=False,
                                    logits_to_keep=torch.tensor(keep, device=device),
                                    nsample_prefill=packed).logits[0]  # (len(keep), V)
        spent, one, many = time.perf_counter() - t0, 0, len(last)
        for st, chunk in chunks:
            if st.all_logits:
                rows, many = logits[many:many + len(chunk)], many + len(chunk)
            else:
                rows, one = logits[one:one + 1], one + 1
            st.take_prefill(len(chunk), rows, spent, self.token_bytes)

    def _decode(self, batch: list[RequestState]) -> None:
        """Forward one token per cache row of every request in `batch`, as one batch (B, 1), ordered by cohort."""
        fresh = [st.kv for st in batch if st.kv.cohort is None]
        if fresh:  # prefilled this step: they start decoding together, so they share one cohort
            Cohort(fresh)
        cohorts: dict[Cohort, list[RequestState]] = {}
        for st in batch:
            cohorts.setdefault(st.kv.cohort, []).append(st)
        groups, order, start = [], [], 0
        for cohort, members in cohorts.items():
            cohort.prepare([st.kv for st in members], members[0].generated)
            segments = [Segment(s.kv.slots[0], s.kv.slots[0] + s.width, s.kv) for s in members]
            groups.append(Group(start, start + sum(s.width for s in members), cohort, segments))
            order += members
            start = groups[-1].stop
        column = torch.cat([st.column for st in order])[:, None]  # (B, 1)
        positions = torch.tensor([len(st.req.prompt_ids) + st.generated - 1 for st in order for _ in range(st.width)],
                                 device=column.device)[:, None]  # (B, 1)
        if self.fused:
            logits = self.fused(column, positions, groups)  # (B, V)
        else:
            logits = self.model(input_ids=column, position_ids=positions, use_cache=False,
                                nsample_batch=groups).logits[:, -1]  # (B, V)
        first = 0
        for st in order:
            st.take_logits(logits[first:first + st.width])
            first += st.width

    def _guard(self, updates: dict, states: list[RequestState], work):
        """Run `work`; if it fails, the requests it was for fail with the error and leave."""
        try:
            return work()
        except Exception as e:  # noqa: BLE001 - a failing request must not stop the others
            for st in states:
                st.cancel()
                updates[st.req].error = e
            return None


def _prompt_left(st: RequestState) -> int:
    return len(st.req.prompt_ids) - st.prefilled
