// A linear layer of either kind (linear.h).
#include "linear.h"

#include <ATen/core/dispatch/Dispatcher.h>

at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& q, const at::Tensor& d, const at::Tensor& m,
                     const c10::optional<at::Tensor>& bias);  // block_rows.cpp
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& q, const at::Tensor& d,
                     const c10::optional<at::Tensor>& bias);
std::vector<at::Tensor> split_rows(const at::Tensor& x);  // int8_rows.cpp
at::Tensor join_levels(const at::Tensor& y, const at::Tensor& t1, const c10::optional<at::Tensor>& bias);

Linear block_linear(at::Tensor q, at::Tensor d, c10::optional<at::Tensor> m, c10::optional<at::Tensor> bias) {
  return {true, std::move(q), std::move(d), std::move(m), {}, {}, {}, std::move(bias)};
}

Linear int8_linear(at::Tensor packed, at::Tensor scales, at::Tensor zero_points, c10::optional<at::Tensor> bias) {
  return {false, {}, {}, c10::nullopt, std::move(packed), std::move(scales), std::move(zero_points), std::move(bias)};
}

at::Tensor Linear::operator()(const at::Tensor& x) const {
  if (blocks) return m.has_value() ? q4_linear(x, q, d, *m, bias) : q8_linear(x, q, d, bias);
  // The rows as two int8 levels, one GEMM against both weight levels, the four products joined (int8_linear.py).
  static const auto gemm = c10::Dispatcher::singleton().findSchemaOrThrow("onednn::qlinear_pointwise", "");
  const auto levels = split_rows(x);  // (int8 (2M, K), t1 (M, 1))
  torch::jit::Stack stack{levels[0], 1.0, int64_t{0}, packed, scales, zero_points, c10::IValue(), 1.0, int64_t{0},
                          c10::IValue(at::kFloat), std::string("none"), c10::List<std::optional<at::Scalar>>(),
                          std::string("")};
  gemm.callBoxed(&stack);
  return join_levels(stack[0].toTensor(), levels[1], bias);  // (M, N)
}
