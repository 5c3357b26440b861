// A decode step of a Llama-style layer around its quantized linear layers (linear.h; nsample/cpu/fused_decode.py), in
// four calls per layer instead of some forty ATen ops and the transformers modules' Python around them: RMSNorm
// fused into the projection that reads it, the residual add into the projection that feeds it, SiLU·mul into
// gate/up, and rotary embedding, the KV append and the whole attention (prompt and own tokens in one softmax) in
// one kernel (attention.cpp).
// Written on torch's portable vector layer (vec_math.h), compiled once per instruction set (nsample/cpu/kernels.py).
// Every step is per row, in a fixed order whatever the other rows, so rows stay independent, bitwise. A short prompt's
// prefill runs through the same calls, its attention in prefill_attention.
#include <ATen/ATen.h>

#include <cmath>

#include "linear.h"
#include "vec_math.h"

namespace {

using vmath::dot;
using vmath::exp_vec;
using vmath::Vec;
using vmath::W;

// Each row of h (M, K) as transformers' LlamaRMSNorm: w · (x · 1/sqrt(mean(x²) + eps)). K a multiple of 16.
at::Tensor rms_norm(const at::Tensor& h, const at::Tensor& w, double eps) {
  TORCH_CHECK(h.dim() == 2 && h.scalar_type() == at::kFloat && h.is_contiguous() && h.size(1) % 16 == 0, "h");
  const int64_t M = h.size(0), K = h.size(1);
  auto y = at::empty_like(h);
  const float *hp = h.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t r = 0; r < M; ++r) {
    const float* x = hp + r * K;
    const Vec inv(1.0f / std::sqrt(dot(x, x, K) / K + static_cast<float>(eps)));
    for (int64_t k = 0; k < K; k += W) (Vec::loadu(wp + k) * (Vec::loadu(x + k) * inv)).store(yp + r * K + k);
  }
  return y;
}

}  // namespace

// h (M, K) -> RMSNorm(h; w, eps) · Wᵀ + bias.
at::Tensor norm_linear(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear) {
  return linear(rms_norm(h, w, eps));
}

// h += x · Wᵀ + bias (the residual add of a layer's o_proj or down_proj).
void linear_add(const at::Tensor& x, const Linear& linear, at::Tensor& h) { h.add_(linear(x)); }

// gate|up = RMSNorm(h) · Wᵀ + bias (M, 2I) -> SiLU(gate) · up (M, I), SiLU(x) = x / (1 + e^-x) as ATen's.
at::Tensor norm_swiglu(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear) {
  const auto y = norm_linear(h, w, eps, linear);
  const int64_t M = y.size(0), I = y.size(1) / 2;
  TORCH_CHECK(I % 16 == 0, "gate/up: a multiple of 16 columns each");
  auto act = at::empty({M, I}, y.options());
  const float* yp = y.data_ptr<float>();
  float* ap = act.data_ptr<float>();
  for (int64_t r = 0; r < M; ++r)
    for (int64_t i = 0; i < I; i += W) {
      const Vec g = Vec::loadu(yp + r * 2 * I + i), u = Vec::loadu(yp + r * 2 * I + I + i);
      ((g / (Vec(1.0f) + exp_vec(g.neg()))) * u).store(ap + r * I + i);
    }
  return act;
}
