"""Fan-in: wait for or interleave the events of one or more engine requests, and frame them as server-sent events.

Leaving early in any way (an error, a cancelled task, a closed generator after a client disconnect) cancels every
request involved, so the engine frees all their rows at its next step.
"""
import asyncio
import json
from collections.abc import AsyncIterator

from pydantic import BaseModel

from nsample.errors import NSampleError
from nsample.outputs import StreamEvent
from nsample.request import Request
from nsample.server.errors import server_error
from nsample.server.responses import UsageInfo

DONE = "data: [DONE]\n\n"


class Body:
    """An SSE body whose requests are cancelled when it is closed, even if it was never iterated (a client that
    left just as its first token arrived)."""

    def __init__(self, events: AsyncIterator[str], reqs: list[Request]):
        self.events, self.reqs = events, reqs

    def __aiter__(self) -> AsyncIterator[str]:
        return self.events

    async def aclose(self) -> None:
        cancel(self.reqs)
        await self.events.aclose()


async def collect(reqs: list[Request]) -> None:
    """Wait until every request has finished (the engine runs them side by side whoever reads them)."""
    try:
        for r in reqs:
            async for _ in r:
                pass
    finally:
        cancel(reqs)


async def merge(reqs: list[Request]) -> AsyncIterator[tuple[int, StreamEvent]]:
    """(request number, event) pairs from all requests, interleaved in the order the events arrive."""
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(k: int, r: Request) -> None:
        try:
            async for ev in r:
                queue.put_nowait((k, ev))
            queue.put_nowait((k, None))
        except Exception as e:  # noqa: BLE001 - handed to the reader, which raises it
            queue.put_nowait((k, e))

    tasks = [asyncio.create_task(pump(k, r)) for k, r in enumerate(reqs)]
    try:
        running = len(tasks)
        while running:
            k, item = await queue.get()
            if item is None:
                running -= 1
            elif isinstance(item, Exception):
                raise item
            else:
                yield k, item
    finally:
        for t in tasks:
            t.cancel()
        cancel(reqs)


def cancel(reqs: list[Request]) -> None:
    for r in reqs:
        r.cancel()


def usage(reqs: list[Request]) -> UsageInfo:
    """Of finished requests: each prompt once, every generated token of every choice (as OpenAI bills n, best_of)."""
    each = [r.result(timeout=0).usage for r in reqs]
    prompt, completion = sum(u.prompt_tokens for u in each), sum(u.completion_tokens for u in each)
    return UsageInfo(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def sse(obj: BaseModel) -> str:
    return f"data: {obj.model_dump_json()}\n\n"


def sse_error(e: Exception) -> str:
    """A failure after the stream started: one error event (the OpenAI body), then the caller sends [DONE]."""
    err = e if isinstance(e, NSampleError) else server_error(e)
    return f"data: {json.dumps(err.to_dict())}\n\n"
