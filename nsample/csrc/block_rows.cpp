// Decode-time linear layers on a GGUF's own blocks (nsample/gguf_blocks.py): Q4_1, every 32 weights of a row along
// K d·q + m with q in 0..15 (the embedded model's projections), and Q8_0, d·q with q in -127..127 (its LM head).
// The weight is expanded to float32 block by block, in registers, with the same single rounding as the float32
// model's dequantized weight, so the expanded weights equal it bitwise, and multiplied into each activation row
// in float32. Each output element is one row's sums in a fixed order whatever the other rows: rows stay
// independent, bitwise.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <array>
#include <utility>

namespace {

#define AVX512 __attribute__((target("avx512f,fma")))

// Q4_1: 16 bytes per block (weight j in byte j's low nibble, 16 + j in its high one), weights d·q + m.
struct Q4_1 {
  static constexpr int64_t BYTES = 16;
  AVX512 static inline void expand(const uint8_t* q, float d, float m, __m512& w0, __m512& w1) {
    const __m128i low = _mm_set1_epi8(0x0F), bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(bytes, low)));  // weights 0..15
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), low)));
    const __m512 vd = _mm512_set1_ps(d), vm = _mm512_set1_ps(m);
    w0 = _mm512_fmadd_ps(lo, vd, vm);
    w1 = _mm512_fmadd_ps(hi, vd, vm);
  }
};

// Q8_0: 32 signed bytes per block, weights d·q (m unused).
struct Q8_0 {
  static constexpr int64_t BYTES = 32;
  AVX512 static inline void expand(const uint8_t* q, float d, float, __m512& w0, __m512& w1) {
    const __m512 vd = _mm512_set1_ps(d);
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)))),
                       vd);
    w1 = _mm512_mul_ps(
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)))), vd);
  }
};

constexpr int64_t AHEAD = 4;  // columns: each column asks for the blocks of the one this far ahead

AVX512 inline void prefetch(const void* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(static_cast<const char*>(p) + o, _MM_HINT_T0);
}

// One output column for R rows: y[r] = sum over blocks of x[r, block] · (the block's weights); q, d, m are the
// column's own (m null for Q8_0). The weights stream through once per step from far caches or memory, which
// the hardware prefetchers follow poorly across the three arrays: at one row, asking for the blocks four columns
// ahead halved the time of a gate/up projection (1, 2, 4, 8 columns ahead: 4 measured best, 8 as good).
template <class Format, int R>
AVX512 void column(const float* x, int64_t K, const uint8_t* q, const float* d, const float* m, float* y,
                   int64_t ldy) {
  const int64_t nb = K / 32;
  prefetch(q + AHEAD * nb * Format::BYTES, nb * Format::BYTES);
  prefetch(d + AHEAD * nb, nb * sizeof(float));
  if (m) prefetch(m + AHEAD * nb, nb * sizeof(float));
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512 w0, w1;
    Format::expand(q + b * Format::BYTES, d[b], m ? m[b] : 0.0f, w0, w1);
    for (int r = 0; r < R; ++r) {
      const float* xr = x + r * K + b * 32;
      acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr), w0, acc[r]);
      acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16), w1, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r * ldy] = _mm512_reduce_add_ps(acc[r]);
}

// Output columns [n0, n1) for R rows.
template <class Format, int R>
void rows(const float* x, int64_t K, const uint8_t* q, const float* d, const float* m, float* y, int64_t N,
          int64_t n0, int64_t n1) {
  const int64_t nb = K / 32;
  for (int64_t n = n0; n < n1; ++n)
    column<Format, R>(x, K, q + n * nb * Format::BYTES, d + n * nb, m ? m + n * nb : nullptr, y + n, N);
}

using Rows = void (*)(const float*, int64_t, const uint8_t*, const float*, const float*, float*, int64_t, int64_t,
                      int64_t);
constexpr int TILE = 16;  // rows per pass over the weights (16 accumulators fit AVX-512's 32 registers)

template <class Format, size_t... R>
constexpr std::array<Rows, TILE + 1> by_rows(std::index_sequence<R...>) {  // [R] handles R rows, R = 1..TILE
  return {nullptr, rows<Format, R + 1>...};
}
const auto BY_ROWS_Q4_1 = by_rows<Q4_1>(std::make_index_sequence<TILE>());
const auto BY_ROWS_Q8_0 = by_rows<Q8_0>(std::make_index_sequence<TILE>());

at::Tensor blocks_linear(const Rows* by_rows, const at::Tensor& x, const at::Tensor& q, const at::Tensor& d,
                         const float* m, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && x.is_contiguous(), "x: contiguous float (M, K)");
  const int64_t M = x.size(0), K = x.size(1), N = q.size(0);
  TORCH_CHECK(K % 32 == 0 && d.size(1) == K / 32, "weights: blocks of 32 along K");
  auto y = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint8_t* qp = static_cast<const uint8_t*>(q.data_ptr());
  const float* dp = d.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t r0 = 0; r0 < M; r0 += TILE) {
      const int64_t R = std::min<int64_t>(TILE, M - r0);
      by_rows[R](xp + r0 * K, K, qp, dp, m, yp + r0 * N, N, n0, n1);
    }
  });
  if (bias.has_value()) y.add_(*bias);
  return y;
}

}  // namespace

// x (M, K) float, q (N, K/2) uint8 (byte j of a block: weight j in the low nibble, weight 16 + j in the high),
// d, m (N, K/32) float, bias (N) or None -> (M, N) float.
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& q, const at::Tensor& d, const at::Tensor& m,
                     const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(q.size(1) == x.size(1) / 2 && q.scalar_type() == at::kByte, "q: uint8 (N, K/2)");
  return blocks_linear(BY_ROWS_Q4_1.data(), x, q, d, m.data_ptr<float>(), bias);
}

// x (M, K) float, q (N, K) int8, d (N, K/32) float, bias (N) or None -> (M, N) float.
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& q, const at::Tensor& d,
                     const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(q.size(1) == x.size(1) && q.scalar_type() == at::kChar, "q: int8 (N, K)");
  return blocks_linear(BY_ROWS_Q8_0.data(), x, q, d, nullptr, bias);
}
