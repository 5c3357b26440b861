"""A GGUF file's rotary frequency factors (`rope_freqs.weight`), which transformers' GGUF loading ignores.

Llama 3.1 and later scale their rotary frequencies ("llama3" rope scaling: the low frequencies divided by 8, a smooth
step between). llama.cpp's converter writes that scaling into the file as one factor per frequency, and llama.cpp
divides each frequency by its factor. transformers' GGUF config reads no rope scaling and its loader skips the
tensor, so a Llama 3 file's model would rotate with plain frequencies: neither llama.cpp's nor the hub model's. Here
the factors divide the rotary embedding's `inv_freq`, as llama.cpp does, on either load path (the file's blocks,
transformers' float32 conversion); the decode paths read the rotary tables from that module.
"""
import numpy as np
import torch
from torch import nn

TENSOR = "rope_freqs.weight"


def read(path, index: dict) -> torch.Tensor | None:
    """The factors of the GGUF at `path` (float32, one per rotary frequency), or None where it has none; `index` is
    its tensor index (gguf_model.metadata)."""
    from gguf import GGMLQuantizationType, dequantize

    info = index["tensors"].get(TENSOR)
    if info is None:
        return None
    raw = np.fromfile(path, dtype=np.uint8, count=info["nbytes"], offset=info["offset"])
    return torch.from_numpy(np.array(dequantize(raw, GGMLQuantizationType(info["type"])), dtype=np.float32)).view(-1)


def apply(model: nn.Module, factors: torch.Tensor | None) -> None:
    """Divide the frequencies of each rotary embedding of `model` with as many frequencies as `factors` by them."""
    if factors is None:
        return
    rotaries = [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)
                and m.inv_freq.numel() == factors.numel()]
    if not rotaries:
        raise ValueError(f"the GGUF file has {factors.numel()} rotary frequency factors ({TENSOR}), and the model "
                         f"no rotary embedding of as many frequencies")
    for m in rotaries:
        m.inv_freq = m.inv_freq / factors.to(m.inv_freq)
        if isinstance(getattr(m, "original_inv_freq", None), torch.Tensor):
            m.original_inv_freq = m.inv_freq.clone()
