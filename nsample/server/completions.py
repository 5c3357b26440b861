"""Legacy completions: one engine request per prompt, merged prompt-major (index = prompt_idx * n + i).

best_of: each prompt's request samples best_of choices (with logprobs); the n with the highest mean token logprob
are returned, best first, re-indexed 0..n-1 within their prompt, each keeping the seed it was sampled with. Usage
counts every generated token, as OpenAI bills best_of. echo prepends the prompt text to every choice, and with
logprobs the prompt's token logprobs to its logprobs (completion_logprobs.py).
"""
import math
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass

from nsample.outputs import Choice, TokenLogprob
from nsample.request import Request
from nsample.server import prompt_logprobs
from nsample.server.completion_logprobs import TextOffsets, joined, legacy_prompt, logprobs
from nsample.server.fanin import DONE, cancel, merge, sse, sse_error, usage
from nsample.server.responses import CompletionChoice, CompletionLogprobs, CompletionResponse


@dataclass(frozen=True)
class Shape:
    """What each choice of an answer shows besides its text."""

    n: int  # choices per prompt
    echoes: list[str]  # per prompt: the text echoed before its choices' ("" without echo)
    top: int | None  # the client's integer `logprobs`: alternatives per token (None: no logprobs in the answer)
    prompt_top: int | None = None  # vLLM's `prompt_logprobs` (None: not asked for)
    token_bytes: Callable[[int], bytes] | None = None  # the engine's, for the echoed prompt's first token

    def echo_logprobs(self, p: int) -> bool:
        return bool(self.echoes[p]) and self.top is not None

    def prompt_part(self, p: int, req: Request) -> CompletionLogprobs | None:
        """The echoed prompt's tokens, as they lead each choice's logprobs (echo with logprobs)."""
        if not self.echo_logprobs(p):
            return None
        return legacy_prompt(req, self.top, self.token_bytes(req.prompt_ids[0]), TextOffsets(0))

    def generated(self, lps: list[TokenLogprob] | None, offsets: TextOffsets) -> CompletionLogprobs | None:
        return logprobs(lps, offsets) if self.top is not None else None


def response(head: dict, reqs: list[Request], shape: Shape) -> CompletionResponse:
    choices = []
    for p, req in enumerate(reqs):
        scored = prompt_logprobs.vllm_shape(req, shape.prompt_top)
        for i, c in enumerate(best(req.choices, shape.n)):
            lps = shape.generated(c.logprobs, TextOffsets(len(shape.echoes[p])))
            if (prompt := shape.prompt_part(p, req)) is not None:
                lps = joined(prompt, lps)
            choices.append(CompletionChoice(index=p * shape.n + i, text=shape.echoes[p] + c.text, logprobs=lps,
                                            finish_reason=c.finish_reason, seed=c.seed, stop_reason=c.stop_reason,
                                            prompt_logprobs=scored))
    return CompletionResponse(**head, choices=choices, usage=usage(reqs))


async def stream(head: dict, reqs: list[Request], shape: Shape, include_usage: bool) -> AsyncIterator[str]:
    """Each choice's echo chunk (if echo; with the prompt's logprobs, and vLLM's prompt_logprobs if asked for), then
    its text as generated, all prompts and choices interleaved."""

    def chunk(choices: list[CompletionChoice], **extra) -> str:
        return sse(CompletionResponse(**head, choices=choices, **extra))

    offsets: dict[int, TextOffsets] = {}  # index -> where the choice's next token starts
    n = shape.n
    try:
        for p, req in enumerate(reqs):
            scored = prompt_logprobs.vllm_shape(req, shape.prompt_top)
            for i, seed in enumerate(req.seeds):
                offsets[p * n + i] = TextOffsets(len(shape.echoes[p]))
                if shape.echoes[p] or scored is not None:
                    yield chunk([CompletionChoice(index=p * n + i, text=shape.echoes[p], seed=seed,
                                                  logprobs=shape.prompt_part(p, req), prompt_logprobs=scored)])
        async with aclosing(merge(reqs)) as events:
            async for p, ev in events:
                if ev.text or ev.logprobs or ev.finish_reason:
                    index = p * n + ev.index
                    lps = shape.generated(ev.logprobs or [], offsets[index])
                    yield chunk([CompletionChoice(index=index, text=ev.text, logprobs=lps, seed=ev.seed,
                                                  finish_reason=ev.finish_reason, stop_reason=ev.stop_reason)])
        if include_usage:
            yield chunk([], usage=usage(reqs))
    except Exception as e:  # noqa: BLE001 - the status line is sent: report the failure in the stream
        yield sse_error(e)
    finally:
        cancel(reqs)
    yield DONE


def best(choices: list[Choice], n: int) -> list[Choice]:
    """The n choices with the highest mean token logprob, best first (all of them, in order, when there are n)."""
    if len(choices) <= n:
        return choices
    return sorted(choices, key=lambda c: -math.inf if c.mean_logprob is None else c.mean_logprob, reverse=True)[:n]
