"""What generation returns: choices, usage, timings and the streamed events."""
from dataclasses import dataclass, field

from nsample.sampling_params import SamplingParams


@dataclass
class TokenLogprob:
    token_id: int
    token: str  # the token's own bytes as text (a partial UTF-8 character shows as U+FFFD)
    logprob: float  # log-probability under the model's distribution (before sampling filters)
    top: list[tuple[int, str, float]] = field(default_factory=list)  # (id, text, logprob), best first
    token_bytes: bytes | None = None  # the token's own bytes (None: unknown, e.g. relayed without them)
    top_bytes: list[bytes | None] | None = None  # the bytes of each `top` entry, in its order
    rank: int | None = None  # the token's rank in the distribution (1 = most likely), where computed (prompts)

    @property
    def own_bytes(self) -> bytes:
        """The token's bytes; relayed without them, its text's."""
        return self.token_bytes if self.token_bytes is not None else self.token.encode(errors="surrogatepass")

    @property
    def top_own_bytes(self) -> list[bytes]:
        """Each `top` entry's bytes, in its order; relayed without them, its text's."""
        given = self.top_bytes if self.top_bytes is not None else [None] * len(self.top)
        return [b if b is not None else text.encode(errors="surrogatepass") for (_, text, _), b in zip(self.top, given)]


@dataclass
class Choice:
    index: int
    seed: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None  # "stop" | "length" | None while running
    logprobs: list[TokenLogprob] | None = None
    stop_reason: str | int | None = None  # the stop string or token id that ended the choice
    counted_tokens: int | None = None  # relayed without token ids (a remote engine): logprobs or text chunks counted

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids) if self.counted_tokens is None else self.counted_tokens

    @property
    def mean_logprob(self) -> float | None:
        if not self.logprobs:
            return None
        return sum(t.logprob for t in self.logprobs) / len(self.logprobs)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens}


@dataclass
class Timings:
    queued_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    completion_tokens: int = 0

    @property
    def tokens_per_s(self) -> float:
        busy = self.prefill_s + self.decode_s
        return self.completion_tokens / busy if busy > 0 else 0.0


@dataclass
class StreamEvent:
    """One step's news for one choice: a text delta, its tokens, and the finish reason once it ends."""

    index: int
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    seed: int | None = None
    stop_reason: str | int | None = None  # with finish_reason "stop": the stop string or token id that ended it

    @property
    def token_count(self) -> int:
        """Tokens this event stands for: its ids; relayed without ids (a remote engine), one per logprob entry,
        else one per text chunk."""
        return len(self.token_ids) or (len(self.logprobs) if self.logprobs else int(bool(self.text)))


@dataclass
class GenerationResult:
    prompt_token_ids: list[int]
    choices: list[Choice]
    usage: Usage
    timings: Timings
    model: str = ""
    prompt: object = None  # as submitted: text, chat messages (a list, or a prompts.Chat), token ids; None: unknown
    params: SamplingParams | None = None  # the request's sampling settings
    prompt_logprobs: list[TokenLogprob | None] | None = None  # with params.prompt_logprobs: per prompt token, the
    # first None (nothing predicts it)

    def to_dataframe(self):
        """One row per choice: index, seed, text, tokens, finish reason, mean logprob."""
        import pandas as pd

        rows = [{"index": c.index, "seed": c.seed, "text": c.text, "completion_tokens": c.completion_tokens,
                 "finish_reason": c.finish_reason, "mean_logprob": c.mean_logprob} for c in self.choices]
        return pd.DataFrame(rows, columns=["index", "seed", "text", "completion_tokens", "finish_reason",
                                           "mean_logprob"])
