"""The legacy completions `logprobs` object: parallel lists of tokens, their logprobs, their top-k dicts and their
offsets in the choice's text.

With `echo` and `logprobs: k` (OpenAI's old scoring recipe, and how lm-eval-harness's `local-completions` scores
loglikelihood requests) the echoed prompt's tokens lead each choice's object, the first with `token_logprobs` and
`top_logprobs` null (nothing predicts it), then the choice's own tokens.
"""
import codecs

from nsample.models.token_bytes import legacy_token
from nsample.outputs import TokenLogprob
from nsample.request import Request
from nsample.server.responses import CompletionLogprobs


class TextOffsets:
    """Where each token starts in a choice's text (characters), counted on the tokens' own bytes, so a character
    split between tokens is counted once, when it completes."""

    def __init__(self, start: int):
        self.offset, self.decoder = start, codecs.getincrementaldecoder("utf-8")(errors="replace")

    def take(self, data: bytes) -> int:
        """The offset of a token with these bytes; advances past its complete characters."""
        at = self.offset
        self.offset += len(self.decoder.decode(data))
        return at


def logprobs(lps: list[TokenLogprob] | None, offsets: TextOffsets) -> CompletionLogprobs:
    """The legacy logprobs object: each top dict holds the top-k and the sampled token; a token that is part of a
    character is named by its bytes (`bytes:\\xe6\\x97`), as OpenAI does."""
    out = CompletionLogprobs(tokens=[], token_logprobs=[], top_logprobs=[], text_offset=[])
    for t in lps or []:  # (a text's own bytes are whole characters: legacy_token gives the text back)
        name = legacy_token(t.own_bytes)
        out.tokens.append(name)
        out.token_logprobs.append(t.logprob)
        out.top_logprobs.append({legacy_token(b): v for (_, _, v), b in zip(t.top, t.top_own_bytes)}
                                | {name: t.logprob})
        out.text_offset.append(offsets.take(t.own_bytes))
    return out


def legacy_prompt(req: Request, k: int, first: bytes, offsets) -> CompletionLogprobs:
    """The echoed prompt's part of a legacy logprobs object; `first` is the first prompt token's bytes, `offsets`
    a TextOffsets at 0, advanced over the prompt's tokens."""
    head = CompletionLogprobs(tokens=[legacy_token(first)], token_logprobs=[None], top_logprobs=[None],
                              text_offset=[offsets.take(first)])
    return joined(head, logprobs(trimmed(req.prompt_logprobs[1:], k), offsets))


def trimmed(entries: list[TokenLogprob], k: int) -> list[TokenLogprob]:
    """The entries with their alternatives cut to k (the engine computed as many as the larger request asked)."""
    return [TokenLogprob(t.token_id, t.token, t.logprob, t.top[:k], t.token_bytes,
                         None if t.top_bytes is None else t.top_bytes[:k], t.rank) for t in entries]


def joined(a: CompletionLogprobs, b: CompletionLogprobs) -> CompletionLogprobs:
    return CompletionLogprobs(tokens=a.tokens + b.tokens, token_logprobs=a.token_logprobs + b.token_logprobs,
                              top_logprobs=a.top_logprobs + b.top_logprobs, text_offset=a.text_offset + b.text_offset)
