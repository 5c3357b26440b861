"""Relaying one upstream answer into a request: upstream choice k feeds nsample choices targets[k]."""
import time
from contextlib import aclosing
from dataclasses import dataclass, replace

from nsample.outputs import Usage
from nsample.remote.chunks import choice_event, chunk_usage
from nsample.remote.errors import UpstreamError
from nsample.remote.upstream import Upstream
from nsample.request import Request
from nsample.sampling_params import SamplingParams


@dataclass
class Relayed:
    usage: Usage | None  # as the upstream reported it; None when it did not (llama-cpp-python streams)
    chunks: int  # text chunks relayed, times the choices each fed: the completion tokens of one-token-per-chunk servers
    unfinished: list[int]  # upstream choice indices whose answer ended without a finish_reason


async def relay(up: Upstream, req: Request, path: str, body: dict, targets: dict[int, list[int]],
                replay: str = "") -> Relayed:
    """Publish the upstream's deltas as events with nsample's indices and seeds; one finish event per choice.

    `replay`: text a cut-short attempt at this one-choice request already published; the retry (same seed) must
    begin with it, and only what follows is published."""
    open_, counted, usage = set(targets), 0, None
    async with aclosing(up.chunks(path, body)) as chunks:
        async for chunk in chunks:
            events = []
            for c in chunk.get("choices") or []:
                ev = choice_event(c)
                if ev.index not in targets:
                    raise UpstreamError(f"The upstream {up.url} sent choice index {ev.index}; nsample asked for "
                                        f"{len(targets)} choice(s).")
                if ev.index not in open_:  # a second finish chunk for the same choice: not news
                    continue
                if ev.finish_reason:
                    open_.discard(ev.index)
                counted += len(targets[ev.index]) if ev.text else 0
                if replay and ev.text:
                    ev, replay = _replayed(up, ev, replay)
                events += [replace(ev, index=i, seed=req.seeds[i]) for i in targets[ev.index]]
            if events:
                if not req.timings.prefill_s and any(ev.text for ev in events):
                    req.timings.prefill_s = time.perf_counter() - req.submitted - req.timings.queued_s
                req.publish(events)
            usage = chunk_usage(chunk) or usage
    return Relayed(usage, counted, sorted(open_))


def _replayed(up: Upstream, ev, replay: str):
    """(the event without the part already published, what remains to skip); a retry that says otherwise fails."""
    k = min(len(ev.text), len(replay))
    if ev.text[:k] != replay[:k]:
        raise UpstreamError(f"The upstream {up.url} cut a stream short, and its retry with the same seed began "
                            f"differently from what was already sent; retry the request.")
    return replace(ev, text=ev.text[k:], logprobs=None if k else ev.logprobs), replay[k:]


async def total_usage(up: Upstream, prompt, parts: list[tuple[Relayed, int]]) -> Usage:
    """The prompt once, completions summed; parts: (relayed answer, how many choices it fed).

    Upstreams whose streams carry no usage (llama-cpp-python) get their text chunks counted as completion tokens
    (exact for one token per chunk; characters split over tokens arrive merged) and one non-streamed 1-token
    request for the prompt's token count (cheap: the prompt is in the upstream's prefix cache by then)."""
    if all(r.usage is not None for r, _ in parts):
        return Usage(prompt_tokens=max(r.usage.prompt_tokens for r, _ in parts),
                     completion_tokens=sum(r.usage.completion_tokens * k for r, k in parts))
    return Usage(prompt_tokens=await prompt_tokens(up, prompt), completion_tokens=sum(r.chunks for r, _ in parts))


async def prompt_tokens(up: Upstream, prompt) -> int:
    path, body = up.body(prompt, SamplingParams(max_tokens=1), n=1, seed=0, stream=False)
    async with aclosing(up.chunks(path, body)) as chunks:
        usage = [chunk_usage(c) async for c in chunks][-1]
    return usage.prompt_tokens if usage else 0
