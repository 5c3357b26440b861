"""Two-level int8 linear layers on oneDNN's prepacked int8 GEMM (AMX / VNNI), near float32 in quality.

A weight row w is stored as s1·q1 + s2·q2 (int8 q1, q2; per-output-channel scales, s2 = s1/254) and an
activation row x as t1·a1 + t2·a2 (int8 a1, a2; per-row scales computed at run time, t2 = t1/254): each
is exact to about 1/65000 of its row's largest value. One int8 GEMM of the stacked activations (2M, K)
against the stacked weights (2N, K) gives all four products with exact int32 sums; the float combine is
elementwise. So a row's output depends only on that row, bitwise, whatever the batch size.
"""
import torch
from torch import nn

from nsample.cpu import kernels

LEVEL = 254  # the second level's scale is the first's / LEVEL: the first level's rounding error fits in int8


def two_level(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 (2N, K): q1 over q2, float scales (2N,)) with w ≈ s1·q1 + s2·q2 row by row."""
    w = w.detach().float()
    s1 = w.abs().amax(1).clamp_min(torch.finfo(torch.float32).tiny) / 127  # (N,)
    u = w / s1[:, None]
    q1 = u.round()
    q2 = u.sub_(q1).mul_(LEVEL).round_()  # |u - q1| <= 0.5, so |q2| <= 127
    return torch.cat([q1.to(torch.int8), q2.to(torch.int8)]), torch.cat([s1, s1 / LEVEL])


def int8_gemm_available() -> bool:
    """Whether this torch build ships oneDNN's int8 linear ops (x86 CPU builds do)."""
    return hasattr(torch.ops.onednn, "qlinear_pointwise") and torch.backends.mkldnn.is_available()


class Int8Linear(nn.Module):
    """y = x·Wᵀ + b with W and x each as two int8 levels; one prepacked oneDNN int8 GEMM per call."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, keep_rows: bool = False):
        super().__init__()
        q, s = two_level(weight)
        self.out_features, self.in_features = weight.shape
        self.weight = torch.empty(weight.shape, device="meta")  # shape only: the data lives in `packed`
        self.bias = None if bias is None else nn.Parameter(bias.detach().float(), requires_grad=False)
        self.packed = torch.ops.onednn.qlinear_prepack(q, None)  # opaque blocked layout for the int8 GEMM
        self.register_buffer("scales", s)  # (2N,)
        self.register_buffer("zero_points", torch.zeros(len(s), dtype=torch.int32))
        self.rows = (q, s) if keep_rows else None  # plain rows, for an embedding tied to this weight
        fused = kernels.ops()  # built (once per machine) while the model loads, not at its first request
        # The C++ layer (csrc/linear.h), where the kernels could be built: the int8 GEMM with the float work around
        # it in two kernels; the fused decoder (fused_decode.py) takes it too.
        self.kernel = fused.int8_linear(self.packed, self.scales, self.zero_points, self.bias) if fused else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features).float().contiguous()  # (M, K)
        if self.kernel is not None:
            y = self.kernel(x2)  # (M, N)
        else:  # the same arithmetic in ATen ops
            levels, t1 = Eager.split_rows(x2)
            y = torch.ops.onednn.qlinear_pointwise(levels, 1.0, 0, self.packed, self.scales, self.zero_points, None,
                                                   1.0, 0, torch.float32, "none", [], "")  # (2M, 2N), w scales in
            y = Eager.join_levels(y, t1, self.bias)
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


class Eager:
    """The float work around the int8 GEMM in ATen ops: what csrc/int8_rows.cpp does in one kernel each."""

    @staticmethod
    def split_rows(x2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x2 (M, K) -> (int8 (2M, K): a1 over a2, t1 (M, 1)) with x2 ≈ t1·(a1 + a2/LEVEL) row by row."""
        M = len(x2)
        t1 = x2.abs().amax(-1, keepdim=True).clamp_min_(torch.finfo(torch.float32).tiny).div_(127)  # (M, 1)
        levels = torch.empty(2 * M, x2.shape[1])  # (2M, K): a1 over a2
        u = torch.div(x2, t1, out=levels[M:])
        torch.round(u, out=levels[:M])
        u.sub_(levels[:M]).mul_(LEVEL).round_()
        return levels.to(torch.int8), t1

    @staticmethod
    def join_levels(y: torch.Tensor, t1: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """y (2M, 2N): (a1 over a2) against (w1 | w2) -> (M, N), both levels of both sides, times t1, plus bias."""
        M, N = len(y) // 2, y.shape[1] // 2
        z = y[:, :N] + y[:, N:]  # (2M, N): both weight levels
        out = torch.add(z[:M], z[M:], alpha=1 / LEVEL).mul_(t1)  # (M, N): both activation levels
        return out if bias is None else out.add_(bias)


class Int8Embedding(nn.Module):
    """An embedding that reads its rows from a tied Int8Linear (the LM head): w = s1·q1 + s2·q2 per token."""

    def __init__(self, head: Int8Linear, dtype: torch.dtype):
        super().__init__()
        self.head, self.dtype = [head], dtype  # a list: the head is registered once, where it lives
        self.weight = head.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        q, s = self.head[0].rows
        lo = ids + self.head[0].out_features
        return (q[ids].float() * s[ids, None] + q[lo].float() * s[lo, None]).to(self.dtype)


class SharedInput(nn.Module):
    """Sibling projections of one input (q/k/v, gate/up) as one GEMM; each member returns its slice."""

    def __init__(self, linears: list[nn.Linear]):
        super().__init__()
        bias = None
        if any(m.bias is not None for m in linears):
            bias = torch.cat([m.bias if m.bias is not None else m.weight.new_zeros(m.out_features) for m in linears])
        self.linear = Int8Linear(torch.cat([m.weight for m in linears]), bias)
        self.sizes = [m.out_features for m in linears]
        self._input: torch.Tensor | None = None  # held, so its identity cannot be reused while parts are pending
        self._parts: list[torch.Tensor | None] = []

    def part(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Member i's output: one GEMM per new input, its parts held until every member took its own."""
        if self._input is not x or self._parts[i] is None:
            self._input, self._parts = x, list(self.linear(x).split(self.sizes, -1))
        out, self._parts[i] = self._parts[i], None
        if all(p is None for p in self._parts):
            self._input, self._parts = None, []
        return out


class Member(nn.Module):
    """One projection of a SharedInput group, in place of its nn.Linear."""

    def __init__(self, group: SharedInput, index: int):
        super().__init__()
        self.group, self.index = [group], index  # a list: not a submodule, so the group is not registered twice
        self.out_features = group.sizes[index]
        self.weight = torch.empty((self.out_features, group.linear.in_features), device="meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group[0].part(x, self.index)
