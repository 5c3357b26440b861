"""The KV cache of one request: prefilled once at batch 1, forked to n rows, grown in place, trimmed to live rows.

Full-attention models get preallocated (static) layers, written in place each step instead of the
whole-cache torch.cat of DynamicCache; the preallocation grows by doubling, so a short answer never
pays for a long max_tokens. Other layer kinds (sliding windows, linear attention) use DynamicCache.
"""
import torch
from transformers import DynamicCache, StaticCache
from transformers.cache_utils import StaticLayer

FIRST_CHUNK = 128  # generated positions preallocated at first


class KVCache:
    def __init__(self, model, prompt_len: int, max_len: int):
        self.max_len = max_len  # prompt + the most tokens any row may generate
        static = StaticCache(config=model.config, max_cache_len=min(max_len, prompt_len + FIRST_CHUNK))
        self.static = all(type(layer) is StaticLayer for layer in static.layers)
        self.cache = static if self.static else DynamicCache(config=model.config)

    def fork(self, rows: int):
        """Copy the batch-1 prefix into `rows` rows (reorder_cache works for every layer type)."""
        self.cache.reorder_cache(torch.zeros(rows, dtype=torch.long))

    def keep(self, rows: list[int]):
        """Keep only these rows, in this order."""
        self.cache.reorder_cache(torch.tensor(rows, dtype=torch.long))

    def reserve(self, length: int):
        """Make room for `length` positions (static layers double their preallocation when full)."""
        if not self.static:
            return
        for layer in self.cache.layers:
            if layer.max_cache_len >= length:
                continue
            new_len = min(self.max_len, max(length, 2 * layer.max_cache_len))
            pad = new_len - layer.max_cache_len
            layer.keys = torch.nn.functional.pad(layer.keys, (0, 0, 0, pad))  # (B, H, L, D) along L
            layer.values = torch.nn.functional.pad(layer.values, (0, 0, 0, pad))
            layer.max_cache_len = new_len


def kv_bytes_per_token(model) -> int:
    """Bytes of keys and values one token occupies across all layers."""
    cfg = model.config.get_text_config(decoder=True)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * heads * head_dim * model.dtype.itemsize
