"""The generated tokens' KV of every request that started decoding at the same step, in one buffer per layer.

Every running request advances exactly one token per step, so requests whose prompts finished prefilling in the same
step (say 16 users who arrived together, their prompts packed into one prefill) stay at the same generated length
for as long as they run. Their rows' own keys and values can then live in one tensor per layer, appended by one copy
per step and attended by one flash-attention call, however many requests share it; only each request's prompt part
stays a call of its own. (The C++ decoder, nsample/cpu/fused_decode.py, stores and attends every cohort's rows in one
kernel call per layer, reading the same buffers.) No row waits for or pads to another's length, so a row's numbers
do not depend on which requests share its cohort. A cohort holds no references to its requests: each request's
SharedKV knows its cohort and its rows (`slots`) in the buffers, and the runner says which requests are still
running before each decode step (`prepare`), which drops the rows of the ones that left.
"""
import torch

FIRST_CHUNK = 128  # generated positions preallocated at first


class Cohort:
    def __init__(self, members: list):
        """Start the buffers of these just-prefilled requests (SharedKV, each with its prompt's KV and rows)."""
        like = members[0].prefix[0][0]  # (1, Hkv, P, D)
        _, heads, _, dim = like.shape
        rows = sum(len(m.slots) for m in members)
        size = (rows, heads, min(max(m.max_new for m in members), FIRST_CHUNK), dim)
        self.keys = [like.new_zeros(size) for _ in members[0].prefix]  # per layer (rows, Hkv, capacity, D)
        self.values = [like.new_zeros(size) for _ in members[0].prefix]
        self.length = 0  # generated tokens stored per row, including the one being decoded
        for m in members:
            m.cohort = self
        _place(members)

    def prepare(self, members: list, length: int) -> None:
        """Before a decode step: keep only these members' rows, in this order (each member's rows contiguous),
        and make room for `length` generated positions per row (the buffers double when full)."""
        index = [s for m in members for s in m.slots]
        if index != list(range(len(self.keys[0]))):
            where = torch.tensor(index, device=self.keys[0].device)
            self.keys = [k.index_select(0, where) for k in self.keys]
            self.values = [v.index_select(0, where) for v in self.values]
            _place(members)
        self.length = length
        capacity = self.keys[0].shape[2]
        if capacity < length:
            most = max(m.max_new for m in members)  # no row still running needs more (what its request reserved)
            pad = min(most, max(length, 2 * capacity)) - capacity
            self.keys = [torch.nn.functional.pad(k, (0, 0, 0, pad)) for k in self.keys]  # (rows, Hkv, L, D) along L
            self.values = [torch.nn.functional.pad(v, (0, 0, 0, pad)) for v in self.values]

    def append(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store this step's keys and values of all the cohort's rows (rows, Hkv, 1, D); return every row's
        generated keys and values so far (rows, Hkv, t, D)."""
        t, keys, values = self.length, self.keys[layer], self.values[layer]
        keys.narrow(2, t - 1, 1).copy_(key)
        values.narrow(2, t - 1, 1).copy_(value)
        return keys.narrow(2, 0, t), values.narrow(2, 0, t)


def _place(members: list) -> None:
    """Give the members' rows the buffers' rows in order, each member's contiguous."""
    first = 0
    for m in members:
        m.slots = list(range(first, first + len(m.slots)))
        first += len(m.slots)
