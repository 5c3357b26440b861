"""Incremental detokenization of one choice, with stop strings held back until they can be ruled out."""
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream


class Detokenizer:
    """Turns one row's tokens into text; finds stop strings; hands out deltas that never leak one."""

    def __init__(self, tokenizer: Tokenizer, prompt_ids: list[int], stop: tuple[str, ...]):
        self.tokenizer = tokenizer
        self.stream = DecodeStream(ids=prompt_ids[-8:], skip_special_tokens=True)
        self.stop = stop
        self.hold = max((len(s) for s in stop), default=1) - 1
        self.text = ""
        self.emitted = 0
        self.stop_hit: str | None = None

    def add(self, token_id: int) -> str | None:
        """Append a token; return the stop string if the text now contains one (text is cut before it)."""
        piece = self.stream.step(self.tokenizer, token_id)
        if not piece:
            return None
        start = max(0, len(self.text) - self.hold)
        self.text += piece
        hits = [(at, s) for s in self.stop if (at := self.text.find(s, start)) != -1]
        if hits:
            at, self.stop_hit = min(hits)
            self.text = self.text[:at]
        return self.stop_hit

    def delta(self, final: bool) -> str:
        """The text not yet handed out, holding back a tail that could start a stop string. The text is whole
        characters: one the choice ends inside of (max_tokens or eos after part of its bytes) is left out, as vLLM's
        detokenizer leaves it; the logprobs' `bytes` hold that part."""
        end = len(self.text) if final or not self.stop else max(self.emitted, len(self.text) - self.hold)
        out = self.text[self.emitted:end]
        self.emitted = end
        return out
