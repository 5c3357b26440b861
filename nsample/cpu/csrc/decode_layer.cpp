// A decode step of a Llama-style layer around its quantized linear layers (linear.h; nsample/cpu/fused_decode.py), in
// four calls per layer instead of some forty ATen ops and the transformers modules' Python around them: RMSNorm
// fused into the projection that reads it, the residual add (and a norm before it: Gemma 3's, OLMo 2's) into the
// projection that feeds it, SiLU·mul (or GELU's) into gate/up, and rotary embedding, the KV append and the whole
// attention (prompt and own tokens in one softmax) in one kernel (attention.cpp).
// Written on torch's portable vector layer (vec_math.h), compiled once per instruction set (nsample/cpu/kernels.py).
// Every step is per row, in a fixed order whatever the other rows, so rows stay independent, bitwise. A short prompt's
// prefill runs through the same calls, its attention in prefill_attention.
#include <ATen/ATen.h>

#include <algorithm>
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

// h += (x · Wᵀ + bias) · scale (the residual add of a layer's o_proj or down_proj; scale: Granite's
// residual_multiplier, a product then a sum, each rounded as transformers' two ops round them).
void linear_add(const at::Tensor& x, const Linear& linear, at::Tensor& h, double scale) {
  auto y = linear(x);
  if (scale != 1.0) y.mul_(scale);
  h.add_(y);
}

// h += RMSNorm(x · Wᵀ + bias; w, eps) (the residual add of a layer that norms its branch's output: Gemma 3's
// post_attention_layernorm and post_feedforward_layernorm, OLMo 2's, with their weights as the norm multiplies).
void linear_norm_add(const at::Tensor& x, const Linear& linear, const at::Tensor& w, double eps, at::Tensor& h) {
  h.add_(rms_norm(linear(x), w, eps));
}

namespace {

// act(gate) · up (M, I) of y = gate|up (M, 2I), act a function of a vector.
template <class Act>
at::Tensor gated(const at::Tensor& y, Act act) {
  const int64_t M = y.size(0), I = y.size(1) / 2;
  TORCH_CHECK(I % 16 == 0, "gate/up: a multiple of 16 columns each");
  auto out = at::empty({M, I}, y.options());
  const float* yp = y.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t r = 0; r < M; ++r)
    for (int64_t i = 0; i < I; i += W) (act(Vec::loadu(yp + r * 2 * I + i)) * Vec::loadu(yp + r * 2 * I + I + i))
        .store(op + r * I + i);
  return out;
}

}  // namespace

// gate|up = RMSNorm(h) · Wᵀ + bias (M, 2I) -> SiLU(gate) · up (M, I), SiLU(x) = x / (1 + e^-x) as ATen's. Without
// a norm (w undefined: OLMo 2's MLP reads the residual as it is), h · Wᵀ + bias.
at::Tensor norm_swiglu(const at::Tensor& h, const c10::optional<at::Tensor>& w, double eps, const Linear& linear) {
  return gated(w ? norm_linear(h, *w, eps, linear) : linear(h),
               [](const Vec& g) { return g / (Vec(1.0f) + exp_vec(g.neg())); });
}

// The same with GELU's tanh form (Gemma 2 and 3's gelu_pytorch_tanh): x/2 · (1 + tanh(sqrt(2/π) · (x + 0.044715 x³))).
at::Tensor norm_geglu(const at::Tensor& h, const at::Tensor& w, double eps, const Linear& linear) {
  return gated(norm_linear(h, w, eps, linear), [](const Vec& x) {
    const Vec u = Vec(0.7978845608028654f) * (x + Vec(0.044715f) * x * x * x);
    return Vec(0.5f) * x * (Vec(1.0f) + vmath::tanh_vec(u));
  });
}

// x = cap · tanh(x / cap) in place (Gemma 2's final_logit_softcapping on the logits (M, V)), each element alone: every
// vector the same lane-wise arithmetic, a row's last one loaded and stored in part, so a row's numbers do not depend
// on where it sits or what is beside it.
void soft_cap_(at::Tensor& x, double cap) {
  TORCH_CHECK(x.scalar_type() == at::kFloat && x.is_contiguous() && cap > 0, "soft_cap_: contiguous float, cap > 0");
  float* p = x.data_ptr<float>();
  const Vec c(static_cast<float>(cap));
  for (int64_t i = 0, n = x.numel(); i < n; i += W) {
    const int64_t count = std::min<int64_t>(W, n - i);
    (c * vmath::tanh_vec(Vec::loadu(p + i, count) / c)).store(p + i, count);
  }
}
