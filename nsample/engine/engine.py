"""The engine: one model, one worker thread. Callers submit requests; each step the worker asks the scheduler
what to admit, lets the runner prefill, sample and run one batched decode forward, and publishes the news (the
sampled tokens before the forward)."""
import os
import threading
import time

import torch

from nsample.config import EngineConfig
from nsample.cpu.gguf_linear import int8_activations, use_int8_activations
from nsample.cpu.openmp import release_pool
from nsample.cpu.quantize import loaded_as, quantize, resolve_quantize
from nsample.engine import prefix_attention
from nsample.engine.engine_base import BaseEngine, prompt_param
from nsample.engine.kv_cache import kv_bytes_per_token
from nsample.engine.model_runner import ModelRunner
from nsample.engine.scheduler import Scheduler
from nsample.engine.structured import Grammars
from nsample.errors import InvalidRequest
from nsample.models.model_loader import load_pretrained, resolve_device, resolve_dtype
from nsample.models.prompts import prompt_ids
from nsample.models.rope_scaling import pin_longrope
from nsample.models.token_bytes import TokenBytes
from nsample.request import Request
from nsample.sampling_params import SamplingParams


def load(model: str | None = None, *, device: str = "auto", dtype: str = "auto", **config) -> "Engine":
    """An engine on `model`: None = the embedded SmolLM2-135M-Instruct; a hub id, folder or .gguf path."""
    cfg = EngineConfig(model=model, device=device, dtype=dtype, **config)
    dev = resolve_device(cfg.device)
    m, tok, name = load_pretrained(cfg.model, dev, resolve_dtype(cfg.dtype, dev), cfg.quantize)
    return Engine(m, tok, cfg, name=cfg.served_model_name or name)


class Engine(BaseEngine):
    def __init__(self, model, tokenizer, config: EngineConfig = EngineConfig(), name: str = "model"):
        """An engine on `model`; config.quantize swaps the model's layers in place (nsample/cpu/quantize.py), unless
        the loader made them the kernels' already (a GGUF file's blocks, gguf_model.py; a checkpoint's rows,
        checkpoint_rows.py)."""
        self.quantize = resolve_quantize(config.quantize, model.device, loaded_as(model))  # what "auto" became
        model = quantize(model, self.quantize)
        self.int8_activations = int8_activations(config.decode_activations)
        if self.int8_activations and self.quantize != "gguf":
            raise ValueError("decode_activations='int8' decodes a GGUF file's blocks: load a .gguf model with "
                             "quantize auto or gguf")
        use_int8_activations(model, self.int8_activations)
        self.model, self.tokenizer, self.config, self.name = model.eval(), tokenizer, config, name
        self.device = model.device
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.context = min(model.config.max_position_embeddings, config.max_context or 2**31)
        self.longrope = pin_longrope(model, self.context)  # Phi 3's factors: by the window, as llama.cpp and vLLM
        eos = model.generation_config.eos_token_id
        self.eos_ids = {t for t in ([eos] if isinstance(eos, int) else eos or []) + [tokenizer.eos_token_id]
                        if t is not None}
        self._kv_per_token = kv_bytes_per_token(model)
        self.shared_prefix = config.shared_prefix is not False and prefix_attention.enable(model)
        self.kv_budget = self._kv_budget()  # bytes of KV cache, shared by all running requests
        self.scheduler = Scheduler(config, self.kv_budget)
        self.token_bytes = TokenBytes(tokenizer)  # each token's own bytes, for logprobs
        self.grammars = Grammars(tokenizer, self.vocab_size, self.eos_ids)  # structured outputs
        self.runner = ModelRunner(model, tokenizer, config, self.eos_ids, self.vocab_size, self.shared_prefix,
                                  self.token_bytes, self.grammars)
        release_pool()  # loading and quantizing made this thread an OpenMP pool that would throttle the worker's
        self._worker = threading.Thread(target=self._loop, name="nsample-engine", daemon=True)
        self._worker.start()

    # --- public API ----------------------------------------------------------------------------------
    def submit(self, prompt, params: SamplingParams | None = None, *, client: str | None = None, **kwargs) -> Request:
        p = SamplingParams.from_kwargs(params, **kwargs)
        self.check(p)
        bad = [t for t in p.logit_bias if t >= self.vocab_size]
        if bad:
            raise InvalidRequest(f"Token id {bad[0]} in 'logit_bias' is outside the vocabulary "
                                 f"(0..{self.vocab_size - 1}).", param="logit_bias", code="invalid_value")
        self.grammars.check(p)
        ids = prompt_ids(self.tokenizer, prompt, self.vocab_size)
        max_new = self._max_new(len(ids), p, prompt_param(prompt))
        req = Request(ids, p, self.seeds(p), max_new, self.name, client, prompt)
        self.scheduler.add(req, self._kv_bytes(len(ids), self._rows(p), max_new))
        return req

    def tokenize(self, prompt) -> list[int]:
        return prompt_ids(self.tokenizer, prompt, self.vocab_size)

    @property
    def load_info(self) -> dict:
        return self.scheduler.load_info

    def health(self) -> dict:
        """What /health shows: the load, and the KV-cache budget with what running requests reserve of it."""
        return {**self.load_info, "kv_cache": self.scheduler.kv_info}

    def close(self) -> None:
        self.scheduler.close()
        self._worker.join(timeout=10)

    # --- admission -----------------------------------------------------------------------------------
    def _rows(self, p: SamplingParams) -> int:
        """Cache rows a request occupies: one per choice (greedy: one), padded to the fixed decode width."""
        rows, width = 1 if p.greedy else p.n, self.config.decode_width
        return -(-rows // width) * width if width else rows

    def _kv_bytes(self, prompt_len: int, rows: int, max_new: int) -> int:
        """Worst-case KV cache of a request: the prompt once (or per row, forked) plus rows x max_new tokens."""
        prompt_kv = prompt_len if self.shared_prefix else rows * prompt_len
        return (prompt_kv + rows * max_new) * self._kv_per_token

    def _max_new(self, prompt_len: int, p: SamplingParams, prompt_param: str) -> int:
        """Tokens each choice may generate: max_tokens, clipped to the context window and to the KV budget."""
        room = self.context - prompt_len
        if room < (p.max_tokens != 0):  # a prompt only scored (max_tokens 0) may fill the window
            raise InvalidRequest(f"This model's maximum context length is {self.context} tokens, but the "
                                 f"prompt is {prompt_len} tokens.", param=prompt_param,
                                 code="context_length_exceeded")
        rows = self._rows(p)
        fits = (self.kv_budget - self._kv_bytes(prompt_len, rows, 0)) // (rows * self._kv_per_token)  # per row
        if p.max_tokens is None:
            if fits < 1:
                raise InvalidRequest(f"n={p.n} choices of a {prompt_len}-token prompt do not fit in memory.",
                                     param="n", code="request_too_large")
            return min(room, fits)
        want = min(p.max_tokens, room)
        if want > fits:
            need = self._kv_bytes(prompt_len, rows, want) / 2**30
            raise InvalidRequest(f"n={p.n} choices of {prompt_len}+{want} tokens need {need:.1f} GiB of KV cache, "
                                 f"more than the {self.kv_budget / 2**30:.1f} GiB available; lower n or max_tokens.",
                                 param="n", code="request_too_large")
        return want

    def _kv_budget(self) -> int:
        if self.config.kv_budget_gb is not None:
            return int(self.config.kv_budget_gb * 2**30)
        if self.device.type == "cuda":
            return int(torch.cuda.mem_get_info(self.device)[0] * 0.8)
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):  # no such name on macOS: psutil's memory available there (its free + inactive)
            import psutil

            free = psutil.virtual_memory().available
        return int(free * 0.5)

    # --- the worker ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        """Admit, step, publish; until closed and drained."""
        while (work := self.scheduler.schedule(busy=self.runner.busy)) is not None:
            admitted, dropped = work
            for req in dropped:
                req.finish()
            for req in admitted:
                req.timings.queued_s = time.perf_counter() - req.submitted
                self.runner.add(req)
            for update in self.runner.step():
                if update.events:
                    update.req.publish(update.events)
                if update.done:
                    self.scheduler.release(update.req)
                    update.req.finish(update.error)
            if not self.runner.busy:
                release_pool()  # idle: free this worker's OpenMP threads, so another engine's pool is not throttled
