"""Engines on tiny GGUF files (tests/tiny_gguf.py), for the tests of decoding on a file's blocks, and the mark that
skips them where the kernels or llama.cpp's quantizer are missing."""
import atexit
import contextlib
import functools
import os
import shutil
import tempfile
from pathlib import Path

import ggml_quantizer as gq
import pytest
import tiny_gguf

from nsample.cpu import kernels

HAS_GGUF = kernels.ops() is not None and gq.available()
needs_gguf = pytest.mark.skipif(not HAS_GGUF, reason="no C++ kernels here, or no llama.cpp quantizer")
TYPES = {
    "mix": {"token_embd": gq.Q6_K, "attn_q": gq.Q4_K, "attn_k": gq.Q4_K, "attn_v": gq.Q6_K, "attn_output": gq.Q4_K,
            "ffn_gate": gq.Q4_K, "ffn_up": gq.Q4_K, "ffn_down": gq.Q6_K,  # as llama.cpp mixes a Q4_K_M file
            "attn_qkv": gq.Q4_K},  # Phi 3's q|k|v (its ffn_up is gate|up)
    "q4_1": {**dict.fromkeys(tiny_gguf.KINDS, gq.Q4_1), "token_embd": gq.Q8_0},  # as the embedded model
}

EXPERTS = {"gpt-oss": dict.fromkeys(("ffn_gate", "ffn_up", "ffn_down"), gq.MXFP4)}  # as its files (ffn_*_exps)


@functools.cache
def tiny_gguf_file(kind: str, layers: int = 2) -> Path:
    """The tiny model (hidden 256, head dim 64) as a GGUF file of `kind` (TYPES), or a tiny model of another
    architecture (tiny_gguf.ARCHS: "gemma2", "gemma3", "qwen3", "phi3", "smollm3", "olmo2", "qwen3moe", ...) in the
    Q4_K_M-like mix, of at least its tiny_gguf.MIN_LAYERS; written once per session."""
    layers = max(layers, tiny_gguf.MIN_LAYERS.get(kind, 0))
    root = Path(tempfile.mkdtemp(prefix="nsample-gguf-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    path = root / f"tiny-{kind}-{layers}.gguf"
    if kind in tiny_gguf.ARCHS:
        return tiny_gguf.write_arch(path, kind, TYPES["mix"] | EXPERTS.get(kind, {}), layers=layers)
    return tiny_gguf.write(path, TYPES[kind], layers=layers)


def scaled_reference(path: Path, params: dict):
    """(transformers' own float32 model of the GGUF at `path`, which reads no rope scaling; the same weights in
    transformers' model with the rope parameters `params` (rope_type and its keys; the file's rope_theta kept))."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32).eval()
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    config.rope_parameters = {**params, "rope_theta": plain.config.rope_parameters["rope_theta"]}
    scaled = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    scaled.load_state_dict(plain.state_dict())
    return plain, scaled


def llama_cpp_logits(path: Path, ids: list[int], n_ctx: int = 256):
    """llama.cpp's logits (len(ids), V) for `ids` on the file at `path`, its KV cache in float32 (type 0), so on a
    float32 file it computes in float32 throughout (llama-cpp-python: with the quantizer, gq.available)."""
    import llama_cpp
    import numpy as np
    import torch

    llm = llama_cpp.Llama(str(path), n_ctx=n_ctx, logits_all=True, n_threads=2, verbose=False, type_k=0, type_v=0)
    try:
        llm.eval(ids)
        return torch.from_numpy(np.array(llm.scores[:len(ids)], dtype=np.float32))
    finally:
        llm.close()


@contextlib.contextmanager
def engine_pair(path: Path):
    """(nsample on the file's blocks, transformers' float32 model of it behind the same engine), closed after."""
    import nsample

    fast, ref = nsample.load(str(path)), nsample.load(str(path), quantize="none")
    try:
        yield fast, ref
    finally:
        fast.close()
        ref.close()


def tiny_gguf_engine(kind: str, layers: int = 2, **config):
    import nsample

    return nsample.load(str(tiny_gguf_file(kind, layers)), **config)


@contextlib.contextmanager
def forced_isa(isa: str):
    """Inside: nsample's kernels are those of `isa` (layers and fused decoders take them when they are built)."""
    before = os.environ.get("NSAMPLE_ISA")
    os.environ["NSAMPLE_ISA"] = isa
    try:
        yield kernels.ops()
    finally:
        os.environ.pop("NSAMPLE_ISA") if before is None else os.environ.update(NSAMPLE_ISA=before)


def assert_experts_kernel_is_the_modules_loop(experts, scale: float = 1.0):
    """csrc/moe.cpp against GGUFExperts' loop over its GGUFLinear experts (both on the decode kernels), on 1, 3, 8 and
    17 rows of N(0, scale²) each routed to 2 of the 8 experts, alike and apart: bitwise the same, and a row alone gets
    the numbers it gets among others. Returns the last rows."""
    import torch

    from nsample.cpu import gguf_linear

    gen = torch.Generator().manual_seed(0)
    for rows in (1, 3, 8, 17):
        x = torch.randn(rows, 256, generator=gen) * scale
        index = torch.stack([torch.randperm(8, generator=gen)[:2] for _ in range(rows)])
        weights = torch.rand(rows, 2, generator=gen)
        with gguf_linear.decoding():
            got = experts(x, index, weights)
            alone = torch.cat([experts(x[i:i + 1], index[i:i + 1], weights[i:i + 1]) for i in range(rows)])
            kernel, experts.kernel = experts.kernel, lambda q8=None: None  # the modules' loop
            try:
                loop = experts(x, index, weights)
            finally:
                del experts.kernel
        assert kernel() is not None and torch.equal(got, loop) and torch.equal(got, alone)
    return x
