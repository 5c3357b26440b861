"""Chat completions: a finished engine request as a response, or its events as a stream of chunks."""
from collections.abc import AsyncIterator
from contextlib import aclosing

from nsample.outputs import TokenLogprob
from nsample.request import Request
from nsample.server.fanin import DONE, cancel, merge, sse, sse_error, usage
from nsample.server.responses import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChatLogprobs,
    ChatTokenLogprob,
    Delta,
    TopLogprob,
)


def response(head: dict, req: Request) -> ChatCompletionResponse:
    choices = [ChatChoice(index=c.index, message=AssistantMessage(content=c.text), logprobs=logprobs(c.logprobs),
                          finish_reason=c.finish_reason, seed=c.seed, stop_reason=c.stop_reason)
               for c in req.choices]
    return ChatCompletionResponse(**head, choices=choices, usage=usage([req]))


async def stream(head: dict, req: Request, include_usage: bool) -> AsyncIterator[str]:
    """A role chunk per choice, then one chunk per choice and step, interleaved as tokens arrive; the step that
    ends a choice carries its finish_reason (exactly once); then the usage chunk if asked for, then [DONE]."""

    def chunk(choice: ChatChunkChoice | None, **extra) -> str:
        return sse(ChatCompletionChunk(**head, choices=[choice] if choice else [], **extra))

    try:
        for i, seed in enumerate(req.seeds):
            yield chunk(ChatChunkChoice(index=i, delta=Delta(role="assistant", content=""), seed=seed))
        async with aclosing(merge([req])) as events:
            async for _, ev in events:
                if ev.text or ev.logprobs or ev.finish_reason:
                    yield chunk(ChatChunkChoice(index=ev.index, delta=Delta(content=ev.text or None),
                                                logprobs=logprobs(ev.logprobs), finish_reason=ev.finish_reason,
                                                seed=ev.seed, stop_reason=ev.stop_reason))
        if include_usage:
            yield chunk(None, usage=usage([req]))
    except Exception as e:  # noqa: BLE001 - the status line is sent: report the failure in the stream
        yield sse_error(e)
    finally:
        cancel([req])
    yield DONE


def logprobs(lps: list[TokenLogprob] | None) -> ChatLogprobs | None:
    if lps is None:
        return None
    return ChatLogprobs(content=[ChatTokenLogprob(token=t.token, logprob=t.logprob, bytes=list(t.token.encode()),
                                                  top_logprobs=[TopLogprob(token=x, logprob=v, bytes=list(x.encode()))
                                                                for _, x, v in t.top])
                                 for t in lps])
