// A mixture of experts' layer on a GGUF file's 3-D expert tensors (nsample/cpu/gguf_experts.py; moe.cpp).
#pragma once
#include <ATen/ATen.h>

#include <vector>

#include "linear.h"

struct Experts {
  std::vector<Linear> gate_up;  // expert e's gate|up: its rows of ffn_gate_exps and ffn_up_exps side by side (2F)
  std::vector<Linear> down;     // expert e's rows of ffn_down_exps (H)
  int64_t F;                    // an expert's MLP size
  std::vector<double> swiglu;   // empty: SiLU(gate) · up; {alpha, limit}: gpt-oss's clamped SwiGLU

  // x (T, H) float, experts and weights (T, k): each row's routed experts (int64) and their weights (float) ->
  // (T, H) float: Σ weight · down(glu(gate(x), up(x))) over the row's experts, in ascending expert order
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& experts, const at::Tensor& weights) const;
};

// The experts of one layer: each tensor's blocks (experts, rows, row bytes), each expert's rows contiguous (gate and
// up may be the two halves of a file's fused ffn_gate_up_exps), and ggml type; int8 activations for the
// gate|up and the down projections where their formats have the kernels (q8_linear.cpp); gpt-oss's biases (experts,
// 2F) of gate|up and (experts, H) of down, and its SwiGLU's {alpha, limit}.
Experts gguf_experts(const at::Tensor& gate, int64_t gate_type, const at::Tensor& up, int64_t up_type,
                     const at::Tensor& down, int64_t down_type, int64_t num_experts, bool q8_gate_up, bool q8_down,
                     const c10::optional<at::Tensor>& gate_up_bias, const c10::optional<at::Tensor>& down_bias,
                     std::vector<double> swiglu);
