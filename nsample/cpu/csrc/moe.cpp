// A mixture of experts' decode (experts.h), the arithmetic of transformers' experts modules (Qwen3MoeExperts,
// GptOssExperts) and of nsample/cpu/gguf_experts.py's GGUFExperts: for each expert in ascending order, the rows routed
// to it gathered, down(SiLU(gate(x)) · up(x)) on the file's blocks (gpt-oss: each projection biased, its clamped
// SwiGLU in gguf_experts.clamped_swiglu's order of ATen ops, so bitwise its numbers), each product times the row's
// weight for that expert added into the row. A row's numbers are its own: the kernels' rows are independent
// (gguf_linear.cpp), the GLU and the products are elementwise, and a row adds its experts in one order whatever other
// rows are routed with it.
#include "experts.h"

#include <ATen/Parallel.h>

#include <exception>

Experts gguf_experts(const at::Tensor& gate, int64_t gate_type, const at::Tensor& up, int64_t up_type,
                     const at::Tensor& down, int64_t down_type, int64_t num_experts, bool q8_gate_up, bool q8_down,
                     const c10::optional<at::Tensor>& gate_up_bias, const c10::optional<at::Tensor>& down_bias,
                     std::vector<double> swiglu) {
  TORCH_CHECK(num_experts > 0 && gate.dim() == 3 && gate.size(0) == num_experts && up.dim() == 3 &&
                  up.sizes().slice(0, 2) == gate.sizes().slice(0, 2) && down.dim() == 3 && down.size(0) == num_experts,
              "gguf_experts: gate and up (experts, F, row bytes), down (experts, H, row bytes)");
  const int64_t F = gate.size(1), H = down.size(1);
  TORCH_CHECK(!gate_up_bias || gate_up_bias->sizes() == at::IntArrayRef({num_experts, 2 * F}),
              "gguf_experts: a gate|up bias of (experts, 2F)");
  TORCH_CHECK(!down_bias || down_bias->sizes() == at::IntArrayRef({num_experts, H}),
              "gguf_experts: a down bias of (experts, H)");
  TORCH_CHECK(swiglu.empty() || swiglu.size() == 2, "gguf_experts: swiglu is {} or {alpha, limit}");
  const auto row = [](const c10::optional<at::Tensor>& bias, int64_t e) -> c10::optional<at::Tensor> {
    return bias ? c10::optional<at::Tensor>((*bias)[e].contiguous().to(at::kFloat)) : c10::nullopt;
  };
  Experts experts{{}, {}, F, std::move(swiglu)};
  for (int64_t e = 0; e < num_experts; ++e) {
    experts.gate_up.push_back(gguf_block_linear({gate[e], up[e]}, {gate_type, up_type}, row(gate_up_bias, e),
                                                q8_gate_up));
    experts.down.push_back(gguf_block_linear({down[e]}, {down_type}, row(down_bias, e), q8_down));
  }
  return experts;
}

at::Tensor Experts::operator()(const at::Tensor& x, const at::Tensor& experts, const at::Tensor& weights) const {
  const int64_t E = static_cast<int64_t>(gate_up.size()), H = down.empty() ? 0 : down[0].N;
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float (T, H)");
  TORCH_CHECK(experts.dim() == 2 && experts.size(0) == x.size(0) && experts.scalar_type() == at::kLong,
              "experts: int64 (T, k)");
  TORCH_CHECK(weights.sizes() == experts.sizes() && weights.scalar_type() == at::kFloat, "weights: float (T, k)");
  const auto ids = experts.contiguous();
  const auto w = weights.contiguous();
  const int64_t T = x.size(0), k = experts.size(1);
  const int64_t* id = ids.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> routed(E);  // per expert, the slots t·k + j routed to it, in row order
  for (int64_t s = 0; s < T * k; ++s) {
    TORCH_CHECK(0 <= id[s] && id[s] < E, "experts: an id outside [0, ", E, ")");
    routed[id[s]].push_back(s);
  }
  std::vector<int64_t> hit;  // the experts some row is routed to, ascending
  for (int64_t e = 0; e < E; ++e)
    if (!routed[e].empty()) hit.push_back(e);
  const int64_t n = static_cast<int64_t>(hit.size());
  std::vector<at::Tensor> ys(n);  // each hit expert's down(SiLU(gate) · up) of its rows (M, H)
  const auto expert = [&](int64_t i) {
    const auto& slots = routed[hit[i]];
    const int64_t M = static_cast<int64_t>(slots.size());
    auto rows = at::empty({M}, ids.options());
    for (int64_t r = 0; r < M; ++r) rows.data_ptr<int64_t>()[r] = slots[r] / k;
    const auto gu = gate_up[hit[i]](x.index_select(0, rows));  // (M, 2F)
    const auto gate = gu.narrow(1, 0, F), up = gu.narrow(1, F, F);
    at::Tensor a;  // (M, F)
    if (swiglu.empty()) {
      a = at::silu(gate).mul_(up);  // as act_fn(gate) * up
    } else {  // as clamped_swiglu: (clamp(up) + 1) * (g * sigmoid(g * alpha)), g = min(gate, limit)
      const double alpha = swiglu[0], limit = swiglu[1];
      const auto g = gate.clamp_max(limit);
      a = (up.clamp(-limit, limit) + 1) * (g * at::sigmoid(g * alpha));
    }
    ys[i] = down[hit[i]](a);  // (M, H)
  };
  if (n >= at::get_num_threads() && n > 1 && !at::in_parallel_region()) {
    // As many experts as threads or more: a thread takes whole experts (their products then run on that thread
    // alone, the same sums), instead of every product split across the threads: one parallel region a layer,
    // not two an expert. 12 layers' experts of the --qwen3moe fixture, 2 threads, in-process A/B, bitwise equal:
    // one row 0.91x the time (AVX-512), 0.74x (AVX2); eight rows 0.81x, 0.70x. Errors are kept, raised after.
    std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) {
      try {
        expert(i);
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  } else {
    for (int64_t i = 0; i < n; ++i) expert(i);
  }
  auto out = at::zeros({T, H}, x.options());
  float* o = out.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) {  // into each row in ascending expert order
    const auto& slots = routed[hit[i]];
    const float* yp = ys[i].data_ptr<float>();
    for (size_t r = 0; r < slots.size(); ++r) {
      float* row = o + (slots[r] / k) * H;
      const float* yr = yp + r * H;
      const float weight = wp[slots[r]];
      for (int64_t c = 0; c < H; ++c) row[c] += yr[c] * weight;  // the product rounded, then added (no FMA here)
    }
  }
  return out;
}
