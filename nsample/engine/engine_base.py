"""What every engine shares, local (nsample.engine) or remote (nsample.remote): the admission checks, the choices'
seeds, greedy grouping, the prompt's kind, and the thin wrappers over submit(). Torch-free: a remote engine
never imports torch.
"""
import secrets

from nsample.config import EngineConfig
from nsample.errors import InvalidRequest
from nsample.models.prompts import is_chat
from nsample.outputs import GenerationResult
from nsample.request import Request
from nsample.sampling_params import INT64_MIN, SamplingParams


def wrap_seed(seed: int) -> int:
    """Wrap into the signed 64-bit range, so seed + i never overflows."""
    return (seed - INT64_MIN) % 2**64 + INT64_MIN


def choice_groups(p: SamplingParams) -> list[list[int]]:
    """The choices each decoded row (or upstream answer) serves: all n at once when greedy (they are identical),
    else one each."""
    return [list(range(p.n))] if p.greedy else [[i] for i in range(p.n)]


def prompt_param(prompt) -> str:
    """The request field a prompt came in, for error messages: chat messages or a prompt."""
    return "messages" if is_chat(prompt) else "prompt"


class BaseEngine:
    config: EngineConfig
    name: str
    seed_bits = 63  # a random base seed's size when the request has none (upstreams may take fewer)

    def submit(self, prompt, params: SamplingParams | None = None, *, client: str | None = None, **kwargs) -> Request:
        """Validate and queue a request; iterate the returned handle for events, or call .result().

        `client` names who asks (an API peer, a page session), for per-client fairness."""
        raise NotImplementedError

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

    @property
    def load_info(self) -> dict:
        """Requests waiting and running."""
        raise NotImplementedError

    def health(self) -> dict:
        """What /health shows."""
        return self.load_info

    def close(self) -> None:
        raise NotImplementedError

    def check(self, p: SamplingParams) -> None:
        """What every engine refuses before it queues anything."""
        if p.n > self.config.max_n:
            raise InvalidRequest(f"Invalid 'n': integer above maximum value. Expected a value <= "
                                 f"{self.config.max_n}, but got {p.n} instead.", param="n",
                                 code="integer_above_max_value")

    def seeds(self, p: SamplingParams) -> list[int]:
        """Choice i's seed: seed + i, or, without a seed, a random base + i (every choice reports its own)."""
        base = p.seed if p.seed is not None else secrets.randbits(self.seed_bits)
        return [wrap_seed(base + i) for i in range(p.n)]
