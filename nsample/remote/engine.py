"""The remote engine: the local engine's interface, with the model behind an OpenAI-compatible upstream server."""
import asyncio
import threading
import time
from dataclasses import fields

from nsample.config import EngineConfig
from nsample.engine.engine_base import BaseEngine
from nsample.errors import InvalidRequest, NSampleError, QueueFull
from nsample.models.prompts import is_chat
from nsample.outputs import GenerationResult
from nsample.remote.config import RemoteConfig
from nsample.remote.errors import UpstreamError, from_exception
from nsample.remote.fanout import fanout
from nsample.remote.loop import LoopThread
from nsample.remote.native import native, supports_n
from nsample.remote.upstream import Upstream, check_prompt
from nsample.request import Request
from nsample.sampling_params import SamplingParams

UNKNOWN_CONTEXT = 2**31 - 1


def connect(url: str, **config) -> "RemoteEngine":
    """A RemoteEngine on `url`; keyword arguments are RemoteConfig fields (model = the upstream's) or EngineConfig's."""
    remote = {f.name for f in fields(RemoteConfig)}
    return RemoteEngine(RemoteConfig(url, **{k: v for k, v in config.items() if k in remote}),
                        EngineConfig(**{k: v for k, v in config.items() if k not in remote}))


class RemoteEngine(BaseEngine):
    seed_bits = 31  # a random base seed every upstream takes

    def __init__(self, remote: RemoteConfig, config: EngineConfig | None = None):
        self.remote, self.config = remote, config or EngineConfig()
        self.tokenizer = None  # the upstream tokenizes; token ids and logprob ids stay unknown here
        self.device = remote.url  # where the model runs
        self.mode = None if remote.mode == "auto" else remote.mode  # auto: "native" or "fanout" after one probe
        self._probe = asyncio.Lock()
        self._lock = threading.Lock()
        self._waiting, self._running, self._closed = 0, set(), False
        self._tasks: dict[Request, asyncio.Task] = {}  # each request's producer, on the loop thread
        self._loop = LoopThread("nsample-remote")
        self.upstream: Upstream = self._loop.run(_open(remote))
        try:
            info = self._loop.run(self._model_info())
        except BaseException:
            self.close()
            raise
        self.upstream.model = info["id"]
        self.name = self.config.served_model_name or info["id"]
        self.context = min(info.get("max_model_len") or UNKNOWN_CONTEXT, self.config.max_context or UNKNOWN_CONTEXT)

    # --- public API ----------------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None, *, client: str | None = None, **kwargs) -> Request:
        """Validate and send a request upstream (streamed); iterate the handle for events, or call .result()."""
        return self._submit(prompt, SamplingParams.from_kwargs(params, **kwargs), stream=True, client=client)

    def generate(self, prompt, params: SamplingParams | None = None, *, client: str | None = None, **kwargs
                 ) -> GenerationResult:
        """n choices for one prompt, all at once; upstream answers come whole, so their usage is exact everywhere."""
        req = self._submit(prompt, SamplingParams.from_kwargs(params, **kwargs), stream=False, client=client)
        try:
            return req.result()
        finally:
            req.cancel()

    def tokenize(self, prompt) -> list[int]:
        raise NotImplementedError("a remote engine has no tokenizer: the upstream server tokenizes")

    @property
    def load_info(self) -> dict:
        with self._lock:
            return {"waiting": self._waiting, "active": len(self._running)}

    def close(self) -> None:
        with self._lock:
            self._closed = True
        if not self._loop.loop.is_closed():
            self._loop.run(self._shutdown())
            self._loop.close()

    # --- admission -----------------------------------------------------------------------------------
    def _submit(self, prompt, p: SamplingParams, stream: bool, client: str | None = None) -> Request:
        self.check(p)
        if p.prompt_logprobs is not None:  # upstreams differ (llama.cpp has none): refused rather than dropped
            raise InvalidRequest("Prompt logprobs ('echo' with 'logprobs', or 'prompt_logprobs') need a local "
                                 "engine; this one relays to an upstream server.", param="prompt_logprobs",
                                 code="unsupported_parameter")
        if (c := p.constraint) is not None:
            raise InvalidRequest("Structured outputs need a local engine; this one relays to an upstream server.",
                                 param=c[0], code="unsupported_parameter")
        prompt = check_prompt(prompt)
        ids = prompt if isinstance(prompt, list) and prompt and isinstance(prompt[0], int) else []
        req = Request(ids, p, self.seeds(p), p.max_tokens or 0, self.name, client, prompt)
        with self._lock:
            if self._closed:
                raise RuntimeError("the engine is closed")
            if self._waiting + len(self._running) >= self.config.max_queue:
                raise QueueFull(self.config.max_queue)
            self._waiting += 1
        req.on_cancel = lambda: self._loop.call(self._cancel, req)
        self._loop.call(self._start, req, prompt, stream)
        return req

    # --- on the loop thread --------------------------------------------------------------------------
    def _start(self, req: Request, prompt, stream: bool) -> None:
        task = self._tasks[req] = asyncio.ensure_future(self._run(req, prompt, stream))  # cancel() stops it
        task.add_done_callback(lambda task: self._finish(req, task))

    def _cancel(self, req: Request) -> None:
        if (task := self._tasks.get(req)) is not None:  # _start ran first: the loop runs callbacks in order
            task.cancel()

    async def _run(self, req: Request, prompt, stream: bool) -> None:
        p = req.params
        mode = "fanout" if p.n == 1 or p.greedy else await self._resolve_mode(is_chat(prompt))  # same request
        with self._lock:
            self._waiting -= 1
            self._running.add(req)
        req.timings.queued_s = time.perf_counter() - req.submitted
        if mode == "native":
            req.usage = await native(self.upstream, req, prompt, stream)
        else:
            req.usage = await fanout(self.upstream, req, prompt, stream, self.remote.concurrency,
                                     auto=self.remote.mode == "auto")
        t = req.timings  # upstream time to the first text, then the rest
        t.decode_s = time.perf_counter() - req.submitted - t.queued_s - t.prefill_s

    def _finish(self, req: Request, task: asyncio.Task) -> None:
        self._tasks.pop(req, None)
        with self._lock:
            if req in self._running:
                self._running.discard(req)
            else:
                self._waiting -= 1
        error = None if task.cancelled() else task.exception()
        req.finish(from_exception(self.remote.url, error) if error is not None else None)

    async def _shutdown(self) -> None:
        """Cancel the running requests (their upstream streams close, then they finish) and close the pool."""
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if hasattr(self, "upstream"):
            await self.upstream.aclose()

    async def _resolve_mode(self, chat: bool) -> str:
        async with self._probe:  # one probe, however many requests arrive meanwhile
            if self.mode is None:
                self.mode = "native" if await supports_n(self.upstream, chat) else "fanout"
        return self.mode

    async def _model_info(self) -> dict:
        """The upstream's model entry: the configured name, else the first listed; max_model_len when it says."""
        try:
            models = (await self.upstream.get("models")).get("data") or []
        except NSampleError:
            if self.remote.model is None:
                raise
            models = []
        if self.remote.model is None:
            if not models:
                raise UpstreamError(f"The upstream {self.remote.url} lists no models; pass --upstream-model.")
            return models[0]
        return next((m for m in models if m.get("id") == self.remote.model), {"id": self.remote.model})


async def _open(remote: RemoteConfig) -> Upstream:
    return Upstream(remote)  # made on the loop that will use it
