"""Native n: one upstream request asks for all n choices (vLLM, SGLang, nsample share the prompt's prefill)."""
from nsample.errors import NSampleError
from nsample.outputs import Usage
from nsample.remote.errors import UpstreamError
from nsample.remote.relay import relay, total_usage
from nsample.remote.upstream import Upstream
from nsample.request import Request
from nsample.sampling_params import SamplingParams


async def native(up: Upstream, req: Request, prompt, stream: bool) -> Usage:
    """Pass n through with the base seed; the upstream derives choice i's seed as seed + i (vLLM's rule)."""
    p = req.params
    path, body = up.body(prompt, p, n=p.n, seed=req.seeds[0], stream=stream)
    r = await relay(up, req, path, body, {i: [i] for i in range(p.n)})
    if r.unfinished:
        raise UpstreamError(f"The upstream {up.url} answered {p.n - len(r.unfinished)} of the {p.n} choices asked "
                            f"for (n={p.n}); serve it with --upstream-mode fanout.", code="upstream_ignored_n")
    return await total_usage(up, prompt, [(r, 1)])


async def supports_n(up: Upstream, chat: bool) -> bool:
    """Probe once: does the upstream return 2 choices for a 1-token request with n=2?"""
    prompt = [{"role": "user", "content": "Hi"}] if chat else "Hi"
    path, body = up.body(prompt, SamplingParams(max_tokens=1), n=2, seed=0, stream=False)
    try:
        answer = [c async for c in up.chunks(path, body)]
    except NSampleError as e:
        if isinstance(e, UpstreamError) or not 400 <= e.status < 500:
            raise
        body["n"] = 1  # refused: n itself (fan-out then) or anything else (the same error again, not remembered)
        _ = [c async for c in up.chunks(path, body)]
        return False
    indices = {c.get("index") for a in answer for c in a.get("choices") or []}
    return indices == {0, 1}
