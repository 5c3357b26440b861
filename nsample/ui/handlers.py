"""The UI's work as plain Python: submit to the engine, stream a Run in throttled snapshots, reproduce a choice,
branch from a choice.

No Gradio here and no sampling logic: the engine samples, nsample.analysis measures, these functions relay.
"""
import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nsample.errors import InvalidRequest, NSampleError
from nsample.ui.run import Origin, Run, RunSpec

STREAM_INTERVAL_S = 0.05  # at most ~20 page updates a second, however fast tokens arrive


async def generate(engine, spec: RunSpec, interval: float = STREAM_INTERVAL_S, client: str | None = None
                   ) -> AsyncIterator[Run]:
    """Yield the same Run as it fills: once at submit (seeds known), then every `interval` while tokens
    arrive, then once with `run.result` set. Closing the iterator early cancels the request in the engine.
    `client` names the page session, for the engine's per-client fairness."""
    req = engine.submit(spec.engine_prompt, client=client, **spec.sampling)  # validates now: errors reach the caller
    run = Run.start(spec, engine.name, req.seeds, ids_reported=getattr(engine, "tokenizer", None) is not None)
    version = [0]

    async def pump():
        async for ev in req:
            run.apply(ev)
            version[0] += 1

    task = asyncio.create_task(pump())
    try:
        yield run
        shown = 0
        while not task.done():
            await asyncio.wait({task}, timeout=interval)
            if version[0] != shown and not task.done():
                shown = version[0]
                yield run
        try:
            task.result()  # an engine error surfaces here
            run.finish(req.result())
        except NSampleError as e:
            run.fail(e.message)  # the partial run stays whole for the report; the caller sees the error
            raise
        yield run
    finally:
        if not run.ended:
            run.cancel()
        task.cancel()
        req.cancel()


@dataclass
class Reproduction:
    index: int
    seed: int
    text: str
    token_ids: list[int]
    identical: bool


async def reproduce(engine, run: Run, index: int, client: str | None = None) -> Reproduction:
    """Re-run choice `index` alone (n=1) with its seed and say whether it came out token for token the same."""
    if run is None or not run.done:
        raise InvalidRequest("Generate (and let it finish) before reproducing a choice.", param="index")
    if not 0 <= index < len(run.cards):
        raise InvalidRequest(f"There is no choice #{index} in this run.", param="index")
    original = run.result.choices[index]
    spec = run.spec.alone(original.seed)
    req = engine.submit(spec.engine_prompt, client=client, **spec.sampling)
    async for _ in req:
        pass
    again = req.result().choices[0]
    same = again.token_ids == original.token_ids and again.text == original.text
    return Reproduction(index, original.seed, again.text, again.token_ids, same)


def branch(parent: Run | None, index: int, settings: RunSpec) -> tuple[RunSpec, Origin]:
    """n new choices (current settings) continuing choice `index` of `parent` up to its picked cut, or all of it."""
    if parent is None or not parent.ended:
        raise InvalidRequest("Let the run finish (or stop it) before continuing from a choice.", param="index")
    if not 0 <= index < len(parent.cards):
        raise InvalidRequest(f"There is no choice #{index} in this run.", param="index")
    text = parent.cards[index].text
    cut = parent.cut[1] if parent.cut and parent.cut[0] == index else len(text)
    if not 0 <= cut <= len(text):
        raise InvalidRequest(f"Choice #{index} has {len(text)} characters; cannot cut after {cut}.", param="cut")
    return settings.continued(parent.spec, text[:cut]), Origin(parent.id, index, cut, text[:cut])


def branch_at_token(parent: Run | None, index: int, alternative: int, settings: RunSpec) -> tuple[RunSpec, Origin]:
    """n new choices continuing choice `index` of `parent` from the token picked in its card (parent.alternatives),
    with that token replaced by its `alternative`-th most likely one (from the engine's top_logprobs)."""
    if parent is None or not parent.ended or parent.alternatives is None or parent.alternatives[0] != index:
        raise InvalidRequest("Click a token in a finished card (logprobs on) to see its alternatives first.",
                             param="index")
    _, token, start = parent.alternatives
    top = parent.cards[index].logprobs[token].top
    if not 0 <= alternative < len(top):
        raise InvalidRequest(f"That token has {len(top)} alternatives; there is no #{alternative}.", param="index")
    text = top[alternative][1]
    kept = parent.cards[index].text[:start]
    return (settings.continued(parent.spec, kept + text),
            Origin(parent.id, index, start, kept + text, token=text))


def greedy_hint(temperature: float, n: int) -> str:
    """A note for temperature 0 with n > 1: every choice is the argmax path, so all n are identical."""
    if temperature == 0 and int(n) > 1:
        return (f"**Temperature 0 is greedy decoding:** all {int(n)} choices will be identical "
                "(nsample computes them once). Raise the temperature to see them differ.")
    return ""
