// A linear layer of parts side by side, GGUF blocks or two-level int8 (linear.h).
#include "linear.h"

#include <ATen/core/dispatch/Dispatcher.h>


std::vector<at::Tensor> split_rows(const at::Tensor& x);  // int8_rows.cpp
at::Tensor join_levels(const at::Tensor& y, const at::Tensor& t1, const c10::optional<at::Tensor>& bias);

Linear gguf_block_linear(std::vector<at::Tensor> blocks, std::vector<int64_t> types, c10::optional<at::Tensor> bias,
                         bool q8) {
  TORCH_CHECK(!blocks.empty() && blocks.size() == types.size(), "gguf_block_linear: one type per blocks tensor");
  TORCH_CHECK(!q8 || q8_available(), "int8 activations: this build has no such kernel");
  Linear linear{{}, 0, std::move(bias), q8};
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t N = blocks[i].size(0);
    linear.parts.push_back({true, N, std::move(blocks[i]), types[i], {}, {}, {}});
    linear.N += N;
  }
  TORCH_CHECK(!linear.bias.has_value() || linear.bias->numel() == linear.N, "bias: one per output column");
  return linear;
}

Linear int8_linear(at::Tensor packed, at::Tensor scales, at::Tensor zero_points, c10::optional<at::Tensor> bias) {
  const int64_t N = scales.size(0) / 2;
  return {{{false, N, {}, 0, std::move(packed), std::move(scales), std::move(zero_points)}}, N, std::move(bias), false};
}

namespace {

// The rows as two int8 levels, one GEMM against both weight levels, the four products joined (int8_linear.py).
at::Tensor int8_part(const LinearPart& p, const at::Tensor& x, const c10::optional<at::Tensor>& bias) {
  static const auto gemm = c10::Dispatcher::singleton().findSchemaOrThrow("onednn::qlinear_pointwise", "");
  const auto levels = split_rows(x);  // (int8 (2M, K), t1 (M, 1))
  torch::jit::Stack stack{levels[0], 1.0, int64_t{0}, p.packed, p.scales, p.zero_points, c10::IValue(), 1.0,
                          int64_t{0}, c10::IValue(at::kFloat), std::string("none"),
                          c10::List<std::optional<at::Scalar>>(), std::string("")};
  gemm.callBoxed(&stack);
  return join_levels(stack[0].toTensor(), levels[1], bias);  // (M, N)
}

}  // namespace

at::Tensor Linear::operator()(const at::Tensor& x) const {
  const auto on_q8 = [&](const LinearPart& p) { return q8 && p.blocks && q8_readable(p.type); };
  if (parts.size() == 1 && !on_q8(parts[0])) {  // the bias inside the part's kernel: the same single add, one pass
    const auto& p = parts[0];                   // fewer
    return p.blocks ? gguf_decode_linear(x, p.data, p.type, bias) : int8_part(p, x, bias);
  }
  // The activations rounded to int8 once for all the parts that read them so, per block size.
  std::vector<at::Tensor> rounded[2];  // blocks of 32, of 256
  const auto xq = [&](const LinearPart& p) -> const std::vector<at::Tensor>& {
    auto& r = rounded[q8_block(p.type) == 256];
    if (r.empty()) r = q8_quantize(x, q8_block(p.type));
    return r;
  };
  if (parts.size() == 1) {
    auto y = at::empty({x.size(0), N}, x.options());
    gguf_decode_q8_into(xq(parts[0]), parts[0].data, parts[0].type, y, bias);
    return y;
  }
  // Each part into its columns; the bias after, as each element's one add of it either way. x's rows packed once for
  // all the parts that read them so.
  at::Tensor tiles;
  auto y = at::empty({x.size(0), N}, x.options());
  int64_t n0 = 0;
  for (const auto& p : parts) {
    auto columns = y.narrow(1, n0, p.N);
    if (on_q8(p)) {
      gguf_decode_q8_into(xq(p), p.data, p.type, columns, c10::nullopt);
    } else if (p.blocks) {
      if (!tiles.defined() && gguf_packs_rows(p.type, x.size(0))) tiles = gguf_pack_rows(x);
      gguf_decode_into(x, tiles, p.data, p.type, columns, c10::nullopt);
    } else {
      columns.copy_(int8_part(p, x, c10::nullopt));
    }
    n0 += p.N;
  }
  if (bias.has_value()) y.add_(*bias);
  return y;
}
