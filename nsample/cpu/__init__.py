"""The CPU weight paths: quantized linear layers and the C++ kernels that decode on them.

What lives here: `kernels` (builds and loads the C++ kernels in `csrc/`, one build per instruction set of
`instruction_sets` (torch-free, for the command line), under `build_lock`, which takes over a lock left by a
stopped build and waits a bounded time for a live one),
`gguf_linear` (a projection kept as a GGUF file's own blocks), `checkpoint_rows` (a hub model's or folder's layers
made the kernels' on its own bf16, f16 or f32 rows), `int8_linear` (the two-level int8 layers),
`quantize` (which layer gets which path), `fused_decode` (a whole decode layer in one C++ call),
`whole_head_rotary` (a partial rotary embedding made one the fused decode's kernels turn), `openmp` (the
OpenMP pool the kernels share with torch) and `weights_report` (the decode path of every layer and the bytes it
reads).

It may import torch and the public modules. `fused_decode` also reads `nsample.engine.prefix_attention.Group`, the
layout of the batch it decodes. Nothing here imports `nsample.models`, the server or the page.
"""
