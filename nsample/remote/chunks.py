"""Reading upstream chunks: each choice's text delta, logprobs and finish reason, and the usage."""
from nsample.outputs import StreamEvent, TokenLogprob, Usage

UNKNOWN_ID = -1  # remote upstreams name tokens by text; their ids stay unknown


def choice_event(choice: dict) -> StreamEvent:
    """The event of one chunk choice, with the upstream's own index (and its stop string or token id, if reported)."""
    if "delta" in choice or "message" in choice:  # chat: a streamed delta, or a whole message
        text = (choice.get("delta") or choice.get("message") or {}).get("content") or ""
    else:
        text = choice.get("text") or ""
    return StreamEvent(index=int(choice.get("index") or 0), text=text, logprobs=_logprobs(choice.get("logprobs")),
                       finish_reason=choice.get("finish_reason"), stop_reason=choice.get("stop_reason"))


def chunk_usage(chunk: dict) -> Usage | None:
    u = chunk.get("usage")
    if not isinstance(u, dict) or u.get("completion_tokens") is None:
        return None
    return Usage(prompt_tokens=int(u.get("prompt_tokens") or 0), completion_tokens=int(u["completion_tokens"]))


def _logprobs(lp) -> list[TokenLogprob] | None:
    if not isinstance(lp, dict):
        return None
    if isinstance(lp.get("content"), list):  # chat: [{token, logprob, top_logprobs: [{token, logprob}]}]
        return [TokenLogprob(UNKNOWN_ID, e["token"], e["logprob"],
                             [(UNKNOWN_ID, t["token"], t["logprob"]) for t in e.get("top_logprobs") or []],
                             token_bytes=_bytes(e), top_bytes=[_bytes(t) for t in e.get("top_logprobs") or []])
                for e in lp["content"]]
    tokens = lp.get("tokens") or []  # completions: parallel lists, top_logprobs as {token: logprob}
    tops = lp.get("top_logprobs") or [None] * len(tokens)
    return [TokenLogprob(UNKNOWN_ID, tok, value if value is not None else float("nan"),
                         sorted([(UNKNOWN_ID, t, v) for t, v in (top or {}).items()], key=lambda x: -x[2]))
            for tok, value, top in zip(tokens, lp.get("token_logprobs") or [], tops)]


def _bytes(entry: dict) -> bytes | None:
    """An upstream entry's own `bytes`, when it sent them (else the token's text is all there is)."""
    data = entry.get("bytes")
    return bytes(data) if isinstance(data, list) and all(isinstance(b, int) and 0 <= b < 256 for b in data) else None
