"""Shared-prefix attention: the prompt's keys and values are stored once, and all n rows read them in one GEMM.

With a plain forked cache every row reads its own copy of the prompt's KV at every step, so decode
reads n·(P+t) entries; here it reads P + n·t, and the prompt part becomes one matrix product per KV
head for all rows' queries (the idea of Hydragen / FlashInfer cascade attention). It is registered in
transformers' AttentionInterface and only acts when the decode step passes `nsample_prefix`; every
other call (the prefill, or anyone else using the model) is plain SDPA with SDPA's masks.
"""
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

NAME = "nsample_shared_prefix"
FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "phi3", "granite", "olmo2", "smollm3"}  # plain causal attention


def shared_prefix_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                            nsample_prefix=None, nsample_suffix_len=None, **kwargs):
    if nsample_prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    k_p, v_p = nsample_prefix[module.layer_idx]  # (1, Hkv, P, D): the prompt, stored once
    R, H, _, D = query.shape  # one new token per row
    Hkv, P, L = key.shape[1], k_p.shape[2], nsample_suffix_len
    g = H // Hkv
    q = query.reshape(R, Hkv, g, D) * (scaling if scaling is not None else D**-0.5)  # (R, Hkv, g, D)
    q_heads = q.transpose(0, 1).reshape(1, Hkv, R * g, D)  # all rows' queries, per KV head
    s_prefix = (q_heads @ k_p.transpose(-1, -2)).reshape(Hkv, R, g, P).transpose(0, 1)  # (R, Hkv, g, P)
    s_suffix = q @ key[:, :, :L].transpose(-1, -2)  # (R, Hkv, g, L): each row's own tokens
    w = torch.cat([s_prefix, s_suffix], -1).float().softmax(-1).to(q.dtype)  # (R, Hkv, g, P + L)
    w_heads = w[..., :P].transpose(0, 1).reshape(1, Hkv, R * g, P)
    out = (w_heads @ v_p).reshape(Hkv, R, g, D).transpose(0, 1) + w[..., P:] @ value[:, :, :L]  # (R, Hkv, g, D)
    return out.reshape(R, H, 1, D).transpose(1, 2), None  # (R, 1, H, D)


def enable(model) -> bool:
    """Switch `model` to shared-prefix attention if its architecture is plain causal attention."""
    cfg = model.config.get_text_config(decoder=True)
    layer_types = getattr(cfg, "layer_types", None)
    windowed = set(layer_types) != {"full_attention"} if layer_types else bool(getattr(cfg, "sliding_window", None))
    if cfg.model_type not in FAMILIES or windowed:
        return False
    AttentionInterface.register(NAME, shared_prefix_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)
    return True
