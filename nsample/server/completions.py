"""Legacy completions: one engine request per prompt, merged prompt-major (index = prompt_idx * n + i).

best_of: each prompt's request samples best_of choices (with logprobs); the n with the highest mean token logprob
are returned, best first, re-indexed 0..n-1 within their prompt, each keeping the seed it was sampled with. Usage
counts every generated token, as OpenAI bills best_of. echo prepends the prompt text to every choice.
"""
import codecs
import math
from collections.abc import AsyncIterator
from contextlib import aclosing

from nsample.outputs import Choice, TokenLogprob
from nsample.request import Request
from nsample.server.fanin import DONE, cancel, merge, sse, sse_error, usage
from nsample.server.responses import CompletionChoice, CompletionLogprobs, CompletionResponse
from nsample.token_bytes import legacy_token


def response(head: dict, reqs: list[Request], n: int, echoes: list[str], top: int | None) -> CompletionResponse:
    """`top`: the client's integer `logprobs` (None: no logprobs in the answer)."""
    choices = []
    for p, req in enumerate(reqs):
        for i, c in enumerate(best(req.choices, n)):
            lps = logprobs(c.logprobs, TextOffsets(len(echoes[p]))) if top is not None else None
            choices.append(CompletionChoice(index=p * n + i, text=echoes[p] + c.text, logprobs=lps,
                                            finish_reason=c.finish_reason, seed=c.seed, stop_reason=c.stop_reason))
    return CompletionResponse(**head, choices=choices, usage=usage(reqs))


async def stream(head: dict, reqs: list[Request], n: int, echoes: list[str], top: int | None,
                 include_usage: bool) -> AsyncIterator[str]:
    """The echo chunk of each choice (if echo), then its text as generated, all prompts and choices interleaved."""

    def chunk(choices: list[CompletionChoice], **extra) -> str:
        return sse(CompletionResponse(**head, choices=choices, **extra))

    offsets: dict[int, TextOffsets] = {}  # index -> where the choice's next token starts
    try:
        for p, req in enumerate(reqs):
            for i, seed in enumerate(req.seeds):
                offsets[p * n + i] = TextOffsets(len(echoes[p]))
                if echoes[p]:
                    yield chunk([CompletionChoice(index=p * n + i, text=echoes[p], seed=seed)])
        async with aclosing(merge(reqs)) as events:
            async for p, ev in events:
                if ev.text or ev.logprobs or ev.finish_reason:
                    index, lps = p * n + ev.index, None
                    if top is not None:
                        lps = logprobs(ev.logprobs or [], offsets[index])
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


class TextOffsets:
    """Where each token starts in a choice's text (characters), counted on the tokens' own bytes, so a character
    split between tokens is counted once, when it completes."""

    def __init__(self, start: int):
        self.offset, self.decoder = start, codecs.getincrementaldecoder("utf-8")(errors="replace")

    def take(self, data: bytes) -> int:
        """The offset of a token with these bytes; advances past its complete characters."""
        at = self.offset
        self.offset += len(self.decoder.decode(data))
        return at


def logprobs(lps: list[TokenLogprob] | None, offsets: TextOffsets) -> CompletionLogprobs:
    """The legacy logprobs object: each top dict holds the top-k and the sampled token; a token that is part of a
    character is named by its bytes (`bytes:\\xe6\\x97`), as OpenAI does."""
    out = CompletionLogprobs(tokens=[], token_logprobs=[], top_logprobs=[], text_offset=[])
    for t in lps or []:
        own = t.token_bytes if t.token_bytes is not None else t.token.encode()
        name = legacy_token(own) if t.token_bytes is not None else t.token
        alt_bytes = t.top_bytes if t.top_bytes is not None else [None] * len(t.top)
        out.tokens.append(name)
        out.token_logprobs.append(t.logprob)
        out.top_logprobs.append({(x if b is None else legacy_token(b)): v for (_, x, v), b in zip(t.top, alt_bytes)}
                                | {name: t.logprob})
        out.text_offset.append(offsets.take(own))
    return out
