"""One OpenAI-compatible upstream: a pooled httpx client, the bodies nsample sends it, and its answers as chunks."""
import asyncio
import contextlib
import json
import logging

import httpx

from nsample.errors import LONE_SURROGATE, InvalidRequest, check_text
from nsample.models.prompts import Chat, is_chat, normalize_messages
from nsample.remote.config import RemoteConfig
from nsample.remote.errors import UpstreamError, from_exception, from_status
from nsample.sampling_params import SamplingParams

log = logging.getLogger("nsample.remote")


def check_prompt(prompt):
    """The prompt as the upstream gets it (chat messages normalized); raises InvalidRequest like the local engine."""
    if isinstance(prompt, Chat):
        return Chat(normalize_messages(prompt.messages), prompt.continue_final_message)
    if is_chat(prompt):
        return normalize_messages(prompt)
    if isinstance(prompt, str):
        return check_text(prompt, "prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                                   for t in prompt):
        return prompt
    raise InvalidRequest("The prompt must be a string, a list of chat messages or a list of token ids.",
                         param="prompt", code="invalid_type")


class Upstream:
    def __init__(self, cfg: RemoteConfig):
        headers = {"Authorization": f"Bearer {cfg.api_key}"} if cfg.api_key else {}
        self.url, self.model = cfg.url, cfg.model
        self.client = httpx.AsyncClient(
            base_url=cfg.url + "/", headers=headers,
            timeout=httpx.Timeout(cfg.timeout, connect=cfg.connect_timeout),
            limits=httpx.Limits(max_connections=cfg.max_connections, max_keepalive_connections=cfg.max_connections))
        self.serial = False  # one request at a time: set when the upstream cuts a stream short for the next request
        self._turn = asyncio.Semaphore(1)

    def one_at_a_time(self) -> None:
        """From now on send this upstream one request at a time (said once in the log)."""
        if not self.serial:
            self.serial = True
            log.warning("The upstream %s cut a stream short when the next request arrived (llama-cpp-python's "
                        "default --interrupt_requests); sending it one request at a time from now on.", self.url)

    def body(self, prompt, p: SamplingParams, n: int, seed: int | None, stream: bool) -> tuple[str, dict]:
        """(path, JSON body) for `n` choices of `prompt`; nsample's extra samplers go out only when they are set."""
        chat, continued = is_chat(prompt), isinstance(prompt, Chat)
        b = {"model": self.model, ("messages" if chat else "prompt"): prompt.messages if continued else prompt, "n": n,
             "max_tokens": p.max_tokens,  # null = up to the context window (llama-cpp-python's default is 16)
             "temperature": p.temperature, "top_p": p.top_p, "stream": stream}
        if continued:  # vLLM's names for leaving the final assistant turn open
            b.update(continue_final_message=True, add_generation_prompt=False)
        if seed is not None:
            b["seed"] = seed
        if p.stop:
            b["stop"] = list(p.stop)
        if p.presence_penalty:
            b["presence_penalty"] = p.presence_penalty
        if p.frequency_penalty:
            b["frequency_penalty"] = p.frequency_penalty
        if p.logit_bias:
            b["logit_bias"] = {str(k): v for k, v in p.logit_bias.items()}
        if p.logprobs:
            b.update({"logprobs": True, "top_logprobs": p.top_logprobs} if chat else {"logprobs": p.top_logprobs})
        for name, default in (("top_k", 0), ("min_p", 0.0), ("repetition_penalty", 1.0), ("ignore_eos", False)):
            if getattr(p, name) != default:  # vLLM / SGLang names; OpenAI itself would refuse them
                b[name] = getattr(p, name)
        if stream:
            b["stream_options"] = {"include_usage": True}
        return ("chat/completions" if chat else "completions"), b

    async def chunks(self, path: str, body: dict):
        """The upstream's answer as chunk dicts: each SSE event of a stream, or the whole JSON of a plain answer.
        Close the generator (contextlib.aclosing) to close the upstream stream and give up the turn at once."""
        try:
            async with self._turn if self.serial else contextlib.nullcontext(), \
                    self.client.stream("POST", path, json=body) as r:
                if r.status_code >= 400:
                    raise from_status(self.url, r.status_code, (await r.aread()).decode(errors="replace"))
                if not r.headers.get("content-type", "").startswith("text/event-stream"):
                    yield _checked(self.url, json.loads(await r.aread()))
                    return
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    yield _checked(self.url, json.loads(data))
        except Exception as e:
            raise from_exception(self.url, e) from e

    async def get(self, path: str) -> dict:
        try:
            r = await self.client.get(path)
            if r.status_code >= 400:
                raise from_status(self.url, r.status_code, r.text)
            return without_surrogates(r.json())
        except Exception as e:
            raise from_exception(self.url, e) from e

    async def aclose(self) -> None:
        await self.client.aclose()


def _checked(url: str, chunk) -> dict:
    """An upstream's chunk as nsample relays it: a JSON object, its text valid Unicode."""
    chunk = without_surrogates(chunk)
    if not isinstance(chunk, dict):
        raise UpstreamError(f"The upstream {url} sent {type(chunk).__name__} where a JSON object belongs.")
    if "error" in chunk:  # an error reported inside a stream that began with 200
        err = chunk["error"]
        status = err.get("code") if isinstance(err, dict) and isinstance(err.get("code"), int) else 500
        raise from_status(url, status, json.dumps(chunk))
    return chunk


def without_surrogates(value):
    """A parsed JSON value with each lone surrogate of its strings (keys too) replaced by U+FFFD: text nsample relays
    rather than receives, where a 400 would blame the client for the upstream (nsample.errors.check_text)."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    return value
