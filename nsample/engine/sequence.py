"""One row of the decode batch: the choice (or identical greedy choices) it produces, token by token."""
from nsample.models.detokenizer import Detokenizer
from nsample.outputs import StreamEvent, TokenLogprob
from nsample.sampling_params import SamplingParams


class Row:
    def __init__(self, indices: list[int], seeds: list[int], prompt_ids: list[int], params: SamplingParams,
                 tokenizer, max_new: int, eos_ids: set[int]):
        self.indices, self.seeds = indices, seeds  # several indices only for greedy rows (all identical)
        self.params = params
        self.detok = Detokenizer(tokenizer.backend_tokenizer, prompt_ids, params.stop)
        self.max_new = max_new
        self.stop_ids = set() if params.ignore_eos else eos_ids
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprob] | None = [] if params.logprobs else None
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def append(self, token: int, logprob: TokenLogprob | None, complete: bool = False) -> list[StreamEvent]:
        """Take one sampled token; return the events it makes, one per choice this row serves. `complete`: the
        row's grammar allows nothing after this token, so the row stops here."""
        self.token_ids.append(token)
        if logprob is not None:
            self.logprobs.append(logprob)
        if token in self.stop_ids:
            self.finish_reason, self.stop_reason = "stop", token
        elif (hit := self.detok.add(token)) is not None:
            self.finish_reason, self.stop_reason = "stop", hit
        elif complete:
            self.finish_reason = "stop"
        elif len(self.token_ids) >= self.max_new:
            self.finish_reason = "length"
        delta = self.detok.delta(final=self.finished)
        lps = [logprob] if logprob is not None else None
        return [StreamEvent(index=i, text=delta, token_ids=[token], logprobs=lps, finish_reason=self.finish_reason,
                            seed=s, stop_reason=self.stop_reason) for i, s in zip(self.indices, self.seeds)]

    def cancel(self) -> None:
        self.finish_reason = self.finish_reason or "cancelled"
