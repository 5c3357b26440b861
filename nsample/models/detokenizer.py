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
        self.pending: list[int] = []  # tokens the stream holds back: so far part of a character

    def add(self, token_id: int) -> str | None:
        """Append a token; return the stop string if the text now contains one (text is cut before it)."""
        piece = self.stream.step(self.tokenizer, token_id)
        if not piece:
            self.pending.append(token_id)
            return None
        self.pending.clear()
        start = max(0, len(self.text) - self.hold)
        self.text += piece
        hits = [(at, s) for s in self.stop if (at := self.text.find(s, start)) != -1]
        if hits:
            at, self.stop_hit = min(hits)
            self.text = self.text[:at]
        return self.stop_hit

    def delta(self, final: bool) -> str:
        """The text not yet handed out, holding back a tail that could start a stop string. The final one ends in
        "\ufffd" where the choice ends inside a character (cut by max_tokens or eos), as tokenizer.decode() and
        OpenAI give it."""
        if final and self.pending and self.stop_hit is None:
            self.text += self.tokenizer.decode(self.pending, skip_special_tokens=True)
            self.pending.clear()
        end = len(self.text) if final or not self.stop else max(self.emitted, len(self.text) - self.hold)
        out = self.text[self.emitted:end]
        self.emitted = end
        return out
