"""Shared-prefix attention over a mixed batch: each request's prompt KV is stored once and read by all its rows.

With a plain forked cache every row reads its own copy of the prompt's KV at every step, so decode
reads n·(P+t) entries; here it reads P + n·t, and the prompt part becomes one matrix product per KV
head for all of a request's queries (the idea of Hydragen / FlashInfer cascade attention). The decode
batch holds the rows of several requests, grouped by cohort (the requests that started decoding at the same
step, whose own tokens share one buffer: `nsample/engine/cohort.py`), each request's rows one contiguous segment.
Per cohort: each request's prompt for all its queries at once, then all the cohort's rows' own tokens at once
(on a CPU, one flash-attention call per request's prompt and one for the own tokens, merged by their
log-sum-exps; elsewhere plain GEMMs and one softmax per request).
Prefills are packed the same way: the next prompt chunks of several requests run as one sequence, the
projections over all of it, the attention per chunk against its own request's prompt (`nsample_prefill`).
A layer with a sliding window W (Gemma 2 and 3's and OLMo 3's local layers, Mistral 7B v0.1's) attends, as
transformers' and llama.cpp's, to the keys of the W positions up to its own: of a decode row at position P + t - 1 (its
request's prompt P, its cohort's t generated tokens), the prompt's from P + t - W on and its own tokens from t - W on,
each one slice for the request's rows (`windowed`); of a prefill chunk, a band of its mask. Gemma 2's scores are
soft-capped (cap·tanh(s/cap) before the softmax, as its eager attention): its decode rows go by plain GEMMs (on a CPU a
row at a time, so that its numbers do not depend on how many rows its request has), its prefill chunks by `eager`.
gpt-oss has a learned sink per head (`s_aux`), one more logit in each softmax whose value is zero: on a CPU its decode
rows merge it as a third part beside the prompt's and their own tokens' (its log-sum-exp the sink, its output zero),
elsewhere it is one more column of the scores; its prefill chunks go by `eager` with the sinks (and no cap).
It is registered in transformers' AttentionInterface and only acts when the runner passes `nsample_batch` or
`nsample_prefill`; every other call (anyone else using the model) is plain SDPA with SDPA's masks (soft-capped or with
sinks: `eager`, with the same masks).
"""
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

from nsample.engine.cohort import Cohort
from nsample.engine.kv_cache import SharedKV

NAME = "nsample_shared_prefix"
FAMILIES = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "phi3", "granite", "olmo2", "smollm3", "qwen2_moe",
            "qwen3_moe", "gemma2", "gemma3_text", "olmo3", "gpt_oss"}  # causal attention, plain or in a sliding window
WINDOWED = {"gemma2", "gemma3_text", "olmo3", "mistral", "gpt_oss"}  # of those, the ones whose sliding windows this
# takes (not Gemma 3's bidirectional variant, EmbeddingGemma); Mistral 7B v0.1's on every layer


@dataclass
class Segment:
    start: int  # the request's rows in its cohort's rows: [start, stop)
    stop: int
    kv: SharedKV  # the request's prompt KV


@dataclass
class Group:
    start: int  # a cohort's rows in the decode batch: [start, stop)
    stop: int
    cohort: Cohort  # their generated tokens' KV
    segments: list[Segment]  # its requests, tiling its rows


@dataclass
class Chunk:
    start: int  # a chunk of the request's prompt in the packed prefill sequence: [start, stop)
    stop: int
    kv: SharedKV  # the request's prompt KV so far
    first: int  # the chunk's first position in its prompt


def shared_prefix_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                            nsample_batch=None, nsample_prefill=None, sliding_window=None, softcap=None, s_aux=None,
                            **kwargs):
    if nsample_prefill is not None:
        return packed_prefill_attention(module, query, key, value, scaling, nsample_prefill, sliding_window, softcap,
                                        s_aux)
    if nsample_batch is None and (softcap is not None or s_aux is not None):  # SDPA's boolean mask (None: causal)
        return eager(query, key, value, attention_mask, scaling, softcap, s_aux).transpose(1, 2), None
    if nsample_batch is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      sliding_window=sliding_window, **kwargs)
    query = query * (scaling if scaling is not None else query.shape[-1] ** -0.5)  # (B, H, 1, D), scaled once
    out = torch.empty_like(query)  # (B, H, 1, D); the groups tile the batch
    for grp in nsample_batch:
        span, layer = slice(grp.start, grp.stop), module.layer_idx
        k, v = grp.cohort.append(layer, key[span], value[span])  # (rows, Hkv, t, D), this step's included
        prefixes = [windowed(*s.kv.prefix[layer], k.shape[2], sliding_window) for s in grp.segments]
        k, v = (x[:, :, max(0, x.shape[2] - (sliding_window or x.shape[2])):] for x in (k, v))  # the last W
        if query.device.type == "cpu" and softcap is None:
            attend_cpu(query[span], [(s.start, s.stop, *p) for s, p in zip(grp.segments, prefixes)], k, v, out[span],
                       s_aux)
            continue
        for s, p in zip(grp.segments, prefixes):
            each = [(s.start, s.stop)] if query.device.type != "cpu" else [(r, r + 1) for r in range(s.start, s.stop)]
            for a, b in each:  # the request's rows together, or on a CPU (soft-capped) each alone
                rows = slice(grp.start + a, grp.start + b)
                attend(query[rows], *p, k[a:b], v[a:b], out=out[rows], softcap=softcap, sinks=s_aux)
    return out.transpose(1, 2), None  # (B, 1, H, D)


def windowed(k_p: torch.Tensor, v_p: torch.Tensor, t: int, window: int | None):
    """A request's prompt keys and values (1, Hkv, P, D) that its rows at position P + t - 1 see: all of them, or
    in a sliding window those from P + t - window on (none once t reaches the window)."""
    first = 0 if window is None else min(k_p.shape[2], max(0, k_p.shape[2] + t - window))
    return k_p[:, :, first:], v_p[:, :, first:]


def packed_prefill_attention(module, query, key, value, scaling, chunks: list[Chunk], window: int | None = None,
                             softcap: float | None = None, sinks: torch.Tensor | None = None):
    """Prompt chunks of several requests packed into one sequence (1, H, T, D): each chunk attends causally to
    its own request's prompt only (in a sliding window, to the `window` positions up to each query's own), with
    the same attention call as when it is prefilled alone (soft-capped or with sinks: `eager`)."""
    out = torch.empty_like(query)  # (1, H, T, D)
    for c in chunks:
        span = slice(c.start, c.stop)
        k, v = c.kv.extend(module.layer_idx, c.first, key[:, :, span], value[:, :, span])  # (1, Hkv, P0 + C, D)
        C, P = c.stop - c.start, k.shape[2]
        binds = window is not None and window < P  # else every query sees all its prompt so far: plain causal
        mask = None if C == P and not binds else torch.ones(C, P, dtype=torch.bool, device=query.device).tril(P - C)
        if binds:  # query i, at position P - C + i, sees keys P - C + i - window < j <= P - C + i
            mask = mask.triu(P - C - window + 1)
        if softcap is not None or sinks is not None:
            out[:, :, span] = eager(query[:, :, span], k, v, mask, scaling, softcap, sinks)
            continue
        out[:, :, span] = torch.nn.functional.scaled_dot_product_attention(
            query[:, :, span], k, v, attn_mask=mask, is_causal=mask is None, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2), None  # (1, T, H, D)


def eager(query, key, value, mask, scaling, softcap: float | None, sinks: torch.Tensor | None = None) -> torch.Tensor:
    """Attention as Gemma 2's and gpt-oss's eager attention: queries (B, H, Q, D) over keys and values (B, Hkv, K, D),
    `mask` a boolean (·, ·, Q, K) of the keys each query sees (None: causal, the last Q positions), the scores
    soft-capped by `softcap` where given, a sink logit per head (H,) beside them where `sinks` is given. Returns
    (B, H, Q, D)."""
    (B, H, Q, _), K = query.shape, key.shape[2]
    g = H // key.shape[1]
    scores = query @ key.repeat_interleave(g, 1).transpose(-1, -2) * (scaling or query.shape[-1] ** -0.5)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap  # (B, H, Q, K)
    if mask is None:
        mask = torch.ones(Q, K, dtype=torch.bool, device=query.device).tril(K - Q)
    scores = scores.masked_fill(~mask, -torch.inf)
    if sinks is not None:  # one more logit, of an output of zero
        scores = torch.cat([scores, sinks.to(scores.dtype).view(1, H, 1, 1).expand(B, H, Q, 1)], -1)
    weights = scores.float().softmax(-1).to(query.dtype)[..., :K]
    return weights @ value.repeat_interleave(g, 1)


def attend(query, k_p, v_p, k, v, out, softcap: float | None = None, sinks: torch.Tensor | None = None):
    """One request's rows: scaled queries (R, H, 1, D) over its prompt (1, Hkv, P, D) and their own tokens
    (R, Hkv, L, D), scores soft-capped by `softcap` if given, a sink logit per head (H,) beside them if given,
    written to out (R, H, 1, D)."""
    R, H, _, D = query.shape
    Hkv, P = k_p.shape[1], k_p.shape[2]
    g = H // Hkv
    q = query.view(R, Hkv, g, D)
    q_heads = q.transpose(0, 1).reshape(1, Hkv, R * g, D)  # all rows' queries, per KV head (a view when R=1)
    s_prefix = (q_heads @ k_p.transpose(-1, -2)).view(Hkv, R, g, P).transpose(0, 1)  # (R, Hkv, g, P)
    s_suffix = q @ k.transpose(-1, -2)  # (R, Hkv, g, L): each row's own tokens
    w = torch.cat([s_prefix, s_suffix], -1)  # (R, Hkv, g, P + L)
    w = w if softcap is None else torch.tanh(w / softcap) * softcap
    if sinks is not None:  # one more column, of an output of zero
        w = torch.cat([w, sinks.to(w.dtype).view(1, Hkv, g, 1).expand(R, Hkv, g, 1)], -1)
    w = w.float().softmax(-1).to(q.dtype)
    w_heads = w[..., :P].transpose(0, 1).reshape(1, Hkv, R * g, P)
    prefix = (w_heads @ v_p).view(Hkv, R, g, D).transpose(0, 1)  # (R, Hkv, g, D)
    torch.add(prefix, w[..., P:P + k.shape[2]] @ v, out=out.view(R, Hkv, g, D))


def attend_cpu(query, prefixes, k, v, out, sinks: torch.Tensor | None = None):
    """attend() for a cohort's rows in fewer kernels, for the CPU: scaled queries (R, H, 1, D) of several
    requests, `prefixes` giving each request's rows [start, stop) and prompt (1, Hkv, P, D). Each prompt part is
    one flash-attention call per request, the own-token part one call for all rows (R, Hkv, L, D); the parts
    are merged by their log-sum-exps (as in Hydragen) into out (R, H, 1, D), with a third part of output zero and
    log-sum-exp the head's sink where `sinks` (H,) is given (gpt-oss)."""
    R, H, _, D = query.shape
    Hkv = k.shape[1]
    g = H // Hkv
    q = query.view(R, Hkv, g, D)
    own, lse_own = FLASH_CPU(q, k, v, scale=1.0)[:2]  # (R, Hkv, g, D), (R, Hkv, g)
    # Each row's log-sum-exps padded to a multiple of 32: ATen's elementwise loops run whole SIMD chunks and
    # finish a tail with scalar code whose exp rounds differently, so every row must sit on the same chunks
    # whatever the number of rows, or a row's numbers would depend on the others'.
    heads, width = Hkv * g, -(-Hkv * g // 32) * 32
    lse = torch.zeros(2, R, width, dtype=lse_own.dtype, device=q.device)  # the prompt's over the own tokens'
    lse[1, :, :heads].view(R, Hkv, g).copy_(lse_own)
    prefix = torch.empty_like(own)  # the prompt parts, in row order
    for start, stop, k_p, v_p in prefixes:
        n = stop - start
        if k_p.shape[2] == 0:  # a window past its prompt: the own tokens' part alone
            prefix[start:stop], lse[0, start:stop] = 0, -torch.inf
            continue
        q_heads = q[start:stop].transpose(0, 1).reshape(1, Hkv, n * g, D)  # all its rows' queries, per KV head
        o, lse_p = prompt_flash(q_heads, k_p, v_p)  # (1, Hkv, n·g, D), (1, Hkv, n·g)
        prefix[start:stop] = o.view(Hkv, n, g, D).transpose(0, 1)
        lse[0, start:stop, :heads].view(n, Hkv, g).copy_(lse_p.view(Hkv, n, g).transpose(0, 1))
    w_prefix, w_own = merge_weights(lse, sinks)
    w_prefix, w_own = (w[:, :heads].view(R, Hkv, g, 1).to(q.dtype) for w in (w_prefix, w_own))
    torch.addcmul(prefix * w_prefix, own, w_own, out=out.view(R, Hkv, g, D))


def merge_weights(lse: torch.Tensor, sinks: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompt part's and the own tokens' weights (R, width) from their log-sum-exps lse (2, R, width): the
    two-way softmax of the two, or with `sinks` (H,: the first H of each row's width) the three-way one with the
    sink's. Elementwise on rows of whole SIMD chunks, so a row's weights never depend on the others'."""
    gap = lse[1] - lse[0]  # (R, width)
    if sinks is None:
        return torch.sigmoid(-gap), torch.sigmoid(gap)
    sink = torch.zeros_like(lse[0])  # (R, width): each row's sinks in its first H places
    sink[:, :len(sinks)] = sinks.to(sink.dtype)
    top = torch.maximum(torch.maximum(lse[0], lse[1]), sink)
    e_prefix, e_own = (lse - top).exp()  # (R, width) each
    total = e_prefix + e_own + (sink - top).exp()
    return e_prefix / total, e_own / total


FLASH_CPU = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu  # returns (out, logsumexp)
QUERIES = 32  # ATen's flash kernel takes queries in blocks of 32 (below 192 queries) into MKL GEMMs


def prompt_flash(q, k, v):
    """FLASH_CPU of queries (1, Hkv, Q, D) over a prompt, in calls of exactly QUERIES queries (the last padded with
    zeros): MKL rounds a GEMM row differently at different row counts (seen on an AMD EPYC: a row alone and among
    its request's rows differed by 3e-8), and with every call the same shape a query's numbers do not depend on how
    many rows its request has."""
    Q = q.shape[2]
    if Q % QUERIES:
        q = torch.cat([q, q.new_zeros(*q.shape[:2], QUERIES - Q % QUERIES, q.shape[3])], 2)
    parts = [FLASH_CPU(q[:, :, i:i + QUERIES], k, v, scale=1.0)[:2] for i in range(0, q.shape[2], QUERIES)]
    return torch.cat([o for o, _ in parts], 2)[:, :, :Q], torch.cat([lse for _, lse in parts], 2)[:, :, :Q]


def enable(model) -> bool:
    """Switch `model` to shared-prefix attention if its architecture is causal attention, plain or (WINDOWED) in a
    sliding window on some layers, its scores soft-capped or not."""
    cfg = model.config.get_text_config(decoder=True)
    layer_types = getattr(cfg, "layer_types", None)
    window = getattr(cfg, "sliding_window", None)  # Phi-3.5's 262144 never binds in its 131072 positions
    windowed = (set(layer_types) != {"full_attention"} if layer_types else
                bool(window) and window < cfg.max_position_embeddings)
    plain_window = cfg.model_type in WINDOWED and not getattr(cfg, "use_bidirectional_attention", False)
    if cfg.model_type not in FAMILIES or (windowed and not plain_window):
        return False
    AttentionInterface.register(NAME, shared_prefix_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
    return True
