"""The engine: owns one model, admits requests, and decodes them on one worker thread, step by step."""
import functools
import os
import secrets
import threading
from collections import deque

import torch

from nsample import decode, prefix_attention
from nsample.config import EngineConfig
from nsample.errors import InvalidRequest, NSampleError, QueueFull
from nsample.kv_cache import kv_bytes_per_token
from nsample.model_loader import load_pretrained, resolve_device, resolve_dtype
from nsample.outputs import GenerationResult
from nsample.prompts import prompt_ids
from nsample.request import Request
from nsample.sampling_params import INT64_MIN, SamplingParams


def load(model: str | None = None, *, device: str = "auto", dtype: str = "auto", **config) -> "Engine":
    """An engine on `model`: None = the embedded SmolLM2-135M-Instruct; a hub id, folder or .gguf path."""
    cfg = EngineConfig(model=model, device=device, dtype=dtype, **config)
    dev = resolve_device(cfg.device)
    m, tok, name = load_pretrained(cfg.model, dev, resolve_dtype(cfg.dtype, dev))
    return Engine(m, tok, cfg, name=cfg.served_model_name or name)


def wrap_seed(seed: int) -> int:
    """Wrap into the signed 64-bit range, so seed + i never overflows."""
    return (seed - INT64_MIN) % 2**64 + INT64_MIN


class Engine:
    def __init__(self, model, tokenizer, config: EngineConfig = EngineConfig(), name: str = "model"):
        self.model, self.tokenizer, self.config, self.name = model.eval(), tokenizer, config, name
        self.device = model.device
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.context = min(model.config.max_position_embeddings, config.max_context or 2**31)
        eos = model.generation_config.eos_token_id
        self.eos_ids = {t for t in ([eos] if isinstance(eos, int) else eos or []) + [tokenizer.eos_token_id]
                        if t is not None}
        self._kv_per_token = kv_bytes_per_token(model)
        self.shared_prefix = config.shared_prefix is not False and prefix_attention.enable(model)
        self._waiting: deque[Request] = deque()
        self._active: list[Request] = []
        self._cv = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._loop, name="nsample-engine", daemon=True)
        self._worker.start()

    # --- public API ----------------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None, **kwargs) -> Request:
        """Validate and queue a request; iterate the returned handle for events, or call .result()."""
        p = SamplingParams.from_kwargs(params, **kwargs)
        if p.n > self.config.max_n:
            raise InvalidRequest(f"Invalid 'n': integer above maximum value. Expected a value <= "
                                 f"{self.config.max_n}, but got {p.n} instead.", param="n",
                                 code="integer_above_max_value")
        bad = [t for t in p.logit_bias if t >= self.vocab_size]
        if bad:
            raise InvalidRequest(f"Token id {bad[0]} in 'logit_bias' is outside the vocabulary "
                                 f"(0..{self.vocab_size - 1}).", param="logit_bias", code="invalid_value")
        ids = prompt_ids(self.tokenizer, prompt, self.vocab_size)
        prompt_param = "messages" if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict) else "prompt"
        req = Request(ids, p, self._seeds(p), self._max_new(len(ids), p, prompt_param), self.name)
        with self._cv:
            if self._closed:
                raise RuntimeError("the engine is closed")
            if len(self._waiting) + len(self._active) >= self.config.max_queue:
                raise QueueFull(self.config.max_queue)
            self._waiting.append(req)
            self._cv.notify()
        return req

    def generate(self, prompt, params: SamplingParams | None = None, **kwargs) -> GenerationResult:
        """n choices for one prompt, all at once."""
        req = self.submit(prompt, params, **kwargs)
        try:
            return req.result()
        finally:
            req.cancel()

    def stream(self, prompt, params: SamplingParams | None = None, **kwargs):
        """Events for all choices, interleaved as tokens arrive; stopping the iteration cancels the rest."""
        yield from self.submit(prompt, params, **kwargs)

    async def astream(self, prompt, params: SamplingParams | None = None, **kwargs):
        """The async form of stream(), for servers; cancelling the task cancels the request."""
        async for ev in self.submit(prompt, params, **kwargs):
            yield ev

    def tokenize(self, prompt) -> list[int]:
        return prompt_ids(self.tokenizer, prompt, self.vocab_size)

    @functools.cache
    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    @property
    def load_info(self) -> dict:
        with self._cv:
            return {"waiting": len(self._waiting), "active": len(self._active)}

    def close(self) -> None:
        with self._cv:
            self._closed = True
            for r in [*self._waiting, *self._active]:
                r.cancel()
            self._cv.notify()
        self._worker.join(timeout=10)

    # --- admission -----------------------------------------------------------------------------------
    def _seeds(self, p: SamplingParams) -> list[int]:
        if p.seed is None:
            return [secrets.randbits(63) for _ in range(p.n)]
        return [wrap_seed(p.seed + i) for i in range(p.n)]

    def _max_new(self, prompt_len: int, p: SamplingParams, prompt_param: str) -> int:
        """Tokens each choice may generate: max_tokens, clipped to the context window and to memory."""
        room = self.context - prompt_len
        if room < 1:
            raise InvalidRequest(f"This model's maximum context length is {self.context} tokens, but the "
                                 f"prompt is {prompt_len} tokens.", param=prompt_param,
                                 code="context_length_exceeded")
        rows = 1 if p.greedy else p.n
        budget = self._kv_budget()
        prompt_kv = prompt_len if self.shared_prefix else rows * prompt_len  # the prompt's KV: once, or per row
        fits = int((budget / self._kv_per_token - prompt_kv) // rows)  # generated tokens per row that fit
        if p.max_tokens is None:
            if fits < 1:
                raise InvalidRequest(f"n={p.n} choices of a {prompt_len}-token prompt do not fit in memory.",
                                     param="n", code="request_too_large")
            return min(room, fits)
        want = min(p.max_tokens, room)
        if want > fits:
            need = (prompt_kv + rows * want) * self._kv_per_token / 2**30
            raise InvalidRequest(f"n={p.n} choices of {prompt_len}+{want} tokens need {need:.1f} GiB of KV cache, "
                                 f"more than the {budget / 2**30:.1f} GiB available; lower n or max_tokens.",
                                 param="n", code="request_too_large")
        return want

    def _kv_budget(self) -> float:
        if self.config.kv_budget_gb is not None:
            return self.config.kv_budget_gb * 2**30
        if self.device.type == "cuda":
            return torch.cuda.mem_get_info(self.device)[0] * 0.8
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 0.5
        except (ValueError, OSError):
            return 4 * 2**30

    # --- the worker ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cv:
                while not (self._waiting or self._active or self._closed):
                    self._cv.wait()
                if self._closed and not (self._waiting or self._active):
                    return
                while self._waiting and len(self._active) < self.config.max_active:
                    self._active.append(self._waiting.popleft())
                batch = list(self._active)
            for req in batch:  # round robin: one step for each active request
                self._advance(req)
            with self._cv:
                self._active = [r for r in self._active if not r.done.is_set()]
                for r in [r for r in self._waiting if r.cancelled]:
                    self._waiting.remove(r)
                    r.finish()

    def _advance(self, req: Request) -> None:
        try:
            if req.cancelled:
                for row in req.state.rows if req.state else []:
                    row.cancel()
                req.state = None
                req.finish()
            elif req.state is None:
                decode.prefill(self, req)
            else:
                decode.step(self, req)
                if not req.state.rows:
                    req.state = None
                    req.finish()
        except NSampleError as e:
            req.state = None
            req.finish(e)
        except Exception as e:  # noqa: BLE001 - a failing request must not stop the worker
            req.state = None
            req.finish(e)
