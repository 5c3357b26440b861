"""A submitted request, as callers see it: the engine publishes events into it; callers iterate it or wait for it.

It holds no tensors: the runner keeps each running request's rows, KV cache and logits (RequestState).
"""
import asyncio
import queue
import threading
import time

from nsample.outputs import Choice, GenerationResult, StreamEvent, Timings, TokenLogprob, Usage
from nsample.sampling_params import SamplingParams

_END = object()


class Request:
    def __init__(self, prompt_ids: list[int], params: SamplingParams, seeds: list[int], max_new: int, model: str,
                 client: str | None = None, prompt=None):
        self.prompt_ids, self.params, self.seeds, self.max_new = prompt_ids, params, seeds, max_new
        self.prompt = prompt  # as submitted (text, messages, ids): the result carries it, e.g. for preference pairs
        self.prompt_logprobs: list[TokenLogprob | None] | None = None  # set once prefilled, if asked for
        self.client = client  # who asked (an API peer, a page session), for per-client fairness
        self.choices = [Choice(index=i, seed=s, logprobs=[] if params.logprobs else None)
                        for i, s in enumerate(seeds)]
        self.timings = Timings()
        self.model = model
        self.submitted = time.perf_counter()
        self.cancelled = False
        self.done = threading.Event()
        self.published = 0  # events published so far
        self.error: BaseException | None = None
        self._items: queue.SimpleQueue = queue.SimpleQueue()
        self._wake = None  # set by an async consumer: wakes its event loop
        self.on_cancel = None  # called once on cancel(), e.g. by a remote engine to close upstream streams
        self.usage: Usage | None = None  # set by producers that know better (a remote upstream's usage)

    # --- worker side ---------------------------------------------------------------------------------
    def publish(self, events: list[StreamEvent]) -> None:
        self.published += len(events)
        for ev in events:
            c = self.choices[ev.index]
            c.text += ev.text
            c.token_ids += ev.token_ids
            if not ev.token_ids and ev.token_count:  # relayed without ids: counted
                c.counted_tokens = (c.counted_tokens or 0) + ev.token_count
            if ev.logprobs:
                c.logprobs += ev.logprobs
            if ev.finish_reason:
                c.finish_reason, c.stop_reason = ev.finish_reason, ev.stop_reason
        self._put(events)

    def finish(self, error: BaseException | None = None) -> None:
        self.error = error
        if self.usage is not None and len(self.choices) == 1:  # an upstream's own count beats counted chunks
            self.choices[0].counted_tokens = self.usage.completion_tokens
        counted = sum(c.completion_tokens for c in self.choices)
        self.timings.completion_tokens = self.usage.completion_tokens if self.usage is not None else counted
        self.done.set()
        self._put(error if error is not None else _END)

    def _put(self, item) -> None:
        self._items.put(item)
        if (wake := self._wake) is not None:
            try:
                wake()
            except RuntimeError:  # the consumer's event loop has closed: nobody is listening any more
                self._wake = None

    @property
    def started(self) -> bool:
        """Whether there is output yet: events, the end, or an error."""
        return self.published > 0 or self.done.is_set()

    # --- caller side ---------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop generating; the worker frees this request's rows at its next step."""
        if not self.done.is_set() and not self.cancelled:
            self.cancelled = True
            if self.on_cancel is not None:
                self.on_cancel()

    def __iter__(self):
        try:
            while (item := self._items.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield from item
        finally:
            self.cancel()

    async def __aiter__(self):
        loop, ready = asyncio.get_running_loop(), asyncio.Event()
        self._wake = lambda: loop.call_soon_threadsafe(ready.set)
        try:
            while True:
                try:
                    item = self._items.get_nowait()
                except queue.Empty:
                    await ready.wait()
                    ready.clear()
                    continue
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                for ev in item:
                    yield ev
        finally:
            self._wake = None
            self.cancel()

    def result(self, timeout: float | None = None) -> GenerationResult:
        """The whole result; waits for the request to finish."""
        if not self.done.wait(timeout):
            raise TimeoutError("generation did not finish in time")
        if self.error is not None:
            raise self.error
        usage = self.usage or Usage(prompt_tokens=len(self.prompt_ids),
                                    completion_tokens=self.timings.completion_tokens)
        return GenerationResult(self.prompt_ids, self.choices, usage, self.timings, self.model, self.prompt,
                                self.params, self.prompt_logprobs)
