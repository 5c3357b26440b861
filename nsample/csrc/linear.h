// A linear layer of either kind nsample quantizes to (nsample/int8_linear.py builds them, fused_decode.py takes
// them): a GGUF's blocks (block_rows.cpp; m given: Q4_1, else Q8_0) or two-level int8 on oneDNN's prepacked GEMM
// (int8_rows.cpp around it). Either way each output row depends on its input row alone, bitwise.
#pragma once
#include <torch/extension.h>

struct Linear {
  bool blocks;
  at::Tensor q, d;                     // blocks: q (N, K/2 or K), d (N, K/32)
  c10::optional<at::Tensor> m;         // blocks: Q4_1's minimums (N, K/32)
  at::Tensor packed, scales, zero_points;  // int8: oneDNN's packed levels (2N, K), their scales and zero points (2N,)
  c10::optional<at::Tensor> bias;      // (N,)

  at::Tensor operator()(const at::Tensor& x) const;  // x (M, K) float -> (M, N) float
};

Linear block_linear(at::Tensor q, at::Tensor d, c10::optional<at::Tensor> m, c10::optional<at::Tensor> bias);
Linear int8_linear(at::Tensor packed, at::Tensor scales, at::Tensor zero_points, c10::optional<at::Tensor> bias);
