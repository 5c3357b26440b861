"""The KV cache of one request: the prompt prefilled once at batch 1, then n rows decoded on top of it.

Two layouts. Shared prefix (plain causal attention, see prefix_attention.py): the prompt's keys and
values are kept once and every row only stores what it generates. Forked (any other architecture):
the batch-1 cache is copied into n rows with reorder_cache, which works for every layer type. Rows'
own tokens go to preallocated static layers written in place (no whole-cache torch.cat per step),
grown by doubling so a short answer never pays for a long max_tokens; architectures whose layers are
not plain static ones (sliding windows, linear attention) use DynamicCache.
"""
import torch
from transformers import DynamicCache, StaticCache
from transformers.cache_utils import StaticLayer

FIRST_CHUNK = 128  # generated positions preallocated at first


class KVCache:
    def __init__(self, model, prompt_len: int, max_new: int, shared_prefix: bool):
        self.model, self.prompt_len, self.shared = model, prompt_len, shared_prefix
        self.max_len = max_new if shared_prefix else prompt_len + max_new  # positions the row cache may need
        first = (0 if shared_prefix else prompt_len) + FIRST_CHUNK
        static = StaticCache(config=model.config, max_cache_len=min(self.max_len, first))
        self.static = all(type(layer) is StaticLayer for layer in static.layers)
        self.rows = static if self.static else DynamicCache(config=model.config)  # what the rows write to
        self.prefix: list[tuple[torch.Tensor, torch.Tensor]] | None = None  # (1, Hkv, P, D) per layer

    def prefill(self, ids: torch.Tensor) -> torch.Tensor:
        """Run the prompt (1, P) once; return the last position's logits (1, V)."""
        cache = DynamicCache(config=self.model.config) if self.shared else self.rows
        logits = self.model(input_ids=ids, cache=cache, logits_to_keep=1).logits[:, -1]
        if self.shared:
            self.prefix = [(layer.keys, layer.values) for layer in cache.layers]
        return logits

    def fork(self, rows: int) -> None:
        """n rows on top of the prompt (the shared layout's row cache starts empty, at any batch size)."""
        if not self.shared:
            self.rows.reorder_cache(torch.zeros(rows, dtype=torch.long))

    def keep(self, rows: list[int]) -> None:
        """Keep only these rows, in this order."""
        self.rows.reorder_cache(torch.tensor(rows, dtype=torch.long))

    def decode(self, column: torch.Tensor, generated: int) -> torch.Tensor:
        """Forward one token per row (R,), the `generated`-th of each; return next-token logits (R, V)."""
        self._reserve(generated if self.shared else self.prompt_len + generated)
        if not self.shared:
            return self.model(input_ids=column[:, None], cache=self.rows).logits[:, -1]
        positions = torch.full((len(column), 1), self.prompt_len + generated - 1, device=column.device)
        return self.model(input_ids=column[:, None], cache=self.rows, position_ids=positions,
                          nsample_prefix=self.prefix, nsample_suffix_len=generated).logits[:, -1]

    def _reserve(self, length: int) -> None:
        """Make room for `length` positions (static layers double their preallocation when full)."""
        if not self.static:
            return
        for layer in self.rows.layers:
            if layer.max_cache_len >= length:
                continue
            new_len = min(self.max_len, max(length, 2 * layer.max_cache_len))
            if layer.is_initialized:
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
