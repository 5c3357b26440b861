"""llama.cpp's own quantizer, through ctypes on the ggml library that llama-cpp-python ships: float32 weights to a
GGUF tensor's bytes, row by row, exactly as llama.cpp's tools write them (test fixtures, not a model converter).

`quantize(w, type)` takes a float32 (N, K) tensor and a ggml type id and returns uint8 (N, row_bytes); F32, F16 and
BF16 are plain conversions (round to nearest even, as ggml does). The types ggml quantizes only with an importance
matrix (IQ1_S, IQ2_XXS, IQ2_XS) get one of ones: every input equally important. `available()` says whether the
library loads.
"""
import ctypes
import functools
from pathlib import Path

import torch

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 30
IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, IQ1_M = 16, 17, 18, 19, 20, 21, 22, 23, 29
MXFP4 = 39  # OCP's microscaling FP4 (gpt-oss's experts)
TQ2_0 = 35  # a format the kernels do not read (rounded to Q8_0 at load)
PLAIN = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}


@functools.cache
def _library() -> ctypes.CDLL | None:
    try:
        import llama_cpp
    except ImportError:
        return None
    for path in sorted((Path(llama_cpp.__file__).parent / "lib").glob("libggml-base.*")):
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:
            continue
        lib.ggml_quantize_chunk.restype = ctypes.c_size_t
        lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                            ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        lib.ggml_row_size.restype = ctypes.c_size_t
        lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
        lib.ggml_blck_size.restype = ctypes.c_int64
        lib.ggml_blck_size.argtypes = [ctypes.c_int]
        lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
        lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
        if hasattr(lib, "ggml_quantize_init"):  # builds the lookup tables some types need; harmless for the rest
            lib.ggml_quantize_init.argtypes = [ctypes.c_int]
        return lib
    return None


def available() -> bool:
    return _library() is not None


def quantize(w: torch.Tensor, type: int) -> torch.Tensor:
    """float32 (N, K) -> uint8 (N, row_bytes): each row as llama.cpp quantizes it to `type` (a ggml type id)."""
    w = w.detach().to(torch.float32).contiguous()
    assert w.dim() == 2, "weights: (N, K)"
    N, K = w.shape
    if type in PLAIN:
        return w.to(PLAIN[type]).view(torch.uint8).reshape(N, -1).clone()
    lib = _library()
    if lib is None:
        raise RuntimeError("llama.cpp's ggml library is not available (pip install llama-cpp-python)")
    if K % lib.ggml_blck_size(type):  # ggml would abort the process
        raise ValueError(f"ggml type {type} quantizes rows in blocks of {lib.ggml_blck_size(type)}, not K = {K}")
    if hasattr(lib, "ggml_quantize_init"):
        lib.ggml_quantize_init(type)
    row_bytes = lib.ggml_row_size(type, K)
    out = torch.empty(N, row_bytes, dtype=torch.uint8)
    imatrix = torch.ones(K) if lib.ggml_quantize_requires_imatrix(type) else None
    written = lib.ggml_quantize_chunk(type, w.data_ptr(), out.data_ptr(), 0, N, K,
                                      None if imatrix is None else imatrix.data_ptr())
    assert written == N * row_bytes, f"ggml wrote {written} bytes, expected {N * row_bytes}"
    return out
