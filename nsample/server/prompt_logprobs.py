"""vLLM's `prompt_logprobs: k` extension on the wire: one entry per prompt token, the first null (nothing predicts
it), each other a dict `{token id: {"logprob", "rank", "decoded_token"}}` of the prompt's token followed by the k most
likely ones. (Legacy `echo` with `logprobs` puts the prompt's tokens into `logprobs`: completion_logprobs.py.)
"""
from nsample.outputs import TokenLogprob
from nsample.request import Request


def vllm_shape(req: Request, k: int | None) -> list[dict | None] | None:
    """vLLM's prompt_logprobs of a finished prefill, with k alternatives each (None: not asked for)."""
    if k is None or req.prompt_logprobs is None:
        return None
    return [None] + [_vllm_entry(t, k) for t in req.prompt_logprobs[1:]]


def _vllm_entry(t: TokenLogprob, k: int) -> dict:
    entry = {str(t.token_id): {"logprob": t.logprob, "rank": t.rank, "decoded_token": t.token}}
    for rank, (token_id, text, logprob) in enumerate(t.top[:k], start=1):
        entry.setdefault(str(token_id), {"logprob": logprob, "rank": rank, "decoded_token": text})
    return entry
