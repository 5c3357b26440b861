"""A partial rotary embedding (Phi-4-mini turns 96 of each head's 128 dimensions) made one that turns whole heads,
so the fused C++ decode, which turns every dimension of a head (x·cos + rotate_half(x)·sin), runs such a model.

transformers turns the first R dimensions of each q and k head, pairing dimension i with i + R/2, and passes the
other D - R through. A q·k product does not change when q and k have their dimensions in another order, the same
for both. So the q and k rows of the projection are put in the order that pairs i with i + D/2 (`head_order`: the
first R/2 turned dimensions, then the first half of the passed ones, then the other R/2 turned, then the other
passed), and cos and sin are made D wide in that order (`WholeHeadRotary`), 1 and 0 where a dimension passes. Every
path then turns whole heads: the model's own modules (transformers' apply_rotary_pos_emb takes its width from cos),
the shared-prefix attention and the fused decode. The values are the model's own; only the order of the sums in
q·k changes, so the logits stay within float32 noise of transformers' forward.
"""
import torch
from torch import nn


def head_order(D: int, R: int) -> torch.Tensor:
    """(D,) the new order of one head's dimensions: new dimension j is old dimension head_order[j]."""
    h, p = R // 2, (D - R) // 2
    return torch.cat([torch.arange(0, h), torch.arange(R, R + p), torch.arange(h, R), torch.arange(R + p, D)])


def qk_rows(heads: int, kv_heads: int, D: int, R: int, rows: int) -> torch.Tensor:
    """(rows,) the row order of a q|k|v projection (Phi 3's qkv_proj: q's heads, then k's, then v's, untouched) or of
    a q or k projection alone (rows = heads·D or kv_heads·D)."""
    order = head_order(D, R)
    turned = (heads + kv_heads) * D if rows == (heads + 2 * kv_heads) * D else rows
    per_head = torch.arange(0, turned, D)[:, None] + order[None]  # (heads, D)
    return torch.cat([per_head.reshape(-1), torch.arange(turned, rows)])


class WholeHeadRotary(nn.Module):
    """The model's rotary embedding (`inner`, R wide), its cos and sin made D wide in head_order's order."""

    def __init__(self, inner: nn.Module, D: int, R: int):
        super().__init__()
        self.inner, self.D, self.R = inner, D, R

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.inner(x, position_ids)  # (B, T, R) each: one frequency per pair, written twice
        h, p = self.R // 2, (self.D - self.R) // 2
        one, zero = cos.new_ones(*cos.shape[:-1], p), sin.new_zeros(*sin.shape[:-1], p)
        return (torch.cat([cos[..., :h], one, cos[..., h:], one], -1),  # (B, T, D) each
                torch.cat([sin[..., :h], zero, sin[..., h:], zero], -1))


def rotary_size(config) -> tuple[int, int]:
    """(D, R): a head's size and how many of its dimensions the config's rotary embedding turns."""
    D = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return D, int(D * config.rope_parameters.get("partial_rotary_factor", 1.0))


def turnable(config, biased: bool) -> tuple[int, int] | None:
    """(D, R) where the config's rotary embedding turns part of each head and its q/k rows can be put in head_order
    (`biased`: a bias on them, which this does not move), else None."""
    D, R = rotary_size(config)
    return (D, R) if R < D and R % 2 == 0 and (D - R) % 2 == 0 and not biased else None


def install(model: nn.Module) -> None:
    """Swap the model's partial rotary embedding for a WholeHeadRotary; its q/k rows must be in qk_rows' order."""
    D, R = rotary_size(model.config)
    model.model.rotary_emb = WholeHeadRotary(model.model.rotary_emb, D, R)
