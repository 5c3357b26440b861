// The float work around nsample's two-level int8 GEMM (nsample/cpu/int8_linear.py), one kernel each side instead of
// about fifteen small ATen ops: rounding each activation row to two int8 levels, and combining the GEMM's four
// level products into the output. Every step is per row, so a row's result never depends on the other rows.
// Plain C++ loops, vectorized by the compiler for whichever instruction set it is built for (nsample/cpu/kernels.py):
// with -ffp-contract=off nothing is fused but the fma written, so the roundings stay the ATen ops' on every one.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

constexpr float LEVEL = 254.0f;  // nsample.cpu.int8_linear.LEVEL

// x (M, K) float -> (levels (2M, K) int8: a1 over a2, t1 (M, 1) float) with x ≈ t1·(a1 + a2/LEVEL) row by row.
std::vector<at::Tensor> split_rows(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float (M, K)");
  const int64_t M = x.size(0), K = x.size(1);
  auto levels = at::empty({2 * M, K}, x.options().dtype(at::kChar));
  auto t1 = at::empty({M, 1}, x.options());
  const float* xp = x.data_ptr<float>();
  int8_t* lp = levels.data_ptr<int8_t>();
  float* tp = t1.data_ptr<float>();
  at::parallel_for(0, M, 16, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const float* row = xp + m * K;
      float top = 0.0f;
      for (int64_t k = 0; k < K; ++k) top = std::max(top, std::fabs(row[k]));
      const float t = std::max(top, FLT_MIN) / 127.0f;
      tp[m] = t;
      int8_t* a1 = lp + m * K;
      int8_t* a2 = lp + (M + m) * K;
      for (int64_t k = 0; k < K; ++k) {
        const float u = row[k] / t;
        const float r = std::nearbyint(u);
        a1[k] = static_cast<int8_t>(r);
        a2[k] = static_cast<int8_t>(std::nearbyint((u - r) * LEVEL));
      }
    }
  });
  return {levels, t1};
}

// y (2M, 2N) float, the GEMM of (a1 over a2) against (w1 | w2) with weight scales applied; t1 (M, 1); bias (N)
// or None -> (M, N): (a1·w1 + a1·w2) + (a2·w1 + a2·w2)/LEVEL, times t1, plus bias.
at::Tensor join_levels(const at::Tensor& y, const at::Tensor& t1, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(y.dim() == 2 && y.scalar_type() == at::kFloat && y.is_contiguous(), "y: contiguous float (2M, 2N)");
  const int64_t M = y.size(0) / 2, N = y.size(1) / 2;
  auto out = at::empty({M, N}, y.options());
  const float* yp = y.data_ptr<float>();
  const float* tp = t1.contiguous().data_ptr<float>();
  at::Tensor b = bias.has_value() ? bias->contiguous() : at::Tensor();
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float* op = out.data_ptr<float>();
  const float alpha = 1.0f / LEVEL;
  at::parallel_for(0, M, 16, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      const float* hi = yp + m * 2 * N;        // a1 against w1 | w2
      const float* lo = yp + (M + m) * 2 * N;  // a2 against w1 | w2
      float* o = op + m * N;
      for (int64_t n = 0; n < N; ++n) {
        const float z0 = hi[n] + hi[N + n], z1 = lo[n] + lo[N + n];
        o[n] = std::fma(z1, alpha, z0) * tp[m];  // as ATen adds with alpha: one fused multiply-add
        if (bp) o[n] += bp[n];
      }
    }
  });
  return out;
}
