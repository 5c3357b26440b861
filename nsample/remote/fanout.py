"""Fan-out: n concurrent single-choice upstream requests, seeds seed + i, merged into one request's events."""
import asyncio

from nsample.engine.engine_base import choice_groups
from nsample.outputs import Usage
from nsample.remote.errors import UpstreamError
from nsample.remote.relay import Relayed, relay, total_usage
from nsample.remote.upstream import Upstream
from nsample.request import Request


async def fanout(up: Upstream, req: Request, prompt, stream: bool, concurrency: int, auto: bool = False) -> Usage:
    """At most `concurrency` upstream requests at once; a failing choice cancels its siblings.

    `auto`: a stream the upstream cuts short (llama-cpp-python ends the running stream when the next request
    arrives) turns the upstream to one request at a time, and the choice is asked again with its seed."""
    p = req.params
    gate = asyncio.Semaphore(concurrency)

    async def one(indices: list[int]) -> tuple[Relayed, int]:
        path, body = up.body(prompt, p, n=1, seed=req.seeds[indices[0]], stream=stream)
        async with gate:
            serial = up.serial
            r = await relay(up, req, path, body, {0: indices})
            if r.unfinished and auto and not serial:
                up.one_at_a_time()
                r = await relay(up, req, path, body, {0: indices}, replay=req.choices[indices[0]].text)
        if r.unfinished:
            hint = "" if auto else (" Servers that cut a stream short when another request arrives (llama-cpp-python "
                                    "without --interrupt_requests False) need --upstream-mode auto.")
            raise UpstreamError(f"The upstream {up.url} ended choice {indices[0]}'s stream before it finished.{hint}")
        return r, len(indices)

    return await total_usage(up, prompt, await all_or_none([one(g) for g in choice_groups(p)]))


async def all_or_none(coros) -> list:
    """Run the coroutines concurrently; when one fails (or the caller is cancelled) cancel and await the others."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # their upstream streams are closed on return
