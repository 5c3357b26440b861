"""The KV cache of one running request: its prompt prefilled once at batch 1, then its rows decoded on top.

Two layouts. SharedKV (causal attention, plain or in a sliding window, see prefix_attention.py): the prompt's keys and
values are kept once and every row only stores what it generates, in the buffers of its cohort
(`nsample/engine/cohort.py`: the requests that started decoding at the same step), preallocated and grown by doubling
(so a short answer never pays for a long max_tokens, and no step copies the whole cache). Its rows join the engine's one
batched decode forward, and its prompt chunks join the packed prefill forward (`extend` stores a chunk's keys and values
in buffers made for the whole prompt). ForkedKV (any other architecture): the batch-1 cache is copied into n rows with
reorder_cache, which works for every layer type, and the request is prefilled and decoded in forwards of its own. Both
prefill in chunks, so a long prompt never stalls the running streams for long.
"""
import torch
from transformers import DynamicCache, StaticCache
from transformers.cache_utils import StaticLayer

from nsample.engine.cohort import FIRST_CHUNK


class SharedKV:
    def __init__(self, model, prompt_len: int, max_new: int):
        self.max_new = max_new
        layers, heads, dim = kv_shape(model)
        size, like = (1, heads, prompt_len, dim), dict(dtype=model.dtype, device=model.device)
        # (1, Hkv, P, D) per layer for the whole prompt: a chunk's are stored at its positions (`extend`, or the C++
        # prefill's kernel), and nothing reads a position before it is stored
        self.buffers = [(torch.empty(size, **like), torch.empty(size, **like)) for _ in range(layers)]
        self.prefix: list[tuple[torch.Tensor, torch.Tensor]] = []  # the same, once prefilled
        self.cohort = None  # where the rows' generated keys and values live, from their first decode step on
        self.slots: list[int] = []  # each row's place in the cohort's buffers, in row order (one per row)

    def extend(self, layer: int, first: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor,
                                                                                           torch.Tensor]:
        """Store a prompt chunk's keys and values (1, Hkv, C, D) from position `first`; return the prompt's so far
        (1, Hkv, first + C, D)."""
        keys, values = self.buffers[layer]
        stop = first + key.shape[2]
        keys[:, :, first:stop] = key
        values[:, :, first:stop] = value
        return keys[:, :, :stop], values[:, :, :stop]

    def fork(self, rows: int) -> None:
        """The prompt is prefilled: keep its KV once, for `rows` rows to decode on top of it."""
        self.prefix, self.slots = self.buffers, list(range(rows))  # placed for real when it joins a cohort

    def keep(self, rows: list[int]) -> None:
        """Keep only these rows, in this order (the cohort drops the others before the next decode step)."""
        self.slots = [self.slots[i] for i in rows]


class ForkedKV:
    def __init__(self, model, prompt_len: int, max_new: int):
        self.model, self.prompt_len = model, prompt_len
        self.max_len = prompt_len + max_new  # positions a row may need
        static = StaticCache(config=model.config, max_cache_len=min(self.max_len, prompt_len + FIRST_CHUNK))
        self.static = all(type(layer) is StaticLayer for layer in static.layers)
        self.cache = static if self.static else DynamicCache(config=model.config)  # sliding/linear layers: dynamic
        self.prefilled = 0

    def prefill(self, ids: torch.Tensor, all_logits: bool = False) -> torch.Tensor:
        """Run the next chunk of the prompt (1, C); return its last position's logits (1, V), or all of them (C, V)."""
        positions = torch.arange(self.prefilled, self.prefilled + ids.shape[1], device=ids.device)[None]
        self.prefilled += ids.shape[1]
        return self.model(input_ids=ids, cache=self.cache, position_ids=positions,
                          logits_to_keep=0 if all_logits else 1).logits[0]

    def fork(self, rows: int) -> None:
        self.cache.reorder_cache(torch.zeros(rows, dtype=torch.long))

    def keep(self, rows: list[int]) -> None:
        self.cache.reorder_cache(torch.tensor(rows, dtype=torch.long))

    def decode(self, column: torch.Tensor, generated: int) -> torch.Tensor:
        """Forward one token per row (W,), the `generated`-th of each; return next-token logits (W, V)."""
        self._reserve(self.prompt_len + generated)
        positions = torch.full((len(column), 1), self.prompt_len + generated - 1, device=column.device)
        return self.model(input_ids=column[:, None], cache=self.cache, position_ids=positions).logits[:, -1]

    def _reserve(self, length: int) -> None:
        """Make room for `length` positions (static layers double their preallocation when full)."""
        if not self.static:
            return
        for layer in self.cache.layers:
            if layer.max_cache_len >= length:
                continue
            new_len = min(self.max_len, max(length, 2 * layer.max_cache_len))
            if layer.is_initialized:
                pad = new_len - layer.max_cache_len
                layer.keys = torch.nn.functional.pad(layer.keys, (0, 0, 0, pad))  # (B, H, L, D) along L
                layer.values = torch.nn.functional.pad(layer.values, (0, 0, 0, pad))
            layer.max_cache_len = new_len


def kv_shape(model) -> tuple[int, int, int]:
    """Layers, key/value heads and head dim of `model`'s KV cache."""
    cfg = model.config.get_text_config(decoder=True)
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return cfg.num_hidden_layers, heads, head_dim


def kv_bytes_per_token(model) -> int:
    """Bytes of keys and values one token occupies across all layers."""
    layers, heads, head_dim = kv_shape(model)
    return 2 * layers * heads * head_dim * model.dtype.itemsize
