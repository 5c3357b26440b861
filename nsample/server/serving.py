"""The serving layer: an OpenAI request in; engine requests, then a response object or an SSE stream out.

Everything is validated and submitted before a stream starts (the engine's submit validates synchronously, in a
worker thread so the event loop never waits on it), so bad input is always an HTTP error, never a 200 followed by an
error event. Errors come back as values (NSampleError); the routes turn them into responses through
nsample.server.errors.
"""
import asyncio
import hashlib
import time
import uuid

import nsample
from nsample.errors import InvalidRequest, ModelNotFound, NSampleError
from nsample.request import Request
from nsample.server import chat, completions
from nsample.server.config import ServerConfig
from nsample.server.errors import server_error
from nsample.server.fanin import Body, cancel, collect
from nsample.server.protocol import ChatCompletionRequest, CompletionRequest
from nsample.server.responses import ChatCompletionResponse, CompletionResponse, ModelCard, ModelList

Result = NSampleError | Body  # an SSE body


class OpenAIServing:
    def __init__(self, engine: "nsample.Engine", config: ServerConfig):
        self.engine, self.config = engine, config
        self.created = int(time.time())
        dtype = getattr(getattr(engine, "model", None), "dtype", None)  # a remote engine has no local model
        about = f"{nsample.__version__}|{engine.name}|{engine.config}|{engine.device}|{dtype}"
        self.fingerprint = "fp_" + hashlib.sha256(about.encode()).hexdigest()[:10]

    # --- models ----------------------------------------------------------------------------------------
    def models(self) -> ModelList:
        return ModelList(data=[self._card()])

    def model(self, name: str) -> ModelCard | NSampleError:
        return self._card() if name == self.engine.name else ModelNotFound(name)

    def _card(self) -> ModelCard:
        return ModelCard(id=self.engine.name, created=self.created, max_model_len=self.engine.context)

    # --- generation --------------------------------------------------------------------------------------
    async def chat(self, req: ChatCompletionRequest, client: str | None = None) -> ChatCompletionResponse | Result:
        try:
            self._check_model(req.model)
            reqs = await self._submit([req.prompt()], req.to_sampling_params(), client)
        except NSampleError as e:
            return req.name_error(e)
        head = self._head("chatcmpl")
        if req.stream:
            return await self._started(reqs) or Body(chat.stream(head, reqs[0], req.include_usage,
                                                                 req.prompt_logprobs), reqs)
        return await self._finish(reqs, lambda: chat.response(head, reqs[0], req.prompt_logprobs))

    async def completions(self, req: CompletionRequest, client: str | None = None) -> CompletionResponse | Result:
        try:
            self._check_model(req.model)
            prompts = req.prompts()
            limit = min(self.engine.config.max_queue, self.engine.config.max_queue_per_client)
            if len(prompts) > limit:
                raise InvalidRequest(f"At most {limit} prompts fit in one request, got {len(prompts)}.",
                                     param="prompt", code="array_above_max_length")
            params = req.to_sampling_params()
            echoes = [self._text(p) if req.echo else "" for p in prompts]
            reqs = await self._submit(prompts, params, client)
        except NSampleError as e:
            return req.name_error(e)
        head = self._head("cmpl")
        shape = completions.Shape(req.n or 1, echoes, req.logprobs, req.prompt_logprobs,
                                  getattr(self.engine, "token_bytes", None))
        if req.stream:
            return await self._started(reqs) or Body(completions.stream(head, reqs, shape, req.include_usage), reqs)
        return await self._finish(reqs, lambda: completions.response(head, reqs, shape))

    # --- helpers -----------------------------------------------------------------------------------------
    def _check_model(self, name: str | None) -> None:
        if name is not None and name != self.engine.name:
            raise ModelNotFound(name)

    async def _submit(self, prompts: list, params: "nsample.SamplingParams", client: str | None) -> list[Request]:
        """Queue one engine request per prompt: all of them, or (on the first refusal) none. In a worker thread: a
        submit validates and tokenizes, and the first constrained request builds the grammar library's view of the
        tokenizer (about 1.5 s), which must not stall every other request's stream on this event loop."""
        work = asyncio.ensure_future(asyncio.to_thread(self._submit_all, prompts, params, client))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:  # the client left while it was submitted: what it queued must not run on
            work.add_done_callback(_cancel_queued)
            raise

    def _submit_all(self, prompts: list, params: "nsample.SamplingParams", client: str | None) -> list[Request]:
        reqs: list[Request] = []
        try:
            for p in prompts:
                reqs.append(self.engine.submit(p, params, client=client))
        except BaseException:
            cancel(reqs)
            raise
        return reqs

    async def _started(self, reqs: list[Request]) -> NSampleError | None:
        """Wait for every request's first output, so a failure before the first token (an upstream that is down)
        is an HTTP error, not a 200 followed by an error event."""
        try:
            while not all(r.started for r in reqs):
                await asyncio.sleep(0.005)
        except BaseException:  # the client left before the first token: its requests must not run on
            cancel(reqs)
            raise
        error = next((r.error for r in reqs if r.error is not None and not r.published), None)
        if error is None:
            return None
        cancel(reqs)
        return error if isinstance(error, NSampleError) else server_error(error)

    async def _finish(self, reqs: list[Request], build):
        try:
            await collect(reqs)
            return build()
        except NSampleError as e:
            return e
        except Exception as e:  # noqa: BLE001 - a failure inside the engine
            return server_error(e)

    def _head(self, prefix: str) -> dict:
        """What every response and every chunk of one stream share."""
        return {"id": f"{prefix}-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.engine.name,
                "system_fingerprint": self.fingerprint}

    def _text(self, prompt: str | list[int]) -> str:
        """The prompt as text, for echo."""
        if isinstance(prompt, str):
            return prompt
        if self.engine.tokenizer is None:
            raise InvalidRequest("'echo' of a token-id prompt needs a local tokenizer, which this engine lacks.",
                                 param="echo", code="unsupported_parameter")
        return self.engine.tokenizer.decode(prompt)


def _cancel_queued(work: asyncio.Future) -> None:
    if not work.cancelled() and work.exception() is None:
        cancel(work.result())
