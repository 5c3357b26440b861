"""Chat completions: a finished engine request as a response, or its events as a stream of chunks."""
from collections.abc import AsyncIterator
from contextlib import aclosing

from nsample.outputs import TokenLogprob
from nsample.request import Request
from nsample.server import prompt_logprobs
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


def response(head: dict, req: Request, prompt_top: int | None = None) -> ChatCompletionResponse:
    """`prompt_top`: vLLM's `prompt_logprobs` (the chat template's tokens), None when not asked for."""
    choices = [ChatChoice(index=c.index, message=AssistantMessage(content=c.text), logprobs=logprobs(c.logprobs),
                          finish_reason=c.finish_reason, seed=c.seed, stop_reason=c.stop_reason)
               for c in req.choices]
    return ChatCompletionResponse(**head, choices=choices, usage=usage([req]),
                                  prompt_logprobs=prompt_logprobs.vllm_shape(req, prompt_top))


async def stream(head: dict, req: Request, include_usage: bool, prompt_top: int | None = None) -> AsyncIterator[str]:
    """A role chunk per choice (the first with vLLM's prompt_logprobs, if asked for), then one chunk per choice and
    step, interleaved as tokens arrive; the step that ends a choice carries its finish_reason (exactly once); then
    the usage chunk if asked for, then [DONE]."""

    def chunk(choice: ChatChunkChoice | None, **extra) -> str:
        return sse(ChatCompletionChunk(**head, choices=[choice] if choice else [], **extra))

    try:
        scored = prompt_logprobs.vllm_shape(req, prompt_top)
        for i, seed in enumerate(req.seeds):
            yield chunk(ChatChunkChoice(index=i, delta=Delta(role="assistant", content=""), seed=seed),
                        **({"prompt_logprobs": scored} if i == 0 and scored is not None else {}))
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
    """OpenAI's chat logprobs: each token's own bytes (they join into the content, also across a character split
    between tokens), its text those bytes decoded with replacement."""
    if lps is None:
        return None
    return ChatLogprobs(content=[ChatTokenLogprob(token=t.token, logprob=t.logprob, bytes=list(t.own_bytes),
                                                  top_logprobs=[TopLogprob(token=x, logprob=v, bytes=list(b))
                                                                for (_, x, v), b in zip(t.top, t.top_own_bytes)])
                                 for t in lps])
